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

PipelineExecutor::PipelineExecutor(PipelineStage& stage, const ParallelState& ps, PipelineSchedule schedule, StageActions actions, int m,
                                   int chunks)
    : compute_(stage),
      ps_(ps),
      schedule_(schedule),
      actions_(std::move(actions)),
      p2p_ops_(stage_p2p_ops(actions_, schedule, ps.layout().sizes().pp, chunks, ps.coords().pp)),
      m_(m),
      v_(chunks),
      p_(ps.layout().sizes().pp),
      stage_(ps.coords().pp),
      grad_in_(stage.device(), stage.message_count() * dtype_bytes(stage.message_type())),
      outbox_(ps.pp(), stage.device(), stage.message_type(), stage.message_count()),
      forward_only_(std::all_of(actions_.begin(), actions_.end(), [](const PipelineAction& a) { return a.kind == PipelineAction::forward; })) {
  check_actions();
  if ((static_cast<long>(m_) * v_ * p_ + 1) * 2 > ps.pp().max_tag())
    throw UserError("too many micro-batches (" + std::to_string(m_) + ") for MPI message tags; raise model.micro_batch_size");
}

void PipelineExecutor::check_actions() const {
  if (!forward_only_)
    if (const std::string problem = stage_actions_problem(actions_, m_, v_); !problem.empty())
      fatal("internal error: the " + std::string(to_string(schedule_)) + " schedule's list for stage " + std::to_string(stage_) +
            " cannot run: " + problem);
  // Evaluation holds one slot, two at zbv's turn (the first chunk's output until the second copies it).
  const int needed = forward_only_ ? (schedule_ == PipelineSchedule::zbv ? 2 : 1) : peak_in_flight(actions_);
  if (compute_.slots() < needed)
    fatal("pipeline executor: the stage has " + std::to_string(compute_.slots()) + " activation slots, the schedule needs " +
          std::to_string(needed));
}

void PipelineExecutor::reschedule(StageActions actions) {
  actions_ = std::move(actions);
  p2p_ops_ = stage_p2p_ops(actions_, schedule_, p_, v_, stage_);
  check_actions();
}

int PipelineExecutor::tag(int micro_batch, int receiving_virtual_stage, int direction) const {
  return (micro_batch * v_ * p_ + receiving_virtual_stage) * 2 + direction;
}

const P2pOp& PipelineExecutor::next_p2p_op(bool send, int direction, int micro_batch) {
  if (p2p_next_ >= p2p_ops_.size() || p2p_ops_[p2p_next_].send != send || p2p_ops_[p2p_next_].direction != direction ||
      p2p_ops_[p2p_next_].micro_batch != micro_batch)
    fatal("internal error: the pipeline executor's point-to-point order differs from stage_p2p_ops at op " + std::to_string(p2p_next_));
  return p2p_ops_[p2p_next_++];
}

