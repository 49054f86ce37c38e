// The per-rank plan against sizes computed by hand (no MPI): a tiny GPT (4 layers, d=8, 2 heads,
// F=32, T=4, V=16) on one rank, and rank (tp=1, pp=1, dp=1) of a tp=2 x pp=2 x dp=2 layout with the
// distributed optimizer. Tensors start on 16-float boundaries; the arithmetic is in the comments.
#include <catch2/catch.hpp>

#include "support/user_error.hpp"

#include "ckpt/checkpoint.hpp"
#include "config/load.hpp"
#include "model/gpt.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

Config tiny(const std::vector<std::string>& overrides = {}) {
  return load_config("[model]\nnum_layers=4\nhidden_size=8\nnum_attention_heads=2\nseq_length=4\nvocab_size=16\n"
                     "global_batch_size=8\nmicro_batch_size=1\n", "tiny", overrides);
}

std::size_t offset_of(const RankPlan& p, const std::string& name) { return p.table.get(name).offset; }

}  // namespace

TEST_CASE("rank plan of the whole model on one rank", "[plan][rank_plan]") {
  const Config c = tiny();
  const RankPlan p = make_rank_plan(c, make_plan(c, 1), Coords{});
  // wte (16,8) = 128 at 0, wpe (4,8) = 32 at 128; block 0 starts at 160. Within a block (aligned):
  // ln1_w 0, ln1_b 16, qkv_w (3,8,8) 32..224, qkv_b (3,8) 224..248, proj_w 256..320, proj_b 320,
  // ln2_w 336, ln2_b 352, fc_w (32,8) 368..624, fc_b 624..656, fcproj_w (8,32) 656..912, fcproj_b
  // 912..920: a block spans 928. Four blocks end at 160 + 3*928 + 920 = 3864; lnf_w 3872, lnf_b 3888.
  CHECK(offset_of(p, "wpe") == 128);
  CHECK(offset_of(p, "h0.ln1_w") == 160);
  CHECK(offset_of(p, "h0.proj_w") == 160 + 256);
  CHECK(offset_of(p, "h1.ln1_w") == 160 + 928);
  CHECK(offset_of(p, "lnf_b") == 3888);
  CHECK(p.table.total() == 3896);
  CHECK(p.arena_size == 3904);  // padded to 16
  REQUIRE(p.buckets.size() == 6);
  CHECK(p.buckets[0].range.begin == 0);
  CHECK(p.buckets[0].range.end == 160);
  CHECK(p.buckets[1].range.end == 1088);  // block 0 with its alignment gap
  CHECK(p.buckets[4].range.begin == 2944);
  CHECK(p.buckets[4].range.end == 3872);  // the head's group starts the next bucket
  CHECK(p.buckets[5].range.end == 3904);
  REQUIRE(p.optimizer_ranges.size() == 1);
  CHECK(p.optimizer_elements() == 3904);
  CHECK(p.tied_embedding == -1);
  for (std::size_t i = 0; i < p.table.tensors().size(); ++i) CHECK(p.writes_params(i));
  // Activations, 1 slot, B=1 T=4 (N=4) C=8, every piece rounded up to 16 floats: per block
  // ln1_mean/rstd 16+16, ln1 32, qkv 96, atty 32, lse (1,2,4) 16, res1 32, ln2_mean/rstd 16+16, ln2 32,
  // fch 128, fch_gelu 128, res2 32 = 592; slot = stage_input 32 + 4 x 592 + head (16+16+32+64+16+16+16+16
  // = 192) = 2592; scratch 592 (dres, rows_full, rows_shard, dln 32 each, datty 32, dqkv 96, dfch, dfch2
  // 128 each, dtt NH x T x max(2 x min(T,128), B) = 2 x 4 x 8 = 64, dloss 16).
  CHECK(p.activations.slots == 1);
  CHECK(p.activations.bytes() == 4 * (2592 + 592));
  const MemoryEstimate m = p.memory();
  CHECK(m.params == 3904 * 4);
  CHECK(m.grads == 3904 * 4);
  CHECK(m.optimizer == 2 * 3904 * 4);
  CHECK(m.activations == 3184 * 4);
  // Buffers: tokens and targets of m = 8 micro-batches (2 x 8 x 4 ints) and one (4,8) message.
  CHECK(m.buffers == (2 * 8 * 4 + 32) * 4);
  CHECK(std::string(m.biggest_term()) == "optimizer");
}

