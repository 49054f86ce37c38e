// AdamW: the runs of every optimizer range (one per tensor it overlaps), and step: one adamw_update
// launch per range, or, offloaded, the update on the host's threads between the copies.
#include "optim/adamw.hpp"

#include <algorithm>
#include <thread>
#include <type_traits>

#include "common/error.hpp"
#include "kernels/adamw_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain {

AdamW::AdamW(const RankPlan& plan, const OptimizerConfig& cfg, kernels::Backend backend)
    : plan_(plan),
      cfg_(cfg),
      backend_(plan.offload_optimizer ? kernels::Backend::host : backend),
      master_(plan.precision != Precision::fp32 ? Arena(device_for(backend_), plan.optimizer_elements() * sizeof(float)) : Arena()),
      m_(device_for(backend_), plan.optimizer_elements() * sizeof(float)),
      v_(device_for(backend_), plan.optimizer_elements() * sizeof(float)),
      grads_staged_(plan.offload_optimizer ? PinnedBuffer(device_for(backend), plan.optimizer_elements() * sizeof(float)) : PinnedBuffer()),
      // Offloaded parameters (ZeRO-3) are updated where they live: no staging for them.
      params_staged_(plan.offload_optimizer && !plan.offload_params
                         ? PinnedBuffer(device_for(backend), plan.optimizer_elements() * plan.compute_type_bytes())
                         : PinnedBuffer()) {
  std::vector<kernels::AdamRun> runs;
  std::size_t packed = 0;  // offset of the current range in the moments (and master weights)
  for (const auto& r : plan_.optimizer_ranges) {
    RangeRuns rr{r.begin, r.end - r.begin, packed, runs.size(), 0, 0};
    for (const auto& ts : plan_.table.tensors()) {
      const std::size_t lo = std::max(r.begin, ts.offset), hi = std::min(r.end, ts.offset + ts.numel);
      if (lo >= hi) continue;
      const float decay = ts.weight_decay ? static_cast<float>(cfg_.weight_decay) : 0.0f;
      runs.push_back({static_cast<long>(lo - r.begin), static_cast<long>(hi - lo), rr.elements, decay});
      rr.elements += static_cast<long>(hi - lo);
      ++rr.count;
    }
    ranges_.push_back(rr);
    packed += r.end - r.begin;
  }
  runs_ = Arena(device_for(backend_), runs.size() * sizeof(kernels::AdamRun));
  if (!runs.empty()) runs_.device().copy(runs_.data(), runs.data(), runs.size() * sizeof(kernels::AdamRun));
}

void AdamW::set_master(ArenaRange from, const float* values) {
  if (!has_master()) return;
  std::size_t packed = 0;
  for (const auto& r : plan_.optimizer_ranges) {
    const std::size_t lo = std::max(r.begin, from.begin), hi = std::min(r.end, from.end);
    if (lo < hi) master_.device().copy(master_.as<float>() + packed + (lo - r.begin), values + (lo - from.begin), sizeof(float) * (hi - lo));
    packed += r.end - r.begin;
  }
}

void AdamW::step(Arena& params, const Arena& grads, double lr, int t, void* host_params) {
  if (host_params && !offloaded()) fatal("internal error: AdamW given host parameters without an offloaded optimizer");
  switch (plan_.precision) {
    case Precision::fp32: return step_as<float>(params, grads, lr, t, static_cast<float*>(host_params));
    case Precision::bf16: return step_as<bf16>(params, grads, lr, t, static_cast<bf16*>(host_params));
    case Precision::fp16: return step_as<fp16>(params, grads, lr, t, static_cast<fp16*>(host_params));
  }
}

template <typename S>
void AdamW::step_as(Arena& params, const Arena& grads, double lr, int t, S* host_params) {
  // S: the compute weights' storage. A 16-bit run updates its master weights and rounds them into the
  // compute copy; an fp32 run updates the parameters themselves.
  constexpr bool kCopy = !std::is_same_v<S, float>;
  const auto& k = kernels::kernel_table<S>(backend_);
  const auto f = [](double x) { return static_cast<float>(x); };
  Device& device = params.device();
  for (const RangeRuns& r : ranges_) {
    float* m = m_.as<float>() + r.packed;
    float* v = v_.as<float>() + r.packed;
    float* master = kCopy ? master_.as<float>() + r.packed : nullptr;
    const float* g = grads.as<float>() + r.begin;
    S* p = params.as<S>() + r.begin;
    if (offloaded()) {
      // The range's gradients and weights to the host's staging (the weights too: an fp32 run's are its
      // master weights, and a range's gaps must come back unchanged), updated there, the weights back.
      // Offloaded parameters are updated where they live.
      float* g_host = grads_staged_.as<float>() + r.packed;
      S* p_host = (host_params ? host_params : params_staged_.as<S>()) + r.packed;
      device.copy(g_host, g, r.length * sizeof(float));
      if (!host_params) device.copy(p_host, p, r.length * sizeof(S));
      if constexpr (kCopy)
        update_on_host(r, master, p_host, m, v, g_host, lr, t);
      else
        update_on_host(r, p_host, static_cast<bf16*>(nullptr), m, v, g_host, lr, t);
      if (!host_params) device.copy(p, p_host, r.length * sizeof(S));
      continue;
    }
    const kernels::AdamRun* runs = runs_.as<kernels::AdamRun>() + r.first_run;
    k.adamw_update(kCopy ? master : reinterpret_cast<float*>(p), kCopy ? p : nullptr, m, v, g, runs, r.count, r.elements, f(lr),
                   f(cfg_.beta1), f(cfg_.beta2), f(cfg_.eps), t);
  }
}

template <typename S>
void AdamW::update_on_host(const RangeRuns& r, float* master, S* copy, float* m, float* v, const float* g, double lr, int t) const {
  const kernels::AdamStep s = kernels::adam_step(static_cast<float>(lr), static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                                                 static_cast<float>(cfg_.eps), t);
  const kernels::AdamRun* runs = runs_.as<kernels::AdamRun>() + r.first_run;  // host memory when offloaded
  // Elements [from, to) in the runs' packed order (AdamRun::first counts them): each updated by the
  // arithmetic every backend's kernel uses, its 16-bit copy rounded to nearest even as the kernels do.
  const auto work = [&](long from, long to) {
    for (int k = 0; k < r.count; ++k) {
      const kernels::AdamRun& run = runs[k];
      const long lo = std::max(from, run.first), hi = std::min(to, run.first + run.count);
      for (long j = lo; j < hi; ++j) {
        const long i = run.offset + (j - run.first);
        master[i] = kernels::adamw_element(master[i], g[i], m[i], v[i], run.weight_decay, s);
        if (copy) copy[i] = from_float<S>(master[i]);
      }
    }
  };
  const long span = (r.elements + host_threads_ - 1) / host_threads_;
  std::vector<std::thread> threads;
  for (int k = 1; k < host_threads_ && k * span < r.elements; ++k) threads.emplace_back(work, k * span, std::min(r.elements, (k + 1) * span));
  work(0, std::min(r.elements, span));
  for (auto& th : threads) th.join();
}

}  // namespace dtrain