PipelineStepStats PipelineExecutor::run() {
  PipelineStepStats st;
  const auto step_start = Clock::now();
  Trace::Span pipeline_span(ps_.trace(), forward_only_ ? "evaluation" : "pipeline", "step");
  free_slots_.clear();
  for (int s = compute_.slots() - 1; s >= 0; --s) free_slots_.push_back(s);
  slot_of_.clear();
  p2p_next_ = 0;
  Communicator& pp = ps_.pp();
  // Sends the outbox's current buffer; flushes it unless the next operation is a receive to pair with.
  auto send = [&](int direction, const CommLabel& label) {
    const std::size_t i = p2p_next_;
    const P2pOp& op = next_p2p_op(true, direction, label.micro_batch);
    outbox_.send(op.peer, tag_of(op), label);
    if (!send_joins_next_receive(p2p_ops_, i)) pp.flush_sends();
  };
  const std::size_t count = compute_.message_count();
  const DType type = compute_.message_type();
  Device& device = compute_.device();
  const int last_virtual = v_ * p_ - 1;

  // zbv's turn of the V: a neighbouring virtual stage on this same stage hands over in memory.
  const auto local = [&](int vs) { return stage_chunk(schedule_, p_, vs).stage == stage_; };
  // The compute of one action, timed when asked (kind: 0 forward, 1 input gradient, 2 weight gradient).
  const auto compute = [&](int kind, const auto& work) {
    if (!timing_) return work();
    device.synchronize();
    const auto t0 = Clock::now();
    work();
    device.synchronize();
    st.seconds[kind] += since(t0);
    ++st.count[kind];
  };
  const auto free_slot = [&](const PipelineAction& a, int slot) {
    slot_of_.erase({a.micro_batch, a.chunk});
    free_slots_.push_back(slot);
  };
  for (const PipelineAction& a : actions_) {
    const int vs = virtual_stage(a.chunk);
    if (a.kind == PipelineAction::forward) {
      const int slot = free_slots_.back();
      free_slots_.pop_back();
      slot_of_[{a.micro_batch, a.chunk}] = slot;
      if (Watchdog* wd = ps_.watchdog()) wd->phase("forward", a.micro_batch, a.chunk, stage_);
      if (vs > 0 && local(vs - 1)) {  // the previous chunk's output, still in its slot
        const PipelineAction prev{PipelineAction::forward, a.micro_batch, stage_chunk(schedule_, p_, vs - 1).chunk};
        const int prev_slot = slot_of_.at({prev.micro_batch, prev.chunk});
        device.copy(compute_.input(slot), compute_.output(prev_slot, prev.chunk), count * dtype_bytes(type));
        if (forward_only_) free_slot(prev, prev_slot);  // kept for this copy
      } else if (vs > 0) {  // activation from the previous virtual stage
        const auto t0 = Clock::now();
        const P2pOp& op = next_p2p_op(false, 0, a.micro_batch);
        pp.recv(compute_.input(slot), count, type, op.peer, tag_of(op), {"recv activation", a.micro_batch, stage_});
        st.wait_seconds += since(t0);
      }
      {
        Trace::Span span(ps_.trace(), "F mb" + std::to_string(a.micro_batch) + " c" + std::to_string(a.chunk), "forward");
        compute(0, [&] { compute_.forward(slot, a.chunk, a.micro_batch); });
      }
      if (vs < last_virtual && !local(vs + 1)) {  // MPI work of a send (a copy, progress on earlier ones) is communication time too
        const auto t0 = Clock::now();
        Trace::Span span(ps_.trace(), "send act mb" + std::to_string(a.micro_batch), "p2p");
        device.copy(outbox_.buffer(), compute_.output(slot, a.chunk), count * dtype_bytes(type));
        send(0, {"send activation", a.micro_batch, stage_});
        st.wait_seconds += since(t0);
      }
      if (forward_only_ && !(vs < last_virtual && local(vs + 1))) free_slot(a, slot);
    } else if (a.kind == PipelineAction::weight_grad) {
      const int slot = slot_of_.at({a.micro_batch, a.chunk});
      if (Watchdog* wd = ps_.watchdog()) wd->phase("weight gradients", a.micro_batch, a.chunk, stage_);
      {
        Trace::Span span(ps_.trace(), "W mb" + std::to_string(a.micro_batch) + " c" + std::to_string(a.chunk), "backward");
        compute(2, [&] { compute_.backward_weight(slot, a.chunk, a.micro_batch); });
      }
      free_slot(a, slot);
    } else {  // a whole backward, or its input-gradient half
      const int slot = slot_of_.at({a.micro_batch, a.chunk});
      const bool whole = a.kind == PipelineAction::backward;
      if (Watchdog* wd = ps_.watchdog()) wd->phase(whole ? "backward" : "input gradient", a.micro_batch, a.chunk, stage_);
      const void* output_grad = nullptr;
      if (vs < last_virtual && local(vs + 1)) {  // handed over by the next chunk's backward on this stage
        output_grad = local_grads_.at(a.micro_batch).data();
      } else if (vs < last_virtual) {  // gradient from the next virtual stage
        const auto t1 = Clock::now();
        const P2pOp& op = next_p2p_op(false, 1, a.micro_batch);
        pp.recv(grad_in_.data(), count, type, op.peer, tag_of(op), {"recv gradient", a.micro_batch, stage_});
        st.wait_seconds += since(t1);
        output_grad = grad_in_.data();
      }
      const bool hand_over = vs > 0 && local(vs - 1);
      if (hand_over) {
        Arena buffer = spare_grads_.empty() ? Arena(device, count * dtype_bytes(type)) : std::move(spare_grads_.back());
        if (!spare_grads_.empty()) spare_grads_.pop_back();
        local_grads_.emplace(a.micro_batch, std::move(buffer));
      }
      auto t0 = Clock::now();  // the outbox's buffer may wait for an earlier send to complete
      void* input_grad = hand_over ? local_grads_.at(a.micro_batch).data() : vs > 0 ? outbox_.buffer() : nullptr;
      st.wait_seconds += since(t0);
      {
        Trace::Span span(ps_.trace(), "B mb" + std::to_string(a.micro_batch) + " c" + std::to_string(a.chunk), "backward");
        compute(1, [&] {
          if (whole)
            compute_.backward(slot, a.chunk, a.micro_batch, output_grad, input_grad);
          else
            compute_.backward_input(slot, a.chunk, a.micro_batch, output_grad, input_grad);
        });
      }
      if (vs < last_virtual && local(vs + 1)) {
        spare_grads_.push_back(std::move(local_grads_.at(a.micro_batch)));
        local_grads_.erase(a.micro_batch);
      }
      if (vs > 0 && !hand_over) {
        t0 = Clock::now();
        Trace::Span span(ps_.trace(), "send grad mb" + std::to_string(a.micro_batch), "p2p");
        send(1, {"send gradient", a.micro_batch, stage_});
        st.wait_seconds += since(t0);
      }
      if (whole) free_slot(a, slot);
    }
  }
  st.wait_seconds += outbox_.complete_all(ps_.trace());
  st.total_seconds = since(step_start);
  return st;
}

}  // namespace dtrain
