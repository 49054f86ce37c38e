// The planner's cost model and cluster descriptions against seconds computed by hand on a tiny
// cluster of round numbers: every GEMM at 5e11 FLOP/s (peak 1e12 x efficiency 0.5), memory at 1e10 B/s,
// links of 1e9 B/s (intra-node) and 1e8 B/s (inter-node). The model: 2 GPT-2 blocks, C=64, 4 heads
// (HD=16), F=256, T=32, V=128, fp32 (4 bytes), tied embeddings, learned positions, linear biases.
// Tolerances: Approx() (relative 100 x float epsilon, 1.2e-5) compares double-precision formulas of a
// few dozen operations on exact inputs (each within ~1e-14 relative, whatever the CPU) with values
// written in decimal; any wrong term moves a result by far more.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "config/load.hpp"
#include "plan/cluster.hpp"
#include "plan/collective_cost.hpp"
#include "plan/cost_model.hpp"
#include "plan/rank_plan.hpp"

using namespace dtrain;

namespace {

ClusterSpec tiny_cluster(int nodes, int per_node, double inter_latency = 0) {
  ClusterSpec c;
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.peak_fp32 = c.peak_bf16 = 1e12;
  c.memory = 1e9;
  c.memory_bandwidth = 1e10;
  c.gemm_efficiency = {{1e6, 0.5}};
  c.intra_node = {1e9, 0};
  c.inter_node = {1e8, inter_latency};
  return c;
}

Config tiny_model(int global_batch) {
  return load_config("[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nffn_hidden_size=256\nseq_length=32\n"
                     "vocab_size=128\nglobal_batch_size=" + std::to_string(global_batch) + "\n", "t", {});
}

Layout layout(int tp, int cp, int dp, int pp, int mb) {
  Layout l;
  l.sizes = {tp, cp, dp, pp};
  l.micro_batch = mb;
  return l;
}

}  // namespace

TEST_CASE("cost model: one rank, one micro-batch of 4 samples", "[plan][cost]") {
  // N = 4 x 32 = 128 rows, QKV width 3 x 64 = 192.
  // GEMMs forward: QKV 2*128*64*192 + proj 2*128*64*64 + fc 2*128*64*256 + fcproj 2*128*256*64
  //   = 12,582,912 FLOPs / 5e11 = 25.165824 us
  // attention: 2 GEMMs x 4 samples x 4 heads of 32*32*16 FLOPs (causal half) = 524,288 / 5e11 = 1.048576 us
  // elementwise: norms and residuals 4*10*128*64 + activation 4*128*(256+256) (attention is fused: no
  //   scores in memory) = 327,680 + 262,144 = 589,824 B / 1e10 = 58.9824 us
  // block forward = 85.1968 us, backward 170.3936 us; two blocks: 511.1808 us
  // head: 2*128*64*128 / 5e11 = 4.194304 us + 3*4*128*128 B / 1e10 = 19.6608 us; x3 (fwd + bwd) = 71.565312 us
  // compute = 582.746112 us
  // parameters: per block 64*192+192 + 64*64+64 + 64*256+256 + 256*64+64 + 2 LayerNorms 256 = 49,984;
  //   wte 8192 + wpe 2048 + final LayerNorm 128 -> 110,336; AdamW 110,336 x (4 + 16 + 8) B / 1e10 = 308.9408 us
  const Config cfg = tiny_model(4);
  const StepCost c = predict_step(cfg, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1));
  CHECK(c.micro_batches == 1);
  CHECK(c.compute == Approx(582.746112e-6));
  // Elementwise kernels at 5e9 B/s: 117.9648 us per block forward, so 2 x 3 x 144.1792 us of blocks and
  // 3 x (4.194304 + 39.3216) us of head: 995.622912 us; the optimizer still at the memory bandwidth.
  ClusterSpec slow = tiny_cluster(1, 1);
  slow.elementwise_bandwidth = 5e9;
  const StepCost e = predict_step(cfg, layout(1, 1, 1, 1, 4), slow);
  CHECK(e.compute == Approx(995.622912e-6));
  CHECK(e.optimizer == Approx(c.optimizer));
  CHECK(c.optimizer == Approx(308.9408e-6));
  CHECK(c.tp == 0);
  CHECK(c.bubble == 0);
  CHECK(c.dp == 0);
  CHECK(c.step() == Approx(891.686912e-6));
  // The parameter count is the tensor table's (the memory estimate's source).
  CHECK(c.rank_params == Approx(static_cast<double>(whole_model_plan(cfg, 1).table.total())));
  // Frozen tensors (training.freeze) are neither reduced nor updated: block 1 frozen leaves 110,336 -
  // 49,984 = 60,352 parameters, AdamW 60,352 x 28 B / 1e10 = 168.9856 us; every block frozen, the
  // embedding and final norm's 10,368 (29.0304 us).
  Config one = cfg;
  one.training.freeze = "h1.*";
  CHECK(predict_step(one, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)).rank_params == Approx(60352));
  CHECK(predict_step(one, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)).optimizer == Approx(168.9856e-6));
  one.training.freeze = "h*";
  CHECK(predict_step(one, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)).optimizer == Approx(29.0304e-6));

  SECTION("selective recomputation runs the MLP activation again") {
    Layout l = layout(1, 1, 1, 1, 4);
    l.recompute = RecomputeGranularity::selective;
    // per block 262,144 B / 1e10 = 26.2144 us (fused attention keeps its log-sum-exp: nothing to
    // recompute there); two blocks 52.4288 us
    CHECK(predict_step(cfg, l, tiny_cluster(1, 1)).recompute == Approx(52.4288e-6));
    l.recompute = RecomputeGranularity::full;  // the block's forward again: 2 x 85.1968 us
    CHECK(predict_step(cfg, l, tiny_cluster(1, 1)).recompute == Approx(170.3936e-6));
  }
}

