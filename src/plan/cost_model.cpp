// predict_step: the formulas of cost_model.hpp, per micro-batch of the slowest stage, then the step.
#include "plan/cost_model.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "plan/collective_cost.hpp"
#include "plan/pipeline_schedule.hpp"
#include "plan/rank_plan.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {
namespace {

// The shapes one rank sees in one micro-batch, taken from activation_dims (rank_plan.hpp), the one
// description of per-rank shapes, as doubles (products reach beyond 2^53 only far past any real
// model), with what the cost model adds: the full sequence, the bytes of an element, MoE's shares.
struct Shapes {
  double B, T, Tl, N, Ns, C, Cl, NHl, NKVl, HD, QKVl, Fl, Hl, Vl, e;
  double keys;  // keys a query row sees on average (ModelShape::mean_visible_keys)
  // MoE: the share of blocks that are MoE blocks, an expert's widths (Fel; Hel with SwiGLU's gate),
  // experts on this rank, and the token rows the experts compute: N x topk, fewer when a capacity
  // factor below 1 drops assignments.
  double moe_share, Fel, Hel, experts_local, routed;
};

Shapes shapes_of(const Config& cfg, const Layout& l) {
  const auto& m = cfg.model;
  // The per-rank dims as the activation layout derives them (sequence parallelism needs tp > 1).
  const ActivationDims d = activation_dims(cfg, l.sizes, l.micro_batch, l.sequence_parallel && l.sizes.tp > 1, 0);
  Shapes s{};
  s.B = d.B;
  s.T = m.seq_length;
  s.keys = ModelShape::from(cfg).mean_visible_keys();
  s.Tl = d.T;
  s.N = static_cast<double>(d.N());
  s.Ns = static_cast<double>(d.Ns());
  s.C = d.C;
  s.Cl = d.Cl;
  s.NHl = d.NHl;
  s.NKVl = d.NKVl;
  s.HD = d.HD();
  s.QKVl = d.QKVl();
  s.Fl = d.Fl;
  s.Hl = d.Hl();
  s.Vl = d.Vl;
  s.e = is_16bit(cfg.system.precision) ? 2 : 4;
  double moe_blocks = 0;
  for (int layer = 0; layer < m.num_layers; ++layer) moe_blocks += m.moe_layer(layer) ? 1 : 0;
  s.moe_share = moe_blocks / m.num_layers;
  s.Fel = d.Fe;
  s.Hel = d.He();
  s.experts_local = static_cast<double>(m.num_experts) / l.sizes.ep;
  const double kept = m.moe_capacity_factor.set ? std::min(1.0, m.moe_capacity_factor.value) : 1.0;
  s.routed = s.N * m.moe_router_topk * kept;
  return s;
}

// Trainable elements of a stage part's tensor table on tensor- and expert-parallel rank 0 (frozen
// tensors, training.freeze, are neither reduced nor updated).
double part_params(const ModelShape& shape, const StagePart& part, const ParallelLayout& sz) {
  const TensorTable table(shape, part, sz.tp, 0, 16, sz.ep, 0);
  double params = 0;
  for (const TensorSpec& t : table.tensors()) params += t.trainable ? static_cast<double>(t.numel) : 0.0;
  return params;
}

// Trainable parameters one rank of the heaviest pipeline stage holds (what data parallelism reduces and
// AdamW updates), from the tensor table, the memory estimate's own source: a dense and a MoE block's
// tables once (each block's when training.freeze may tell blocks apart), and the embedding and head of
// the first and last stages.
double heaviest_stage_params(const Config& cfg, const ParallelLayout& sz) {
  const ModelShape shape = ModelShape::from(cfg);
  double kind[2] = {0, 0};  // [dense, MoE]
  std::vector<double> block(static_cast<std::size_t>(shape.num_layers));
  for (int l = 0; l < shape.num_layers; ++l) {
    double& b = block[static_cast<std::size_t>(l)];
    if (!shape.frozen.empty()) {
      b = part_params(shape, StagePart{{{l}}, false, false}, sz);
      continue;
    }
    if (kind[shape.moe(l)] == 0) kind[shape.moe(l)] = part_params(shape, StagePart{{{l}}, false, false}, sz);
    b = kind[shape.moe(l)];
  }
  double heaviest = 0;
  for (int stage = 0; stage < sz.pp; ++stage) {
    const StagePart part = stage_part(PipelineSplit::of(cfg, sz.pp, sz.v), stage);
    double params = part.embedding || part.head ? part_params(shape, StagePart{{}, part.embedding, part.head}, sz) : 0.0;
    for (int l : part.layers()) params += block[static_cast<std::size_t>(l)];
    heaviest = std::max(heaviest, params);
  }
  return heaviest;
}

// ZeRO-3 gathers a block's weights before each use: forward, backward, and full recomputation's forward.
double passes_of(RecomputeGranularity r) { return r == RecomputeGranularity::full ? 3 : 2; }

}  // namespace

