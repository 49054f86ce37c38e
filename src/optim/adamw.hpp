// AdamW over ranges of a rank's parameter arena: the whole arena, or (distributed optimizer) this
// rank's slices. First and second moments are stored only for those ranges, back to back, on the
// model's device. In a bf16 or fp16 run the optimizer also keeps the fp32 master weights of those ranges
// (back to back like the moments): it updates them and rounds them into the 16-bit compute weights in
// the same kernel; in an fp32 run the parameters are the master weights. Weight decay applies only to
// tensors marked for it (not biases or LayerNorm). Each range is one kernel launch over all its
// tensors (their runs, with their weight decays, are made once, in the device's memory).
// Offloaded (plan.offload_optimizer), the moments and master weights live in host memory and the host's
// AdamW updates them: per range the gradients and weights are copied into host staging, updated there
// with the same arithmetic (kernels/adamw_math.hpp) on the host's threads, and the weights copied back.
// On the host backend the staging is a second host arena standing in for the device, so the path and
// its bits are tested without a GPU. The staging is pinned memory on a GPU.
#pragma once
#include <vector>

#include "common/storage_type.hpp"
#include "config/config.hpp"
#include "kernels/backend.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"
#include "runtime/device.hpp"

namespace dtrain {

class AdamW {
 public:
  // Zero moments (and master weights) for the plan's optimizer ranges on the device of `backend`, or
  // in host memory when the plan offloads them.
  AdamW(const RankPlan& plan, const OptimizerConfig& cfg, kernels::Backend backend);
  // 16-bit runs: the master weights of arena range r from fp32 values (host, r.end - r.begin elements;
  // without a range the whole arena, arena order). Only the owned part of r is kept. No-op in fp32.
  void set_master(ArenaRange r, const float* values);
  void set_master(const float* values) { set_master({0, plan_.arena_size}, values); }
  // One update of the owned ranges with learning rate lr; t is the 1-based step count. params holds
  // plan.precision elements, grads fp32, which the update takes times *grad_factor (the clipping and the
  // loss scale divided out: step_factor's output, in the memory of grads' device; null: 1); a
  // non-finite factor skips the update. host_params (offloaded optimizer only): the owned ranges'
  // compute weights in host memory, back to back (ZeRO-3's offloaded parameter slices), updated in place
  // of the ranges of params, which the update then does not touch; the offloaded update reads the factor
  // back first.
  void step(Arena& params, Arena& grads, double lr, int t, const float* grad_factor = nullptr, void* host_params = nullptr);
  // Offloaded: the gradients of `owned` (arena elements) are final for this step, so their copy to the
  // host starts now, overlapping the rest of the backward pass (GradSync's hook). The step waits for
  // it; drop_early_copies() forgets them (a step skipped for overflow).
  void gradients_final(const Arena& grads, ArenaRange owned);
  void drop_early_copies();
  bool has_master() const { return master_.data() != nullptr; }
  bool offloaded() const { return plan_.offload_optimizer; }
  // Host threads of the offloaded update (the rank's cores; 1 until set). No effect without offload.
  void set_host_threads(int threads) { host_threads_ = threads > 1 ? threads : 1; }
  Arena& master() { return master_; }  // empty in fp32 runs
  Arena& first_moment() { return m_; }
  Arena& second_moment() { return v_; }

 private:
  // An optimizer range's runs (one per tensor it overlaps) in runs_, and where it lies in the arena
  // (begin, length elements, gaps between tensors included) and in the moments and master weights (packed).
  struct RangeRuns {
    std::size_t begin, length, packed, first_run;
    int count;
    long elements;
  };

  // step() for compute weights stored as S (float, bf16 or fp16), on the device or offloaded.
  template <typename S>
  void step_as(Arena& params, Arena& grads, double lr, int t, const float* grad_factor, S* host_params);
  template <typename S>
  void offloaded_step(Arena& params, const Arena& grads, double lr, int t, float grad_factor, S* host_params);
  // The offloaded update of one range: its elements cut into host_threads_ spans of about equal length;
  // copy (null in fp32 runs) receives the rounded weights.
  template <typename S>
  void update_on_host(const RangeRuns& r, float* master, S* copy, float* m, float* v, const float* g, double lr, int t,
                      float grad_factor) const;

  const RankPlan& plan_;
  OptimizerConfig cfg_;
  kernels::Backend backend_;  // where the update runs: the model's device, or the host when offloaded
  Arena master_, m_, v_;
  // Offloaded: host copies of the owned gradients and weights (packed), in the model device's pinned
  // memory, which it copies fastest.
  PinnedBuffer grads_staged_, params_staged_;
  Arena unit_factor_;  // (1) float 1 on the update's device: the factor of a step given none
  std::vector<RangeRuns> ranges_;
  Arena runs_;  // kernels::AdamRun entries of every range, in the memory of the device the update runs on
  int host_threads_ = 1;
  // Offloaded: gradient copies started by gradients_final, and the elements of each range they cover.
  std::vector<CopyInFlight> early_;
  std::vector<std::size_t> early_covered_;
};

}  // namespace dtrain