TEST_CASE("cost model: tensor parallelism inside and across nodes", "[plan][cost]") {
  const Config cfg = tiny_model(4);
  // tp=2, no sequence parallelism: each all-reduce of 128 x 64 x 4 = 32,768 B over 2 ranks moves
  // 2 x 1/2 x 32,768 B: at 1e9 B/s 32.768 us. Per block 2 forward + 2 backward = 131.072 us, two blocks
  // 262.144 us; the head: its input gradient 32.768 us + the loss's 3 x 128 floats (1,536 B) 1.536 us.
  const StepCost intra = predict_step(cfg, layout(2, 1, 1, 1, 4), tiny_cluster(1, 2));
  CHECK(intra.tp == Approx(296.448e-6));
  // The same group across nodes (1 device per node) uses the 1e8 B/s link: 10 times longer.
  const StepCost inter = predict_step(cfg, layout(2, 1, 1, 1, 4), tiny_cluster(2, 1));
  CHECK(inter.tp == Approx(2964.48e-6));
  // Sequence parallelism: an all-gather and a reduce-scatter (each 1/2 x 32,768 B) for each all-reduce:
  // the same bytes, so the same time.
  Layout sp = layout(2, 1, 1, 1, 4);
  sp.sequence_parallel = true;
  CHECK(predict_step(cfg, sp, tiny_cluster(1, 2)).tp == Approx(296.448e-6));
}

