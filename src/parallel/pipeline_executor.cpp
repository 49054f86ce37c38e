// PipelineExecutor: the action loop. Receives block (their time is the stage's measured bubble);
// sends copy into the outbox and never block; they are completed after the last action.
#include "parallel/pipeline_executor.hpp"

#include <algorithm>
#include <chrono>

#include "common/error.hpp"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int PipelineExecutor::slots_needed(const StageActions& actions) {
  for (const auto& a : actions)
    if (a.kind == PipelineAction::backward) return peak_in_flight(actions);
  return 1;
}

PipelineExecutor::PipelineExecutor(GptModel& model, const ParallelState& ps, StageActions actions, int m, int chunks,
                                   bool synchronous_sends)
    : model_(model),
      ps_(ps),
      actions_(std::move(actions)),
      m_(m),
      v_(chunks),
      p_(ps.layout().sizes().pp),
      stage_(ps.coords().pp),
      grad_in_(static_cast<std::size_t>(model.dims().Ns()) * model.dims().C),
      outbox_(grad_in_.size(), synchronous_sends) {
  if (model.activations().num_slots() < slots_needed(actions_))
    fatal("pipeline executor: model has " + std::to_string(model.activations().num_slots()) + " activation slots, schedule needs " +
          std::to_string(slots_needed(actions_)));
  int tag_ub = 32767, flag = 0;
  int* attr = nullptr;
  MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag));
  if (flag && attr) tag_ub = *attr;
  if (tag(m_ - 1, v_ * p_ - 1, 1) > tag_ub)
    throw UserError("too many micro-batches (" + std::to_string(m_) + ") for MPI message tags; raise model.micro_batch_size");
}

int PipelineExecutor::tag(int micro_batch, int receiving_virtual_stage, int direction) const {
  return (micro_batch * v_ * p_ + receiving_virtual_stage) * 2 + direction;
}

PipelineStepStats PipelineExecutor::run(const std::function<void(int, int)>& load, float loss_scale, bool forward_only) {
  PipelineStepStats st;
  const auto step_start = Clock::now();
  Trace::Span pipeline_span(ps_.trace(), forward_only ? "evaluation" : "pipeline", "step");
  free_slots_.clear();
  for (int s = 0; s < model_.activations().num_slots(); ++s) free_slots_.push_back(s);
  slot_of_.clear();
  const MPI_Comm comm = ps_.pp().comm();
  const ActivationDims& d = model_.dims();
  const int count = static_cast<int>(d.Ns() * d.C);
  const int last_virtual = v_ * p_ - 1;

  for (const PipelineAction& a : actions_) {
    const int vs = virtual_stage(a.chunk);
    if (a.kind == PipelineAction::forward) {
      const int slot = free_slots_.back();
      free_slots_.pop_back();
      slot_of_[{a.micro_batch, a.chunk}] = slot;
      if (Watchdog* wd = ps_.watchdog()) wd->phase("forward", a.micro_batch, a.chunk, stage_);
      load(slot, a.micro_batch);
      if (vs > 0) {  // activation from the previous virtual stage
        const int src = stage_ > 0 ? stage_ - 1 : p_ - 1;
        const auto t0 = Clock::now();
        auto w = watch(ps_.watchdog(), {"recv activation", "pp", ps_.pp().world_ranks()[src], count * 4L, a.micro_batch, stage_});
        Trace::Span span(ps_.trace(), "recv act mb" + std::to_string(a.micro_batch), "p2p");
        MPI_CHECK(MPI_Recv(model_.activations().slot(slot).stage_input, count, MPI_FLOAT, src, tag(a.micro_batch, vs, 0),
                           comm, MPI_STATUS_IGNORE));
        st.wait_seconds += since(t0);
      }
      {
        Trace::Span span(ps_.trace(), "F mb" + std::to_string(a.micro_batch) + " c" + std::to_string(a.chunk), "forward");
        st.loss_sum += model_.forward(slot, a.chunk);
      }
      if (vs < last_virtual) {
        const int dst = stage_ < p_ - 1 ? stage_ + 1 : 0;
        const float* out = model_.stage_output(slot, a.chunk);
        std::copy(out, out + count, outbox_.buffer());
        outbox_.send(dst, tag(a.micro_batch, vs + 1, 0), comm,
                     {"send activation", "pp", ps_.pp().world_ranks()[dst], count * 4L, a.micro_batch, stage_});
      }
      if (forward_only) {
        slot_of_.erase({a.micro_batch, a.chunk});
        free_slots_.push_back(slot);
      }
    } else {
      const int slot = slot_of_.at({a.micro_batch, a.chunk});
      if (Watchdog* wd = ps_.watchdog()) wd->phase("backward", a.micro_batch, a.chunk, stage_);
      const std::string backward_name = "B mb" + std::to_string(a.micro_batch) + " c" + std::to_string(a.chunk);
      if (vs == last_virtual) {
        Trace::Span span(ps_.trace(), backward_name, "backward");
        model_.backward(slot, a.chunk, loss_scale);
      } else {
        const int src = stage_ < p_ - 1 ? stage_ + 1 : 0;
        {
          const auto t0 = Clock::now();
          auto w = watch(ps_.watchdog(), {"recv gradient", "pp", ps_.pp().world_ranks()[src], count * 4L, a.micro_batch, stage_});
          Trace::Span span(ps_.trace(), "recv grad mb" + std::to_string(a.micro_batch), "p2p");
          MPI_CHECK(MPI_Recv(grad_in_.data(), count, MPI_FLOAT, src, tag(a.micro_batch, vs, 1), comm, MPI_STATUS_IGNORE));
          st.wait_seconds += since(t0);
        }
        Trace::Span span(ps_.trace(), backward_name, "backward");
        model_.backward(slot, a.chunk, loss_scale, grad_in_.data());
      }
      if (vs > 0) {
        const int dst = stage_ > 0 ? stage_ - 1 : p_ - 1;
        const float* grad = model_.activations().slot(slot).grad_out;
        std::copy(grad, grad + count, outbox_.buffer());
        outbox_.send(dst, tag(a.micro_batch, vs - 1, 1), comm,
                     {"send gradient", "pp", ps_.pp().world_ranks()[dst], count * 4L, a.micro_batch, stage_});
      }
      slot_of_.erase({a.micro_batch, a.chunk});
      free_slots_.push_back(slot);
    }
  }
  st.wait_seconds += outbox_.complete_all(ps_.watchdog(), ps_.trace());
  st.total_seconds = since(step_start);
  return st;
}

}  // namespace dtrain