Layout layout_of(const Config& cfg, int world) {
  Layout l;
  l.sizes = parallel_layout(cfg.system, world);
  const PipelineSchedule sched = cfg.system.pipeline_schedule;
  if (sched != PipelineSchedule::interleaved && sched != PipelineSchedule::zbv) l.sizes.v = 1;
  l.zero_bubble = splits_backward(sched);
  l.micro_batch = static_cast<int>(cfg.model.micro_batch_size.value);
  l.recompute = cfg.model.recompute_granularity;
  l.sequence_parallel = cfg.system.sequence_parallel && l.sizes.tp > 1;
  l.first_stage_layers = cfg.system.pipeline_first_stage_layers;
  l.last_stage_layers = cfg.system.pipeline_last_stage_layers;
  return l;
}

Config with_layout(const Config& cfg, const Layout& l) {
  Config c = cfg;
  set_parallel_layout(c.system, l.sizes);
  c.system.pipeline_schedule = l.schedule();
  c.system.sequence_parallel = l.sequence_parallel;
  c.model.micro_batch_size = MicroBatchSize{false, l.micro_batch};
  c.model.recompute_granularity = l.recompute;
  c.system.pipeline_first_stage_layers = l.first_stage_layers;
  c.system.pipeline_last_stage_layers = l.last_stage_layers;
  return c;
}