TEST_CASE("cost model: pipeline sends and bubble", "[plan][cost]") {
  // pp=2 over 2 nodes, micro-batch 1 of 4: m = 4, one block per stage, N = 32.
  // block forward 85.1968/4 = 21.2992 us, backward 42.5984; head (5.963776 us) x3 = 17.891328 us.
  // sends: activation forward + gradient backward of 32 x 64 x 4 = 8,192 B at 1e8 B/s + 1 us latency:
  //   2 x 82.92 = 165.84 us. Per micro-batch 247.628928 us, x4 = 990.515712 us.
  // 1F1B bubble (p-1)/(m+p-1) = 1/5 of the step: 1/4 of the rest = 247.628928 us.
  // AdamW on the first stage (wte + wpe + one block = 60,224 parameters) x 28 B / 1e10 = 168.6272 us.
  const Config cfg = tiny_model(4);
  const StepCost c = predict_step(cfg, layout(1, 1, 1, 2, 1), tiny_cluster(2, 1, 1e-6));
  CHECK(c.micro_batches == 4);
  CHECK(c.p2p == Approx(663.36e-6));
  CHECK(c.bubble_fraction == Approx(0.2));
  CHECK(c.bubble == Approx(247.628928e-6));
  CHECK(c.step() == Approx(1406.77184e-6));

  SECTION("zero-bubble H1: the same work, a third of the bubble in F = B = W units") {
    // zb-h1's simulated bubble at p = 2, m = 4 is the paper's (p-1)/(3m+p-1) = 1/13 of the step: 1/12 of
    // the rest, 990.515712 / 12 = 82.542976 us; compute, sends and the optimizer are 1F1B's.
    Layout zb = layout(1, 1, 1, 2, 1);
    zb.zero_bubble = true;
    CHECK(zb.schedule() == PipelineSchedule::zb_h1);
    const StepCost z = predict_step(cfg, zb, tiny_cluster(2, 1, 1e-6));
    CHECK(z.bubble_fraction == Approx(1.0 / 13.0));
    CHECK(z.bubble == Approx(82.542976e-6));
    CHECK(z.compute == Approx(c.compute));
    CHECK(z.step() == Approx(1406.77184e-6 - 247.628928e-6 + 82.542976e-6));
  }

  SECTION("the heaviest stage's parameters, counted per stage") {
    // Rotary positions (no wpe) and an untied head, tp=2: per block on a tp rank qkv 64*192/2 + 96,
    // proj 64*64/2 + 64, fc 256*64/2 + 128, fcproj 64*256/2 + 64, two LayerNorms 256 = 25,184.
    // Stage 0: wte/2 (4,096) + block 0 = 29,280; stage 1: block 1 + lnf (128) + lm_head/2 (4,096) = 29,408.
    const Config untied = load_config("[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nffn_hidden_size=256\n"
                                      "seq_length=32\nvocab_size=128\nglobal_batch_size=4\nposition_embedding_type=rope\n"
                                      "untie_embeddings_and_output_weights=true\n", "t", {});
    CHECK(predict_step(untied, layout(2, 1, 1, 2, 1), tiny_cluster(2, 2)).rank_params == 29408);
  }
}

TEST_CASE("cost model: data-parallel reduction, its overlap and ZeRO", "[plan][cost]") {
  // dp=2 in one node, micro-batch 2 of 4: m = 1. Gradients 110,336 fp32 = 441,344 B.
  const Config cfg = tiny_model(4);
  const ClusterSpec cl = tiny_cluster(1, 2);
  // All-reduce: 2 x 1/2 x 441,344 B at 1e9 B/s = 441.344 us, not overlapped.
  CHECK(predict_step(cfg, layout(1, 1, 2, 1, 2), cl).dp == Approx(441.344e-6));
  // Distributed optimizer: reduce-scatter 220.672 us + all-gather of the fp32 weights 220.672 us;
  // AdamW updates half: 55,168 x 28 B / 1e10 = 154.4704 us.
  Layout z1 = layout(1, 1, 2, 1, 2);
  z1.sizes.zero = 1;
  const StepCost c1 = predict_step(cfg, z1, cl);
  CHECK(c1.dp == Approx(441.344e-6));
  CHECK(c1.optimizer == Approx(154.4704e-6));
  // overlap_grad_reduce: the all-reduce hides behind the backward pass (2 blocks x 85.1968 us at 2
  // samples = 170.3936 us): 441.344 - 170.3936 = 270.9504 us exposed (more than the last block's half).
  Config overlap = cfg;
  overlap.system.overlap_grad_reduce = true;
  CHECK(predict_step(overlap, layout(1, 1, 2, 1, 2), cl).dp == Approx(270.9504e-6));
  // With 4 samples per micro-batch (global batch 8) the backward takes 340.7872 us, longer than the
  // earlier blocks' half of the reduction, but the last block's bucket (1/2 of it: 220.672 us) starts
  // only when the backward ends.
  Config wide = overlap;
  wide.model.global_batch_size = 8;
  CHECK(predict_step(wide, layout(1, 1, 2, 1, 4), cl).dp == Approx(220.672e-6));
  // ZeRO-3, micro-batch 1 (m = 2): a reduce-scatter per micro-batch (2 x 220.672 us) and the weights
  // gathered before each forward and backward, prefetched behind the forward (2 blocks x 21.2992 us at
  // 1 sample): 4 x (220.672 - 42.5984) = 712.2944 us; no gather at the end.
  Layout z3 = layout(1, 1, 2, 1, 1);
  z3.sizes.zero = 3;
  CHECK(predict_step(cfg, z3, cl).dp == Approx(441.344e-6 + 712.2944e-6));
  // Released buckets, ZeRO-3 at m = 2: the gradients of the first micro-batch whole and of the last but
  // the owned half, 4 B x 110,336 x 1.5 = 662,016 B; the fp32 weights after the forward and the
  // backward of each micro-batch but the owned half, 2 x 2 x 4 B x 110,336 x 0.5 = 882,688 B; at the
  // memory bandwidth (no release rate given) 154.4704 us, at a release rate of 1e9 B/s 1544.704 us.
  CHECK(predict_step(cfg, z3, cl).release == Approx(154.4704e-6));
  ClusterSpec host = cl;
  host.release_bandwidth = 1e9;
  CHECK(predict_step(cfg, z3, host).release == Approx(1544.704e-6));
  Layout z2 = z3;
  z2.sizes.zero = 2;
  CHECK(predict_step(cfg, z2, host).release == Approx(662.016e-6));
  CHECK(predict_step(cfg, z1, host).release == 0);
  // Parameter offload: the owned halves are given back too, 2 x 2 x 4 B x 55,168 = 882,688 B more at 1e9
  // B/s, 882.688 us; and copied from the host before each of the 4 gathers and to the device and back
  // around the optimizer: 6 x 4 B x 55,168 = 1,324,032 B over a 1e9 B/s host link, 1324.032 us.
  Config offload = cfg;
  offload.system.offload_params = true;
  host.host_link_bandwidth = 1e9;
  CHECK(predict_step(offload, z3, host).release == Approx(1544.704e-6 + 882.688e-6 + 1324.032e-6));
  // With the optimizer offloaded too, the update writes the slices in host memory: the 4 gathers' copies
  // only (882,688 B, 882.688 us), and the optimizer's link term moves the owned gradients alone (4 B x
  // 55,168 = 220,672 B, 220.672 us) besides AdamW at the host's memory rate (55,168 x 28 B / 5e9 B/s =
  // 308.9408 us).
  offload.system.offload_optimizer = true;
  host.host_memory_bandwidth = 5e9;
  const StepCost both = predict_step(offload, z3, host);
  CHECK(both.release == Approx(1544.704e-6 + 882.688e-6 + 882.688e-6));
  CHECK(both.optimizer == Approx(308.9408e-6 + 220.672e-6));
}