TEST_CASE("rank plan in bf16: bf16 weights and activations, fp32 gradients, master weights and moments", "[plan][rank_plan]") {
  const Config c = tiny({"--system.precision=bf16"});
  const RankPlan p = make_rank_plan(c, make_plan(c, 1), Coords{});
  CHECK(p.precision == Precision::bf16);
  CHECK(p.compute_type_bytes() == 2);
  // In bytes, every piece rounded up to 64. Per block: ln1/ln2 mean and rstd 4 x 64, ln1 (32 bf16) 64,
  // qkv (96) 192, atty 64, lse (8 floats) 64, res1 64, ln2 64, fch (128) 256, fch_gelu 256, res2 64 = 1344.
  // Slot: stage_input 64 + 4 x 1344 + head (lnf mean, rstd, lnf 64 each, logits (64) 128, four float
  // rows 4 x 64) = 6016. Scratch: dres, rows_full, rows_shard, dln, datty 64 each, dqkv 192, dfch, dfch2
  // 256 each, dtt (64 floats) 256, dloss 64 = 1344; no fp32 partial sums: without tensor parallelism the
  // GEMMs write bf16 rows directly (with tp they would add 128 and their shard 128).
  CHECK(p.activations.bytes() == 6016 + 1344);
  const MemoryEstimate m = p.memory();
  CHECK(m.params == 3904 * 2);
  CHECK(m.grads == 3904 * 4);
  CHECK(m.optimizer == 3 * 3904 * 4);  // master weights, first and second moments
  CHECK(m.activations == 6016 + 1344);
  CHECK(m.buffers == 2 * 8 * 4 * 4 + 32 * 2);  // int tokens and targets, one bf16 (4,8) message
}

TEST_CASE("rank plan with the optimizer offloaded: its state and staging leave a GPU's total", "[plan][rank_plan][offload]") {
  // bf16, 3904 owned elements: master weights and moments 3 x 3904 x 4, staging of the owned gradients
  // (fp32) and weights (bf16) 3904 x (4 + 2). On a GPU all of it is host memory, outside the total; on
  // the host (the device is host memory) it stays in the optimizer term.
  for (const char* device : {"cuda", "cpu"}) {
    const Config c = tiny({"--system.precision=bf16", "--system.offload_optimizer=true", std::string("--system.device=") + device});
    const MemoryEstimate m = make_rank_plan(c, make_plan(c, 1), Coords{}).memory();
    const std::size_t offloaded = 3 * 3904 * 4 + 3904 * (4 + 2);
    INFO(device);
    CHECK(m.optimizer == (device == std::string("cpu") ? offloaded : 0));
    CHECK(m.offloaded == (device == std::string("cpu") ? 0 : offloaded));
    CHECK(m.total() == m.params + m.grads + m.optimizer + m.activations + m.buffers);
  }
}