std::vector<std::string> layout_overrides(const Layout& l, bool experts) {
  auto kv = [](const char* key, const std::string& value) { return std::string("--") + key + "=" + value; };
  auto n = [](auto x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  std::vector<std::string> o{kv("system.tensor_model_parallel_size", n(l.sizes.tp)),
                             kv("system.pipeline_model_parallel_size", n(l.sizes.pp)),
                             kv("system.context_parallel_size", n(l.sizes.cp))};
  if (experts) o.push_back(kv("system.expert_model_parallel_size", n(l.sizes.ep)));
  o.push_back(kv("system.pipeline_schedule", to_string(l.schedule())));
  o.push_back(kv("system.virtual_pipeline_model_parallel_size", n(l.sizes.v)));
  o.push_back(kv("system.sequence_parallel", l.sequence_parallel ? "true" : "false"));
  o.push_back(kv("system.use_distributed_optimizer", l.sizes.distributed_optimizer() ? "true" : "false"));
  if (l.sizes.distributed_optimizer()) o.push_back(kv("system.zero_stage", n(l.sizes.zero)));
  o.push_back(kv("model.micro_batch_size", n(l.micro_batch)));
  o.push_back(kv("model.recompute_granularity", n(l.recompute)));
  o.push_back(kv("system.pipeline_first_stage_layers", n(l.first_stage_layers)));
  o.push_back(kv("system.pipeline_last_stage_layers", n(l.last_stage_layers)));
  return o;
}

StepCost predict_step(const Config& input, const Layout& l, const ClusterSpec& cl) {
  const Config cfg = with_layout(input, l);  // the layout's own keys (its pipeline split) for what reads the configuration
  const Shapes s = shapes_of(cfg, l);
  const auto& sz = l.sizes;
  const double peak = cl.peak(cfg.system.precision), bw = cl.elementwise_rate();
  // A GEMM's seconds by its FLOPs and width (its weight's narrower dimension, which sets how close a
  // GEMM of those FLOPs comes to the peak).
  auto gemm = [&](double flops, double width) { return flops / (peak * cl.efficiency(flops, width)); };

  // One block, one micro-batch: forward compute and the parts recomputation repeats.
  // The MLP: dense blocks' and MoE blocks' (each local expert's GEMMs over its share of the routed rows).
  const double dense_mlp = gemm(2 * s.N * s.C * s.Hl, std::min(s.C, s.Hl)) + gemm(2 * s.N * s.Fl * s.C, std::min(s.Fl, s.C));
  const double expert_rows = s.moe_share > 0 ? s.routed / s.experts_local : 0.0;
  const double moe_mlp = s.moe_share > 0 ? s.experts_local * (gemm(2 * expert_rows * s.C * s.Hel, std::min(s.C, s.Hel)) +
                                                               gemm(2 * expert_rows * s.Fel * s.C, std::min(s.Fel, s.C)))
                                         : 0.0;
  const double mlp = (1 - s.moe_share) * dense_mlp + s.moe_share * moe_mlp;
  const double linear = gemm(2 * s.N * s.C * s.QKVl, std::min(s.C, s.QKVl)) + gemm(2 * s.N * s.Cl * s.C, std::min(s.Cl, s.C)) + mlp;
  // QK^T and PV, over the keys each row sees (the causal half, less with a window), per (sample, head): the head dim is both products' narrow side; then the
  // work per causal score beyond the GEMMs (cl.attention_score_seconds covers forward and backward, and
  // the backward counts twice the forward: a third of it here).
  const double scores = s.B * s.NHl * s.Tl * s.keys;
  const double attention = 2 * s.B * s.NHl * gemm(2 * s.Tl * s.keys * s.HD, s.HD) + scores * cl.attention_score_seconds / 3;
  // Attention is fused: its scores stay in on-chip tiles, so no (T,T) bytes go through memory.
  const double activation_bytes = s.e * ((1 - s.moe_share) * s.N * (s.Hl + s.Fl) + s.moe_share * s.routed * (s.Hel + s.Fel));
  const double elementwise = (s.e * 10 * s.Ns * s.C + activation_bytes) / bw;
  const double block_fwd = linear + attention + elementwise;
  const double block_bwd = 2 * block_fwd;
  const double recompute = l.recompute == RecomputeGranularity::full        ? block_fwd
                           : l.recompute == RecomputeGranularity::selective ? activation_bytes / bw
                                                                            : 0.0;
  const double head = gemm(2 * s.N * s.C * s.Vl, std::min(s.C, s.Vl)) + 3 * s.e * s.N * s.Vl / bw;  // forward; backward twice

  // Tensor parallelism: the block's 4 collectives per pass of N x C values (local tokens).
  const Link tp_link = group_link(cl, 1, sz.tp);
  const double rows_bytes = s.N * s.C * s.e;
  // With sequence parallelism each all-reduce is an all-gather and a reduce-scatter.
  const double tp_one = l.sequence_parallel ? all_gather_s(rows_bytes, sz.tp, tp_link) + reduce_scatter_s(rows_bytes, sz.tp, tp_link)
                                            : all_reduce_s(rows_bytes, sz.tp, tp_link);
  const double tp_pass = 2 * tp_one;
  const double tp_block = 2 * tp_pass + (l.recompute == RecomputeGranularity::full ? tp_pass : 0.0);
  const double tp_head = sz.tp > 1 ? tp_one + all_reduce_s(3 * s.N * 4, sz.tp, tp_link) : 0.0;

  // Context parallelism: cp-1 ring steps of K/V (and their fp32 gradients backward) behind attention.
  double cp_block = 0;
  if (sz.cp > 1) {
    const Link link = group_link(cl, sz.tp, sz.cp);
    const double kv = s.N * 2 * s.NKVl * s.HD;
    const double fwd = std::max(0.0, (sz.cp - 1) * send_s(kv * s.e, link) - attention);
    const double bwd = std::max(0.0, (sz.cp - 1) * (send_s(kv * s.e, link) + send_s(kv * 4, link)) - 2 * attention);
    cp_block = fwd + bwd + (l.recompute == RecomputeGranularity::full ? fwd : 0.0);
  }
  // Expert parallelism: dispatch and combine, forward and backward, in the MoE blocks.
  double ep_block = 0;
  if (s.moe_share > 0 && l.sizes.ep > 1) {
    const double a2a = all_to_all_s(s.routed * s.C * s.e, l.sizes.ep, group_link(cl, static_cast<long>(sz.tp) * sz.cp, l.sizes.ep));
    ep_block = s.moe_share * (l.recompute == RecomputeGranularity::full ? 6 : 4) * a2a;
  }
  // Pipeline: the stage's output forward and its gradient backward, once per model chunk.
  const double p2p_mb =
      sz.pp > 1 ? 2.0 * l.sizes.v * send_s(s.Ns * s.C * s.e, group_link(cl, static_cast<long>(sz.tp) * sz.cp * sz.dp, sz.pp)) : 0.0;

  // The slowest stage sets the pace: its blocks, and the LM head when it is the last stage (an even
  // split's last stage; an uneven split may lighten it).
  const PipelineSplit split = PipelineSplit::of(cfg, sz.pp, sz.v);
  const double per_block = block_fwd + block_bwd + recompute;
  double blocks = split.stage_blocks(sz.pp - 1);
  bool head_here = true;
  for (int stage = 0; stage + 1 < sz.pp; ++stage)
    if (split.stage_blocks(stage) * per_block > blocks * per_block + (head_here ? 3 * head : 0.0))
      blocks = split.stage_blocks(stage), head_here = false;
  StepCost c;
  c.micro_batches = cfg.model.global_batch_size / (l.micro_batch * sz.dp);
  const double m = c.micro_batches;
  c.compute = m * (blocks * per_block + (head_here ? 3 * head : 0.0));
  c.recompute = m * blocks * recompute;
  c.tp = m * (blocks * tp_block + (head_here ? tp_head : 0.0));
  c.cp = m * blocks * cp_block;
  c.ep = m * blocks * ep_block;
  c.p2p = m * p2p_mb;
  c.bubble_fraction = predicted_bubble(l.schedule(), sz.pp, c.micro_batches, l.sizes.v);
  c.bubble = c.bubble_fraction / (1 - c.bubble_fraction) * (c.compute + c.tp + c.cp + c.ep + c.p2p);

  // Data parallelism over dp x cp (adjacent in rank order): the heaviest stage's parameters.
  const double grads = heaviest_stage_params(cfg, sz);
  c.rank_params = grads;
  const long nd = static_cast<long>(sz.dp) * sz.cp;
  const Link dp_link = group_link(cl, sz.tp, nd);
  const double reduce = l.sizes.distributed_optimizer() ? reduce_scatter_s(4 * grads, nd, dp_link) : all_reduce_s(4 * grads, nd, dp_link);
  const double gather = l.sizes.distributed_optimizer() ? all_gather_s(s.e * grads, nd, dp_link) : 0.0;
  const double block_share = 1.0 / std::max(1.0, blocks);  // the last bucket is never hidden
  const double bwd_window = blocks * (block_bwd + recompute + tp_pass * 2), fwd_window = blocks * block_fwd;
  auto hidden = [&](bool overlap, double t, double window) { return overlap ? std::max(t - window, t * block_share) : t; };
  const bool overlap_reduce = cfg.system.overlap_grad_reduce;
  const int zero = l.sizes.zero;
  const double reductions = zero >= 2 ? m : 1;  // ZeRO-2/3 reduce-scatter every micro-batch
  c.dp = reductions * hidden(overlap_reduce, reduce, bwd_window);
  if (zero == 1 || zero == 2) c.dp += hidden(cfg.system.overlap_param_gather, gather, fwd_window);
  if (zero == 3) {
    c.dp += m * passes_of(l.recompute) * hidden(true, gather, fwd_window);
  }
  // Released buckets: every micro-batch's gradients but the owned slice of the last, and under ZeRO-3
  // the gathered weights but the owned slice after each pass.
  double released = zero >= 2 ? 4 * grads * (m - 1 / static_cast<double>(nd)) : 0.0;
  // (with parameter offload the owned slice too: it lives in host memory).
  if (zero == 3)
    released += m * passes_of(l.recompute) * s.e * grads * (cfg.system.offload_params ? 1.0 : 1 - 1 / static_cast<double>(nd));
  c.release = released / cl.released_rate();
  // Parameter offload: each gather first copies the owned slice from host memory, and (unless the
  // optimizer is offloaded too and updates it where it lives) the slice goes to the device for the
  // update and back once per step, over the device's link to the host.
  const bool params_on_host = zero == 3 && cfg.system.offload_params;
  if (params_on_host)
    c.release += (m * passes_of(l.recompute) + (cfg.system.offload_optimizer ? 0 : 2)) * s.e * (grads / nd) / cl.host_link_rate();
  // AdamW: the gradient read, moments (and a 16-bit run's master weights) read and written, the weights
  // written; offloaded, at the host's memory rate, after the owned gradients and weights went to the
  // host and before the weights come back.
  const double owned = l.sizes.distributed_optimizer() ? grads / nd : grads;
  const bool half = is_16bit(cfg.system.precision);
  const double adam_bytes = owned * (4 + 8 * (half ? 3 : 2) + (half ? 2 : 8));
  if (cfg.system.offload_optimizer) {
    const double link = cl.host_link_rate(), host_memory = cl.host_memory_rate();  // each names its key when missing
    c.optimizer = adam_bytes / host_memory + owned * (4 + (params_on_host ? 0 : 2 * s.e)) / link;
  } else {
    c.optimizer = adam_bytes / cl.memory_bandwidth;
  }
  return c;
}

}  // namespace dtrain