TEST_CASE("cost model: context-parallel ring and expert all-to-all", "[plan][cost]") {
  // cp=2 in one node, micro-batch 1 of 2: m = 2, N = 16 rows per rank. K/V per ring step 16 x 2 x 4 x 16
  // = 2,048 values: 8,192 B = 8.192 us forward, and their fp32 gradients as many bytes again backward.
  // Attention: 2 GEMMs x 4 heads of 16*32*16 FLOPs = 0.131072 us hides that much of each.
  // Per block (8.192 - 0.131072) + (16.384 - 0.262144) = 24.182784 us; 2 blocks x 2 micro-batches.
  const Config cfg = tiny_model(2);
  CHECK(predict_step(cfg, layout(1, 2, 1, 1, 1), tiny_cluster(1, 2)).cp == Approx(96.731136e-6));
  // 4 experts, ep=2 inside dp=2, top-2 routing at capacity 1: 32 x 2 = 64 rows of 64 x 4 B = 16,384 B per
  // all-to-all, 1/2 of it crosses: 8.192 us; 4 per block, 2 blocks, m = 1.
  Config moe = tiny_model(2);
  moe.model.num_experts = 4;
  Layout l = layout(1, 1, 2, 1, 1);
  l.sizes.ep = 2;
  CHECK(predict_step(moe, l, tiny_cluster(1, 2)).ep == Approx(65.536e-6));
  // The model's own routing keys: half the rows with top-1 routing, with a capacity factor of 0.5
  // (half the assignments kept), or with MoE in one block of two (moe_layer_freq = 2).
  Config top1 = moe, half_kept = moe, every_other = moe;
  top1.model.moe_router_topk = 1;
  half_kept.model.moe_capacity_factor = CapacityFactor{true, 0.5};
  every_other.model.moe_layer_freq = 2;
  for (const Config* c : {&top1, &half_kept, &every_other}) CHECK(predict_step(*c, l, tiny_cluster(1, 2)).ep == Approx(32.768e-6));
  // Parameters with MoE in block 0 only, on ep rank 0 (experts 0-1 of 4): the router 4*64, two experts'
  // fc 2*(256*64+256) and fcproj 2*(64*256+64), attention 64*192+192 + 64*64+64 and two LayerNorms 256:
  // 83,328; the dense block 1: 49,984; wte 8,192 + wpe 2,048 + lnf 128 = 10,368. In all 143,680.
  CHECK(predict_step(every_other, l, tiny_cluster(1, 2)).rank_params == 143680);
}

