// print_dry_run: everything a user should check before spending an allocation.
#include "app/dry_run.hpp"

#include <cstdio>
#include <string>

#include "plan/rank_layout.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {
namespace {

std::string list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "]";
}

void print_groups(const char* label, const std::vector<std::vector<int>>& groups) {
  std::printf("  %-16s", label);
  for (const auto& g : groups) std::printf(" %s", list(g).c_str());
  std::printf("\n");
}

double mb(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

void print_dry_run(HostComm world, const OptionTable& table, const Config& cfg, const TrainingPlan& plan,
                   const LaunchEnv& env) {
  const auto names = gather_node_names(world, env);
  if (env.world_rank != 0) return;
  const RankLayout layout(plan.sizes, cfg.system.rank_order);
  const auto& s = plan.sizes;

  std::printf("== resolved configuration ==\n%s\n", config_as_ini(table).c_str());
  std::printf("== launch ==\n  launcher %s, %d ranks on %d node(s)%s\n", env.launcher.c_str(), env.world_size,
              env.num_nodes, env.job_id.empty() ? "" : (", Slurm job " + env.job_id).c_str());

  std::printf("== layout: %s, order %s ==\n", to_string(s, ' ').c_str(), cfg.system.rank_order.c_str());
  print_groups("TP groups:", layout.groups(Axis::tp));
  print_groups("CP groups:", layout.groups(Axis::cp));
  print_groups("DP groups:", layout.groups(Axis::dp));
  print_groups("PP groups:", layout.groups(Axis::pp));
  print_groups("embedding groups:", layout.embedding_groups());
  if (s.cp > 1) {
    std::vector<std::vector<int>> replicas;
    for (int r = 0; r < layout.world_size(); ++r)
      if (layout.replica_index(r) == 0) replicas.push_back(layout.replica_group_of(r));
    print_groups("DP x CP groups (gradients, distributed optimizer):", replicas);
  }
  const bool moe = cfg.model.num_experts > 0;
  if (moe) {
    const int local = cfg.model.num_experts / s.ep;
    std::printf("  experts: %d, ep=%d: %d experts per rank (EP rank e holds experts [e*%d, (e+1)*%d)); expert gradients are "
                "reduced over expert-data-parallel groups of cp x dp / ep = %d ranks\n",
                cfg.model.num_experts, s.ep, local, local, local, s.edp());
    print_groups("EP groups:", layout.ep_groups());
    print_groups("EDP groups:", layout.edp_groups());
  }
  for (int r = 0; r < layout.world_size(); ++r) {
    const Coords c = layout.coords_of(r);
    std::printf("  rank %d: node %s tp=%d cp=%d dp=%d pp=%d", r, names[r].c_str(), c.tp, c.cp, c.dp, c.pp);
    if (moe) std::printf(" ep=%d edp=%d", layout.sizes().ep_rank(c), layout.sizes().edp_rank(c));
    std::printf("\n");
  }

  std::printf("== pipeline stages (balance) ==\n");
  for (int st = 0; st < s.pp; ++st) {
    Coords at;
    at.pp = st;
    const RankPlan rp = make_rank_plan(cfg, plan, at);
    std::string chunks;
    for (const auto& c : rp.part.chunks) chunks += " [" + std::to_string(c.front()) + "-" + std::to_string(c.back()) + "]";
    std::printf("  stage %d: %zu blocks%s%s%s, %zu parameters per rank, %d activation slots\n", st, rp.part.layers().size(),
                chunks.c_str(), rp.part.embedding ? " +embedding" : "", rp.part.head ? " +head" : "", rp.table.total(),
                rp.activations.slots);
    if (rp.has_frozen()) {
      std::size_t frozen = 0;
      for (const auto& t : rp.table.tensors()) frozen += t.trainable ? 0 : t.numel;
      std::printf("    of which %zu frozen (training.freeze): %.2f MiB of params, no grads or optimizer state\n", frozen,
                  mb(frozen * rp.compute_type_bytes()));
    }
    if (moe) {
      std::size_t experts = 0;
      for (const auto& t : rp.table.tensors()) experts += t.expert ? t.numel : 0;
      // fp32 gradients; moments (and bf16 master weights) of the rank's 1/edp slice under the distributed optimizer.
      const std::size_t optimizer = (is_16bit(cfg.system.precision) ? 12 : 8) * experts /
                                    static_cast<std::size_t>(cfg.system.use_distributed_optimizer ? s.edp() : 1);
      std::printf("    of which %zu in its %d experts: %.2f MiB of params, %.2f MiB of grads, %.2f MiB of optimizer state per rank\n",
                  experts, cfg.model.num_experts / s.ep, mb(experts * rp.compute_type_bytes()), mb(experts * 4), mb(optimizer));
    }
  }
  if (s.cp > 1) {
    const RankPlan rp = make_rank_plan(cfg, plan, Coords{});
    const ActivationDims& d = rp.activations.dims;
    const std::size_t kv = static_cast<std::size_t>(d.N()) * 2 * d.NKVl * d.HD();
    std::printf("== context parallelism ==\n  each sequence of %d tokens in %d chunks of %d; cp rank r holds chunks r and %d-r "
                "(%d tokens per sample); ring attention per block: %d steps of %.2f MiB keys/values forward, and in the "
                "backward pass also %.2f MiB of fp32 key/value gradients\n",
                cfg.model.seq_length, 2 * s.cp, d.T / 2, 2 * s.cp - 1, d.T, s.cp, mb(kv * rp.compute_type_bytes()), mb(kv * 4));
  }
  if (cfg.model.num_experts > 0) {
    const ModelConfig& m = cfg.model;
    char routing[64] = "dropless";
    if (m.moe_capacity_factor.set) std::snprintf(routing, sizeof routing, "capacity factor %g", m.moe_capacity_factor.value);
    char blocks[96];
    std::snprintf(blocks, sizeof blocks, "blocks l with l %% %d == 0", m.moe_layer_freq);
    int moe_blocks = 0;
    for (int l = 0; l < m.num_layers; ++l) moe_blocks += m.moe_layer(l) ? 1 : 0;
    if (!m.moe_layer_pattern.empty()) std::snprintf(blocks, sizeof blocks, "%d of %d blocks (moe_layer_pattern)", moe_blocks, m.num_layers);
    std::printf("== mixture of experts ==\n  %d experts of width %d, top-%d, %s, in %s; %d experts per rank\n", m.num_experts,
                cfg.moe_ffn_hidden(), m.moe_router_topk, routing, blocks, m.num_experts / cfg.system.expert_model_parallel_size);
    for (int st = 0; st < s.pp; ++st) {
      Coords at;
      at.pp = st;
      const RankPlan rp = make_rank_plan(cfg, plan, at);
      std::size_t blocks = 0;
      for (const auto& t : rp.table.tensors()) blocks += t.name.find(".router_w") != std::string::npos ? 1 : 0;
      // The MoE share of the activations: the layout against the same one without its MoE buffers.
      ActivationLayout dense = rp.activations;
      for (auto& kind : dense.mlp_kinds) kind &= static_cast<unsigned char>(~kMoeMlp);
      std::printf("  stage %d: %zu MoE blocks, %.2f MiB of MoE activations per rank (routed rows sized for the dropless worst case)\n",
                  st, blocks, mb(rp.activations.bytes() - dense.bytes()));
    }
  }
  std::printf("== schedule ==\n");
  std::printf("  micro_batch_size %d, gradient-accumulation steps (micro-batches) m = %d x %d dp = global batch %d\n",
              plan.micro_batch, plan.num_micro_batches, s.dp, cfg.model.global_batch_size);
  std::printf("  pipeline schedule %s: predicted bubble %.4f (%.1f%% of a step)\n", to_string(plan.schedule),
              plan.bubble, 100.0 * plan.bubble);
  for (const auto& w : plan.warnings) std::printf("  warning: %s\n", w.c_str());

  std::printf("== memory per rank (MiB) ==\n  %-6s %10s %10s %10s %12s %10s %10s\n", "stage", "params", "grads", "optimizer",
              "activations", "buffers", "total");
  for (int st = 0; st < s.pp; ++st) {
    const auto& m = plan.stage_memory[st];
    std::printf("  %-6d %10.2f %10.2f %10.2f %12.2f %10.2f %10.2f\n", st, mb(m.params), mb(m.grads), mb(m.optimizer),
                mb(m.activations), mb(m.buffers), mb(m.total()));
  }
  if (plan.stage_memory.front().offloaded > 0)
    for (int st = 0; st < s.pp; ++st)
      std::printf("  stage %d: offloaded to host memory (system.offload_optimizer, offload_params): %.2f MiB per rank, not in the "
                  "total\n",
                  st, mb(plan.stage_memory[st].offloaded));
  if (cfg.system.use_distributed_optimizer && cfg.system.zero_stage > 1) {
    // What ZeRO-2/3 keeps between uses against the model state (params, fp32 grads, optimizer) over its replicas (dp x cp).
    for (int st = 0; st < s.pp; ++st) {
      Coords at;
      at.pp = st;
      const RankPlan rp = make_rank_plan(cfg, plan, at);
      const MemoryEstimate m = rp.memory();
      const std::size_t owned = rp.optimizer_elements(), compute = rp.compute_type_bytes();
      const std::size_t frozen = rp.frozen_elements();  // training.freeze: kept whole even under ZeRO-3
      const std::size_t kept = (rp.shards_params() ? owned + frozen : rp.arena_size) * compute + owned * 4 + m.optimizer;
      const int replicas = rp.replicas();
      const std::size_t whole = rp.arena_size * compute + rp.grad_arena_size * 4 + m.optimizer * static_cast<std::size_t>(replicas);
      std::printf("  stage %d ZeRO-%d: params+grads+optimizer kept between uses %.2f MiB = %.3f x (stage total %.2f MiB / dp x cp %d); "
                  "buckets gathered at once add %.2f MiB params, %.2f MiB grads\n",
                  st, rp.zero_stage(), mb(kept), static_cast<double>(kept) * replicas / static_cast<double>(whole), mb(whole), replicas,
                  mb(m.params - (rp.shards_params() ? owned + frozen : rp.arena_size) * compute), mb(m.grads - owned * 4));
    }
  }
  std::printf("dry run complete: configuration is valid for %d ranks\n", env.world_size);
  std::fflush(stdout);
}

}  // namespace dtrain