TEST_CASE("rank plan of tp rank 1, last stage, dp rank 1 of tp=2 pp=2 dp=2 with the distributed optimizer", "[plan][rank_plan]") {
  const Config c = tiny({"--system.tensor_model_parallel_size=2", "--system.pipeline_model_parallel_size=2",
                         "--system.use_distributed_optimizer=true"});
  const TrainingPlan plan = make_plan(c, 8);
  REQUIRE(plan.num_micro_batches == 4);
  Coords at;
  at.tp = 1, at.pp = 1, at.dp = 1;
  const RankPlan p = make_rank_plan(c, plan, at);
  // Stage 1 holds blocks 2 and 3 and the head. wte (16,8) split by rows: (8,8) = 64 at 0. A block at
  // tp=2: ln1 8+8, qkv_w (3,4,8) 96, qkv_b (3,4) 12, proj_w (8,4) 32, proj_b 8, ln2 8+8, fc_w (16,8)
  // 128, fc_b 16, fcproj_w (8,16) 128, fcproj_b 8: offsets 64, 80, 96, 192, 208, 240, 256, 272, 288,
  // 416, 432, 560..568; a block spans 512. Block 3 at 576..1080; lnf_w 1088, lnf_b 1104..1112.
  CHECK(p.part.layers() == std::vector<int>{2, 3});
  CHECK(offset_of(p, "h2.qkv_w") == 96);
  CHECK(p.table.get("h2.qkv_w").local_offset == std::vector<long>{0, 4, 0});
  CHECK(offset_of(p, "h3.ln1_w") == 576);
  CHECK(p.table.total() == 1112);
  CHECK(p.arena_size == 1120);  // padded to 16 x dp
  // Groups start on multiples of 16 x dp = 32, so the buckets are [0,64) [64,576) [576,1088)
  // [1088,1120); dp rank 1 owns the upper half of each: [32,64) [320,576) [832,1088) [1104,1120).
  REQUIRE(p.optimizer_ranges.size() == 4);
  CHECK(p.optimizer_ranges[1].begin == 320);
  CHECK(p.optimizer_ranges[2].begin == 832);
  CHECK(p.optimizer_ranges[3].begin == 1104);
  CHECK(p.optimizer_elements() == 560);
  // tp rank 1 counts only split tensors, and never the last stage's copy of the tied embedding.
  const auto& t = p.table.tensors();
  for (std::size_t i = 0; i < t.size(); ++i) {
    INFO(t[i].name);
    CHECK(bool(p.counted[i]) == (t[i].split_dim >= 0 && t[i].name != "wte"));
    CHECK_FALSE(p.writes_params(i));                         // dp rank 1
    CHECK(p.writes_moments(i) == bool(p.counted[i]));      // its optimizer slices
  }
  CHECK(p.tied_embedding == 0);
  CHECK(p.sequence_parallel_tensors.empty());
  // 1F1B, p=2, m=4: stage 1 holds min(4, 2-1) = 1 micro-batch. B=1 T=4 C=8 Cl=4 NHl=1 Fl=16 Vl=8:
  // per block 16+16+32+48+16(lse)+16+32+16+16+32+64+64+32 = 400; slot = 32 + 2 x 400 + head 160 = 992;
  // scratch 32+32+32+32+16+48+64+64+32(dtt: 1 x 4 x 8)+16 = 368.
  CHECK(p.activations.slots == 1);
  CHECK(p.activations.bytes() == 4 * (992 + 368));
  // Stage 0 holds min(4, 2) = 2 micro-batches.
  at.pp = 0;
  CHECK(make_rank_plan(c, plan, at).activations.slots == 2);
}