TEST_CASE("cost model: a GEMM's width picks its efficiency curve", "[plan][cost]") {
  // Curves per width: 0.25 at width 16 (the head dim), 0.5 at width 64 (the hidden size, the narrow side
  // of every linear layer and of the head). The linear layers cost as with the one curve of 0.5; attention
  // (2 GEMMs x 4 samples x 4 heads of 32*32*16 FLOPs) takes twice its 1.048576 us per block forward:
  // 1.048576 us more per block forward, x 3 (forward and backward) x 2 blocks = 6.291456 us more.
  const Config cfg = tiny_model(4);
  ClusterSpec by_width = tiny_cluster(1, 1);
  by_width.gemm_efficiency_by_width = {{16, {{1e6, 0.25}}}, {64, {{1e6, 0.5}}}};
  CHECK(predict_step(cfg, layout(1, 1, 1, 1, 4), by_width).compute == Approx(582.746112e-6 + 6.291456e-6));
}

TEST_CASE("cost model: attention's work beyond its GEMMs, per causal score", "[plan][cost]") {
  // 1 ns per causal score (forward and backward together): per block 4 samples x 4 heads x 32 x 32 / 2
  // = 8,192 scores, 8.192 us; two blocks 16.384 us more than the GEMMs alone.
  const Config cfg = tiny_model(4);
  ClusterSpec scored = tiny_cluster(1, 1);
  scored.attention_score_seconds = 1e-9;
  CHECK(predict_step(cfg, layout(1, 1, 1, 1, 4), scored).compute == Approx(582.746112e-6 + 16.384e-6));
}

TEST_CASE("cost model: the optimizer offloaded to host memory", "[plan][cost]") {
  // One rank, fp32: 49,984 x 2 + 10,368 = 110,336 owned parameters. AdamW reads the gradient, reads and
  // writes two moments, reads and writes the weights: 4 + 16 + 8 = 28 bytes each, 3,089,408 B (308.9408
  // us at 1e10 B/s in place). Offloaded on a GPU cluster with a 1e9 B/s host link and 5e9 B/s host
  // memory: 617.8816 us of AdamW, and the gradient down and the weights down and up, 12 bytes each,
  // 1,324,032 B over the link, 1324.032 us.
  Config cfg = tiny_model(4);
  cfg.system.offload_optimizer = true;
  ClusterSpec gpu = tiny_cluster(1, 1);
  gpu.host_link_bandwidth = 1e9;
  gpu.host_memory_bandwidth = 5e9;
  CHECK(predict_step(cfg, layout(1, 1, 1, 1, 4), gpu).optimizer == Approx(617.8816e-6 + 1324.032e-6));
  // A cpu cluster's device is the host: both rates are its memory bandwidth (1e10 B/s).
  ClusterSpec cpu = tiny_cluster(1, 1);
  cpu.device = ComputeDevice::cpu;
  CHECK(predict_step(cfg, layout(1, 1, 1, 1, 4), cpu).optimizer == Approx(308.9408e-6 + 132.4032e-6));
  // A GPU cluster that does not give them cannot price offload: the error names the key.
  CHECK_THROWS_WITH(predict_step(cfg, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)), Catch::Contains("host_link_gb_s"));
  gpu.host_memory_bandwidth = 0;
  CHECK_THROWS_WITH(predict_step(cfg, layout(1, 1, 1, 1, 4), gpu), Catch::Contains("cluster.host_memory_bandwidth_gb_s"));
}

TEST_CASE("cost model: experts of their own width", "[plan][cost]") {
  // 4 experts on one rank with top-1 routing are the dense MLP's work: the same compute (582.746112 us).
  Config moe = tiny_model(4);
  moe.model.num_experts = 4;
  moe.model.moe_router_topk = 1;
  CHECK(predict_step(moe, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)).compute == Approx(582.746112e-6));
  // Experts of width 128 (moe_ffn_hidden_size; the dense width is 256) halve the MLP's GEMMs, 16.777216
  // us per block forward, and its activation bytes, 26.2144 us: 21.495808 us saved per block forward,
  // x 3 (forward and backward) x 2 blocks = 128.974848 us less.
  moe.model.moe_ffn_hidden_size = 128;
  CHECK(predict_step(moe, layout(1, 1, 1, 1, 4), tiny_cluster(1, 1)).compute == Approx(582.746112e-6 - 128.974848e-6));
}

