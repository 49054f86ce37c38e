// AdamW: the runs of every optimizer range (one per tensor it overlaps), and step: one adamw_update
// launch per range, or, offloaded, the update on the host's threads between the copies.
#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>
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
                         : PinnedBuffer()),
      unit_factor_(device_for(backend_), sizeof(float)) {
  const float one = 1.0f;
  unit_factor_.device().copy(unit_factor_.data(), &one, sizeof one);
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
  early_covered_.assign(ranges_.size(), 0);
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

void AdamW::gradients_final(const Arena& grads, ArenaRange owned) {
  if (!offloaded()) return;
  for (std::size_t k = 0; k < ranges_.size(); ++k) {
    const RangeRuns& r = ranges_[k];
    const std::size_t lo = std::max(r.begin, owned.begin), hi = std::min(r.begin + r.length, owned.end);
    if (lo >= hi) continue;
    early_.push_back(grads.device().copy_async(grads_staged_.as<float>() + r.packed + (lo - r.begin),
                                               grads.as<float>() + lo, (hi - lo) * sizeof(float)));
    early_covered_[k] += hi - lo;
  }
}

void AdamW::drop_early_copies() {
  early_.clear();  // each waited for
  std::fill(early_covered_.begin(), early_covered_.end(), 0);
}

void AdamW::step(Arena& params, Arena& grads, double lr, int t, const float* grad_factor, void* host_params) {
  if (host_params && !offloaded()) fatal("internal error: AdamW given host parameters without an offloaded optimizer");
  switch (plan_.precision) {
    case Precision::fp32: step_as<float>(params, grads, lr, t, grad_factor, static_cast<float*>(host_params)); break;
    case Precision::fp8:
    case Precision::bf16: step_as<bf16>(params, grads, lr, t, grad_factor, static_cast<bf16*>(host_params)); break;
    case Precision::fp16: step_as<fp16>(params, grads, lr, t, grad_factor, static_cast<fp16*>(host_params)); break;
  }
  drop_early_copies();
}

template <typename S>
void AdamW::step_as(Arena& params, Arena& grads, double lr, int t, const float* grad_factor, S* host_params) {
  // S: the compute weights' storage. A 16-bit run updates its master weights and rounds them into the
  // compute copy; an fp32 run updates the parameters themselves.
  constexpr bool kCopy = !std::is_same_v<S, float>;
  const auto f = [](double x) { return static_cast<float>(x); };
  if (offloaded()) {
    float factor = 1.0f;
    if (grad_factor) grads.device().copy(&factor, grad_factor, sizeof factor);  // the host updates: it waits for the factor
    if (!std::isfinite(factor)) return drop_early_copies();  // the step's loss or gradient norm was not finite
    return offloaded_step(params, grads, lr, t, factor, host_params);
  }
  if (!grad_factor) grad_factor = unit_factor_.as<float>();
  const auto& k = kernels::kernel_table<S>(backend_);
  for (const RangeRuns& r : ranges_) {
    float* m = m_.as<float>() + r.packed;
    float* v = v_.as<float>() + r.packed;
    float* master = kCopy ? master_.as<float>() + r.packed : nullptr;
    float* g = grads.as<float>() + r.begin;
    S* p = params.as<S>() + r.begin;
    const kernels::AdamRun* runs = runs_.as<kernels::AdamRun>() + r.first_run;
    k.adamw_update(kCopy ? master : reinterpret_cast<float*>(p), kCopy ? p : nullptr, m, v, g, grad_factor, runs, r.count, r.elements, f(lr),
                   f(cfg_.beta1), f(cfg_.beta2), f(cfg_.eps), t);
  }
}

template <typename S>
void AdamW::offloaded_step(Arena& params, const Arena& grads, double lr, int t, float grad_factor, S* host_params) {
  // Per range: the gradients (unless the backward pass already sent them down as their buckets became
  // final) and the weights (an fp32 run's are its master weights, and a range's gaps must come back
  // unchanged; not offloaded parameters, which are updated where they live) go down to the host's
  // staging, all ranges' copies queued at once; each range is updated as soon as its copies are done and
  // its weights go back up while the next range is updated.
  constexpr bool kCopy = !std::is_same_v<S, float>;
  Device& device = params.device();
  const std::size_t n = ranges_.size();
  std::vector<CopyInFlight> down(2 * n), up(n);
  for (std::size_t k = 0; k < n; ++k) {
    const RangeRuns& r = ranges_[k];
    if (early_covered_[k] < r.length)
      down[2 * k] = device.copy_async(grads_staged_.as<float>() + r.packed, grads.as<float>() + r.begin, r.length * sizeof(float));
    if (!host_params) down[2 * k + 1] = device.copy_async(params_staged_.as<S>() + r.packed, params.as<S>() + r.begin, r.length * sizeof(S));
  }
  for (auto& c : early_) c.wait();
  for (std::size_t k = 0; k < n; ++k) {
    const RangeRuns& r = ranges_[k];
    down[2 * k].wait(), down[2 * k + 1].wait();
    float* m = m_.as<float>() + r.packed;
    float* v = v_.as<float>() + r.packed;
    float* g_host = grads_staged_.as<float>() + r.packed;
    S* p_host = (host_params ? host_params : params_staged_.as<S>()) + r.packed;
    if constexpr (kCopy)
      update_on_host(r, master_.as<float>() + r.packed, p_host, m, v, g_host, lr, t, grad_factor);
    else
      update_on_host(r, p_host, static_cast<bf16*>(nullptr), m, v, g_host, lr, t, grad_factor);
    if (!host_params) up[k] = device.copy_async(params.as<S>() + r.begin, p_host, r.length * sizeof(S));
  }
}  // every copy up waited for

template <typename S>
void AdamW::update_on_host(const RangeRuns& r, float* master, S* copy, float* m, float* v, const float* g, double lr, int t,
                           float grad_factor) const {
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
        // g x factor in float, as adamw_update forms it on the device.
        master[i] = kernels::adamw_element(master[i], g[i] * grad_factor, m[i], v[i], run.weight_decay, s);
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