TEST_CASE("rank plan of a mixture-of-experts model: expert tensors split over tp like the MLP, over ep by experts", "[plan][rank_plan][moe]") {
  const Config c = tiny({"--model.num_experts=4", "--model.moe_ffn_hidden_size=8", "--model.moe_layer_freq=2",
                         "--system.tensor_model_parallel_size=2"});
  Coords at;
  at.tp = 1;
  const RankPlan p = make_rank_plan(c, make_plan(c, 2), at);
  // tp=2: wte (8,8) 0..64, wpe 64..96; blocks 0 and 2 are MoE, 1 and 3 dense. A MoE block from its start:
  // ln1 0, 16; qkv_w (3,4,8) 32..128, qkv_b 128..140, proj_w (8,4) 144..176, proj_b 176, ln2 192, 208;
  // router_w (4,8) 224..256 (replicated), expert_fc_w (4,4,8) 256..384, expert_fc_b (4,4) 384..400,
  // expert_fcproj_w (4,8,4) 400..528, expert_fcproj_b (4,8) 528..560: it spans 560. A dense block
  // spans 512 (see above). h0 at 96, h1 at 656, h2 at 1168, h3 at 1728..2232; lnf_w 2240, lnf_b 2256..2264.
  CHECK(offset_of(p, "h0.router_w") == 96 + 224);
  CHECK(offset_of(p, "h0.expert_fc_w") == 96 + 256);
  CHECK(offset_of(p, "h0.expert_fcproj_b") == 96 + 528);
  CHECK(offset_of(p, "h1.ln1_w") == 656);
  CHECK(offset_of(p, "h2.ln1_w") == 1168);
  CHECK(offset_of(p, "h3.ln1_w") == 1728);
  CHECK(p.table.total() == 2264);
  CHECK(p.table.find("h0.fc_w") == nullptr);
  CHECK(p.table.find("h1.router_w") == nullptr);
  const TensorSpec& fc = p.table.get("h2.expert_fc_w");
  CHECK(fc.global_shape == std::vector<long>{4, 8, 8});
  CHECK(fc.local_shape == std::vector<long>{4, 4, 8});
  CHECK(fc.local_offset == std::vector<long>{0, 4, 0});
  CHECK(p.table.get("h2.expert_fcproj_w").local_offset == std::vector<long>{0, 0, 4});
  for (const auto& t : p.table.tensors()) {
    INFO(t.name);
    CHECK(t.expert == (t.name.find(".expert_") != std::string::npos));
  }
  // The router and the fcproj biases are replicated over tp: tp rank 1 does not count them.
  const auto& t = p.table.tensors();
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i].name == "h0.router_w" || t[i].name == "h0.expert_fcproj_b") CHECK_FALSE(p.counted[i]);

  // Activations (fp32, 64-byte pieces; N = 4 tokens, E = 4, K = 2, R = 8 rows, C = 8, Fe = He = 4): a MoE
  // block keeps probs (16 floats) 64, idx, w, pos (8 each) 3 x 64, src, row_w (8) 2 x 64, xin (64) 256,
  // fch (32) 128, act (32) 128, out (64) 256 = 1152 bytes instead of the dense fch and fch_gelu (64 + 64
  // floats, 512); the MoE scratch: logits 64, dw 64, daux 64, drows 256, dact 128, dfch 128, dxin 256 = 960.
  const RankPlan dense = make_rank_plan(tiny({"--system.tensor_model_parallel_size=2"}), make_plan(c, 2), at);
  CHECK(p.activations.bytes() == dense.activations.bytes() + 2 * (1152 - 512) + 960);
  CHECK(p.memory().activations == p.activations.bytes());

  // Over expert parallelism each rank holds whole experts, initialised by their global index: the
  // slice of ep rank 1 of 2 is experts 2 and 3 of the one-rank tensor, value for value (SwiGLU: (E,2,F',C)).
  const ModelShape shape = ModelShape::from(tiny({"--model.num_experts=4", "--model.moe_ffn_hidden_size=8", "--model.swiglu=true"}));
  const StagePart part = stage_part(PipelineSplit{4}, 0);
  const TensorTable whole(shape, part, 1, 0), half(shape, part, 1, 0, 16, 2, 1);
  const TensorSpec& w = whole.get("h1.expert_fc_w");
  const TensorSpec& h = half.get("h1.expert_fc_w");
  CHECK(w.global_shape == std::vector<long>{4, 2, 8, 8});
  CHECK(h.local_shape == std::vector<long>{2, 2, 8, 8});
  CHECK(h.local_offset == std::vector<long>{2, 0, 0, 0});
  CHECK(half.get("h1.router_w").local_shape == std::vector<long>{4, 8});  // not an expert tensor
  std::vector<float> a(whole.total()), b(half.total());
  init_parameters(whole, 1234, a.data());
  init_parameters(half, 1234, b.data());
  for (std::size_t i = 0; i < h.numel; ++i) REQUIRE(b[h.offset + i] == a[w.offset + w.numel / 2 + i]);
  CHECK(testing::contains(testing::error_of([&] { TensorTable(shape, part, 1, 0, 16, 3, 0); }),
                         "model.num_experts=4 is not divisible by system.expert_model_parallel_size=3"));
}