TEST_CASE("collectives: ring formulas and the link a group spans", "[plan][cost]") {
  const Link link{1e9, 1e-6};
  // all-reduce over 4: 2 x 3/4 x 4e6 B / 1e9 + 6 x 1 us = 6006 us; all-gather: 3000 + 3 x 1 = 3003 us.
  CHECK(all_reduce_s(4e6, 4, link) == Approx(6006e-6));
  CHECK(all_gather_s(4e6, 4, link) == Approx(3003e-6));
  CHECK(all_reduce_s(4e6, 1, link) == 0);
  // An all-reduce bandwidth of its own (half): 2 x 3/4 x 4e6 / 5e8 + 6 us = 12006 us; the all-gather keeps 3003 us.
  // A reduce-scatter bandwidth of its own (a quarter): 3/4 x 4e6 / 2.5e8 + 3 us = 12003 us.
  const Link summing{1e9, 1e-6, 5e8, 2.5e8};
  CHECK(all_reduce_s(4e6, 4, summing) == Approx(12006e-6));
  CHECK(all_gather_s(4e6, 4, summing) == Approx(3003e-6));
  CHECK(reduce_scatter_s(4e6, 4, summing) == Approx(12003e-6));
  CHECK(reduce_scatter_s(4e6, 4, link) == Approx(3003e-6));
  const ClusterSpec c = tiny_cluster(4, 8);
  CHECK(group_link(c, 1, 8).bandwidth == 1e9);   // tp=8: one node
  CHECK(group_link(c, 2, 4).bandwidth == 1e9);   // cp=4 after tp=2: 8 ranks, one node
  CHECK(group_link(c, 8, 2).bandwidth == 1e8);   // dp=2 after tp=8: two nodes
  CHECK(group_link(c, 1, 16).bandwidth == 1e8);  // tp=16 spans two nodes
}