TEST_CASE("rank plan under expert parallelism: expert buckets sliced over the expert-data-parallel group", "[plan][rank_plan][moe][ep]") {
  const Config c = tiny({"--model.num_experts=4", "--model.moe_ffn_hidden_size=8", "--model.moe_layer_freq=2",
                         "--system.expert_model_parallel_size=2", "--system.use_distributed_optimizer=true"});
  const TrainingPlan plan = make_plan(c, 4);  // dp = 4, ep = 2, edp = 2
  Coords at;
  at.dp = 3;  // EP rank 3 % 2 = 1 (experts 2 and 3), EDP rank 3 / 2 = 1
  const RankPlan p = make_rank_plan(c, plan, at);
  // Groups start on multiples of 16 x dp = 64. wte 0..128, wpe 128..160; h0 (MoE) at 192: ln1 192, 208;
  // qkv_w 224..416, qkv_b 416..440, proj_w 448..512, proj_b 512..520, ln2 528, 544..552, router_w (4,8)
  // 560..592; its experts (2 local) at 640: expert_fc_w (2,8,8) 640..768, expert_fc_b 768..784,
  // expert_fcproj_w (2,8,8) 784..912, expert_fcproj_b (2,8) 912..928. h1 (dense, 920) at 960..1880;
  // h2 at 1920, its router ends at 2320, its experts at 2368..2656; h3 at 2688..3608; lnf 3648, 3664..3672.
  CHECK(offset_of(p, "h0.router_w") == 560);
  CHECK(offset_of(p, "h0.expert_fc_w") == 640);
  CHECK(offset_of(p, "h2.expert_fc_w") == 2368);
  CHECK(offset_of(p, "lnf_b") == 3664);
  CHECK(p.arena_size == 3712);
  CHECK(p.table.get("h0.expert_fc_w").local_offset == std::vector<long>{2, 0, 0});
  REQUIRE(p.buckets.size() == 8);
  const std::vector<std::size_t> ends = {192, 640, 960, 1920, 2368, 2688, 3648, 3712};
  for (std::size_t i = 0; i < ends.size(); ++i) {
    CHECK(p.buckets[i].range.end == ends[i]);
    CHECK(p.buckets[i].expert == (i == 2 || i == 5));
  }
  // Dense buckets: the last quarter (dp rank 3 of 4); expert buckets (320): the second half (edp rank 1 of 2).
  const std::vector<std::pair<std::size_t, std::size_t>> owned = {{144, 192},   {528, 640},   {800, 960},   {1680, 1920},
                                                                   {2256, 2368}, {2528, 2688}, {3408, 3648}, {3696, 3712}};
  REQUIRE(p.optimizer_ranges.size() == owned.size());
  for (std::size_t i = 0; i < owned.size(); ++i) {
    CHECK(p.optimizer_ranges[i].begin == owned[i].first);
    CHECK(p.optimizer_ranges[i].end == owned[i].second);
  }
  CHECK(p.optimizer_elements() == 1088);
  CHECK(p.memory().optimizer == 2 * 1088 * 4);
  // Without the distributed optimizer the first replica writes: dp rank 0 the dense tensors, EDP rank 0
  // (dp ranks 0 and 1: both EP ranks) the experts.
  Config plain = c;
  plain.system.use_distributed_optimizer = false;
  for (int dp = 0; dp < 4; ++dp) {
    at.dp = dp;
    const RankPlan q = make_rank_plan(plain, make_plan(plain, 4), at);
    const auto& t = q.table.tensors();
    for (std::size_t i = 0; i < t.size(); ++i) {
      INFO(t[i].name << " at dp rank " << dp);
      CHECK(q.writes_params(i) == (t[i].expert ? dp < 2 : dp == 0));
      CHECK(q.writes_moments(i) == q.writes_params(i));
    }
  }
}

TEST_CASE("rank plan with sequence parallelism lists the LayerNorm tensors", "[plan][rank_plan]") {
  const Config c = tiny({"--system.tensor_model_parallel_size=2", "--system.sequence_parallel=true"});
  const RankPlan p = make_rank_plan(c, make_plan(c, 2), Coords{});
  std::vector<std::string> names;
  for (int i : p.sequence_parallel_tensors) names.push_back(p.table.tensors()[static_cast<std::size_t>(i)].name);
  CHECK(names.size() == 4 * 4 + 2);  // ln1_w/b, ln2_w/b per block, lnf_w/b
  CHECK(names.front() == "h0.ln1_w");
  CHECK(names.back() == "lnf_b");
  CHECK(p.activations.dims.seq_shards == 2);
}

TEST_CASE("rank plan with activation recomputation keeps only what the backward pass cannot rerun", "[plan][rank_plan]") {
  auto bytes = [](const std::vector<std::string>& o) {
    const Config c = tiny(o);
    return make_rank_plan(c, make_plan(c, 1), Coords{}).activations.bytes();
  };
  // The tiny model above: a block keeps 592 floats (lse 16 and fch_gelu 128 of them, res2 32), the slot
  // 2592 with 4 blocks, the scratch 592.
  // selective: no block keeps fch_gelu (4 x 128 fewer); the scratch holds one (+128). Attention keeps
  // its log-sum-exp, so nothing of it is recomputed.
  CHECK(bytes({"--model.recompute_granularity=selective"}) == 4 * (2592 - 4 * 128 + 592 + 128));
  // full, uniform groups of 1: every block keeps only res2 (32 + 4 x 32 + head 192 = 352); the scratch
  // holds one whole block to replay (+592).
  CHECK(bytes({"--model.recompute_granularity=full"}) == 4 * (352 + 592 + 592));
  // full, groups of 3 ([0,3) and [3,4)): res2 of blocks 2 and 3 (32 + 64 + 192 = 288); 3 blocks to replay.
  CHECK(bytes({"--model.recompute_granularity=full", "--model.recompute_num_layers=3"}) == 4 * (288 + 592 + 3 * 592));
  // full, block method, 1 block: block 0 keeps res2, blocks 1-3 everything (32 + 32 + 3 x 592 + 192);
  // one block to replay.
  CHECK(bytes({"--model.recompute_granularity=full", "--model.recompute_method=block", "--model.recompute_num_layers=1"}) ==
        4 * (2032 + 592 + 592));
}

TEST_CASE("rank plan under ZeRO-2 and ZeRO-3 keeps the owned slices and the buckets in use", "[plan][rank_plan][zero]") {
  // The tiny GPT at dp=2 (buckets start on multiples of 32): the embedding's bucket [0,160), four
  // blocks of 928, the head's [3872,3904). Each rank owns half of each: 80 + 4 x 464 + 16 = 1952.
  auto plan_of = [](int stage, int global_batch, const std::vector<std::string>& more = {}) {
    std::vector<std::string> o = {"--system.use_distributed_optimizer=true", "--system.zero_stage=" + std::to_string(stage),
                                  "--model.global_batch_size=" + std::to_string(global_batch)};
    o.insert(o.end(), more.begin(), more.end());
    const Config c = tiny(o);
    Coords at;
    at.dp = 1;
    return make_rank_plan(c, make_plan(c, 2), at);
  };
  const RankPlan one = plan_of(1, 2);
  CHECK(one.zero_stage() == 1);
  CHECK(one.memory().params == 3904 * 4);
  CHECK(one.memory().grads == 3904 * 4);
  REQUIRE(one.buckets.size() == 6);
  CHECK(one.buckets[1].range.end - one.buckets[1].range.begin == 928);
  CHECK(one.optimizer_elements() == 1952);
  // ZeRO-2, one micro-batch per step: owned 1952 + the unowned halves of the embedding's and the head's
  // buckets (whole through the backward pass) and of two blocks: (160 + 32 + 2 x 928) / 2 = 1024.
  const RankPlan two = plan_of(2, 2);
  CHECK(two.memory().grads == (1952 + 1024) * 4);
  CHECK(two.memory().params == 3904 * 4);
  // With 4 micro-batches every micro-batch is reduced: the same buckets, and an accumulator of the slices.
  CHECK(plan_of(2, 8).memory().grads == (2 * 1952 + 1024) * 4);
  // ZeRO-3: parameters too: 1952 + a block and the prefetched next one, unowned halves: 928.
  const RankPlan three = plan_of(3, 2);
  CHECK(three.memory().params == (1952 + 928) * 4);
  CHECK(three.memory().grads == (1952 + 1024) * 4);
  CHECK(three.memory().optimizer == 2 * 1952 * 4);
  // MPI's reduce-scatter temporaries: twice the largest bucket (928); without the distributed
  // optimizer, half of it for the all-reduce. Tokens (2 x 1 x 4 ints) and one (4,8) message besides.
  CHECK(three.memory().buffers == (2 * 1 * 4 + 32 + 2 * 928) * 4);
  Config plain = tiny({"--model.global_batch_size=2"});
  Coords at;
  at.dp = 1;
  CHECK(make_rank_plan(plain, make_plan(plain, 2), at).memory().buffers == (2 * 1 * 4 + 32 + 928 / 2) * 4);
  // Full recomputation in groups of 2 replays two blocks with a third prefetched: 3 x 928 / 2 = 1392.
  CHECK(plan_of(3, 2, {"--model.recompute_granularity=full", "--model.recompute_num_layers=2"}).memory().params ==
        (1952 + 1392) * 4);
  // An asynchronous save's snapshot: what the rank writes. Every tensor is counted on this rank (tp=1,
  // pp=1): its slices of the parameters and both moments, 3 x (1952 minus the alignment gaps in its
  // halves: a block's upper half [464,928) holds fc_w 160 + fc_b 32 + fcproj_w 256 + fcproj_b 8 and 8
  // of padding; the head's [3888,3904) lnf_b 8 and 8 of padding): 3 x (1952 - 4 x 8 - 8) = 5736.
  CHECK(three.checkpoint_elements() == 5736);
  CHECK(plan_of(3, 2, {"--checkpoint.async_save=true"}).memory().buffers == three.memory().buffers + 5736 * 4);
  // Parameter offload: the owned slices leave the device; a block and the prefetched next one, whole
  // (2 x 928), stay. On a GPU the slices (1952 fp32) are host memory outside the total; on the host they
  // are counted in params (the two memories are one).
  // With the optimizer offloaded too, its staging holds the owned gradients only (the update writes the
  // offloaded slices in place): moments 2 x 1952 x 4 and gradients 1952 x 4 besides the slices.
  for (const char* device : {"cuda", "cpu"}) {
    const MemoryEstimate off = plan_of(3, 2, {"--system.offload_params=true", std::string("--system.device=") + device}).memory();
    INFO(device);
    CHECK(off.params == (device == std::string("cpu") ? 2 * 928 + 1952 : 2 * 928) * 4);
    CHECK(off.offloaded == (device == std::string("cpu") ? 0 : 1952 * 4));
    const MemoryEstimate both =
        plan_of(3, 2, {"--system.offload_params=true", "--system.offload_optimizer=true", std::string("--system.device=") + device})
            .memory();
    CHECK(both.offloaded == (device == std::string("cpu") ? 0 : (1 + 2 + 1) * 1952 * 4));
    CHECK(both.optimizer == (device == std::string("cpu") ? 3 * 1952 * 4 : 0));
  }
  // Parameters kept between uses: the owned slices, which is also what the checkpoint pieces hold.
  CHECK(total_elements(three.param_ranges()) == 1952);
  CHECK(total_elements(two.param_ranges()) == 3904);
  for (std::size_t i = 0; i < three.table.tensors().size(); ++i) CHECK_FALSE(three.writes_params(i));
  // The buckets each layer reads: blocks their own; the embedding the first; the tied head the last and the first.
  CHECK(buckets_of_layer(three.buckets, 2, true) == std::vector<int>{3});
  CHECK(buckets_of_layer(three.buckets, kEmbeddingLayer, true) == std::vector<int>{0});
  CHECK(buckets_of_layer(three.buckets, kHeadLayer, true) == std::vector<int>{5, 0});
  CHECK(buckets_of_layer(three.buckets, kHeadLayer, false) == std::vector<int>{5});
}