TEST_CASE("cluster description: parsing, interpolation, errors naming the key", "[plan][cluster]") {
  const std::string text =
      "# a test cluster\n[cluster]\nname = t\nnodes = 2\ndevices_per_node = 4\npeak_tflops_fp32 = 10\npeak_tflops_bf16 = 100\n"
      "memory_gb = 16\nmemory_bandwidth_gb_s = 1000\ngemm_efficiency = 1e6:0.2, 1e8:0.6\nintra_node_bandwidth_gb_s = 100\n"
      "intra_node_latency_us = 2\ninter_node_bandwidth_gb_s = 10\ninter_node_latency_us = 5\n";
  const ClusterSpec c = parse_cluster(text, "t.ini");
  CHECK(c.world() == 8);
  CHECK(c.peak(Precision::bf16) == Approx(1e14));
  CHECK(c.memory == Approx(16e9));
  CHECK(c.inter_node.latency == Approx(5e-6));
  CHECK(c.efficiency(1e5) == Approx(0.2));  // held below the table
  CHECK(c.efficiency(1e7) == Approx(0.4));  // halfway in log(FLOPs)
  CHECK(c.efficiency(1e9) == Approx(0.6));  // held above
  const ClusterSpec again = parse_cluster(format_cluster(c), "again");
  CHECK(again.gemm_efficiency == c.gemm_efficiency);
  CHECK(again.inter_node.bandwidth == c.inter_node.bandwidth);
  CHECK(again.nodes == c.nodes);
  CHECK(again.elementwise_bandwidth == 0);  // optional keys: absent, then the memory bandwidth stands in
  CHECK(again.elementwise_rate() == Approx(1e12));
  CHECK(again.released_rate() == Approx(1e12));
  CHECK(again.intra_node.all_reduce_rate() == Approx(1e11));
  const ClusterSpec measured = parse_cluster(text + "elementwise_gb_s = 20\nreleased_memory_gb_s = 2\nintra_node_all_reduce_gb_s = 50\n", "m");
  const ClusterSpec round_trip = parse_cluster(format_cluster(measured), "again");
  CHECK(round_trip.elementwise_rate() == Approx(20e9));
  CHECK(round_trip.released_rate() == Approx(2e9));
  CHECK(round_trip.intra_node.all_reduce_rate() == Approx(50e9));
  CHECK(round_trip.inter_node.all_reduce_rate() == Approx(10e9));
  CHECK(parse_cluster(format_cluster(parse_cluster(text + "inter_node_reduce_scatter_gb_s = 4\n", "m")), "again")
            .inter_node.reduce_scatter_rate() == Approx(4e9));

  // A curve per GEMM width: width 64 at 0.2-0.6 and width 256 at 0.4-0.8 over 1e6-1e8 FLOPs. Width 128
  // lies halfway between them in log(width): at 1e7 FLOPs (0.3 and 0.5 on the two curves) 0.4. Widths
  // beyond the ends take the end curves; without curves per width the one curve serves every width.
  const ClusterSpec wide = parse_cluster(text + "gemm_efficiency_by_width = 64/1e6:0.2, 64/1e8:0.4, 256/1e6:0.4, 256/1e8:0.6\n", "w");
  REQUIRE(wide.gemm_efficiency_by_width.size() == 2);
  CHECK(wide.efficiency(1e7, 128) == Approx(0.4));
  CHECK(wide.efficiency(1e7, 16) == Approx(0.3));
  CHECK(wide.efficiency(1e9, 1024) == Approx(0.6));
  CHECK(wide.efficiency(1e7) == Approx(0.4));  // the one curve, as before
  CHECK(c.efficiency(1e7, 16) == Approx(0.4));
  const ClusterSpec wide_again = parse_cluster(format_cluster(wide), "again");
  CHECK(wide_again.gemm_efficiency_by_width == wide.gemm_efficiency_by_width);
  CHECK(parse_cluster(format_cluster(parse_cluster(text + "attention_score_ns = 2.5\n", "a")), "again").attention_score_seconds ==
        Approx(2.5e-9));
  CHECK(again.attention_score_seconds == 0);  // not measured: attention is its GEMMs
  const ClusterSpec linked = parse_cluster(format_cluster(parse_cluster(text + "host_link_gb_s = 25\nhost_memory_bandwidth_gb_s = 80\n", "l")), "again");
  CHECK(linked.host_link_rate() == Approx(25e9));
  CHECK(linked.host_memory_rate() == Approx(80e9));

  auto error_of = [](const std::string& t) {
    try {
      parse_cluster(t, "t.ini");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  CHECK_THAT(error_of(replace("nodes = 2\n", "")), Catch::Contains("the key 'cluster.nodes' is missing"));
  CHECK_THAT(error_of(replace("memory_gb", "memory_gib")), Catch::Contains("did you mean 'cluster.memory_gb'"));
  CHECK_THAT(error_of(replace("1e8:0.6", "1e5:0.6")), Catch::Contains("cluster.gemm_efficiency='1e6:0.2, 1e5:0.6'"));
  CHECK_THAT(error_of(replace("0.6", "1.5")), Catch::Contains("efficiencies in (0, 1]"));
  for (const char* bad : {"256/1e6:0.4, 64/1e6:0.2", "64/1e8:0.4, 64/1e6:0.2", "64:0.2", "64/1e6:1.2", "x/1e6:0.2", "64/1e6:0.2 extra"})
    CHECK_THAT(error_of(text + "gemm_efficiency_by_width = " + bad + "\n"),
               Catch::Contains("cluster.gemm_efficiency_by_width='" + std::string(bad) + "' must be WIDTH/FLOPS:EFFICIENCY"));
  CHECK_THAT(error_of(replace("memory_gb = 16", "memory_gb = -1")), Catch::Contains("cluster.memory_gb="));
  CHECK_THAT(error_of(replace("nodes = 2", "nodes = two")), Catch::Contains("cluster.nodes"));
  CHECK_THAT(error_of(text + "released_memory_gb_s = -2\n"), Catch::Contains("cluster.released_memory_gb_s="));
  CHECK_THAT(error_of(text + "attention_score_ns = -1\n"), Catch::Contains("cluster.attention_score_ns="));
  CHECK_THAT(error_of(text + "host_link_gb_s = -1\n"), Catch::Contains("cluster.host_link_gb_s="));
}