// The memory estimate's count of what a rank writes to a checkpoint (the asynchronous save's snapshot)
// follows the rule for_each_piece writes by: the same elements on every rank of several layouts.
TEST_CASE("rank plan counts the checkpoint pieces for_each_piece writes", "[plan][rank_plan][zero]") {
  const std::vector<std::vector<std::string>> options = {
      {},
      {"--system.use_distributed_optimizer=true"},
      {"--system.use_distributed_optimizer=true", "--system.zero_stage=3"},
      {"--system.use_distributed_optimizer=true", "--system.precision=bf16"},
      {"--system.precision=bf16"}};
  for (const auto& o : options) {
    std::vector<std::string> all = {"--system.tensor_model_parallel_size=2", "--system.pipeline_model_parallel_size=2"};
    all.insert(all.end(), o.begin(), o.end());
    const Config c = tiny(all);
    const TrainingPlan plan = make_plan(c, 8);
    for (int tp : {0, 1})
      for (int pp : {0, 1})
        for (int dp : {0, 1}) {
          Coords at;
          at.tp = tp, at.pp = pp, at.dp = dp;
          const RankPlan p = make_rank_plan(c, plan, at);
          std::vector<float> params(p.arena_size), master(p.optimizer_elements()), m(p.optimizer_elements()), v(m.size());
          RankState st;
          st.plan = &p;
          st.params = params.data();
          st.master = p.precision == Precision::bf16 ? master.data() : nullptr;
          st.moments[0] = m.data();
          st.moments[1] = v.data();
          std::size_t written = 0;
          for_each_piece(st, [&](int, const TensorSpec&, int, const float*, std::int64_t, std::int64_t count) {
            written += static_cast<std::size_t>(count);
          });
          std::string what;
          for (const auto& x : o) what += x + " ";
          INFO(what << "tp " << tp << " pp " << pp << " dp " << dp);
          CHECK(p.checkpoint_elements() == written);
        }
  }
}
