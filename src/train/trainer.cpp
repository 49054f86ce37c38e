// Trainer: the optimizer step of one rank on any layout, the read-back of steps, validation (the state
// a checkpoint saves and loads: trainer_state.cpp).
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "comm/collective_check.hpp"
#include "common/error.hpp"
#include "data/batch_sampler.hpp"
#include "data/open_data.hpp"
#include "optim/lr_schedule.hpp"
#include "parallel/all_to_all_dispatch.hpp"
#include "parallel/context_parallel.hpp"
#include "train/schedule_tuning.hpp"

namespace dtrain {
namespace {

// A data stream of the run, opened and checked on every rank (the ranks share the token scan of
// Megatron data); a problem anywhere stops all ranks.
std::unique_ptr<DataBlend> open_checked(const ParallelState& ps, const Config& cfg, const std::string& tokenizer,
                                        const std::string& stream) {
  std::unique_ptr<DataBlend> data;
  collective_check(ps.world_comm(), [&] {
    data = std::make_unique<DataBlend>(open_data(cfg.data, tokenizer, stream, cfg.model.vocab_size, cfg.model.seq_length,
                                                 ScanShare{ps.world_rank(), ps.layout().world_size()}));
  });
  return data;
}

SampleRules sample_rules(const Config& cfg, std::optional<int> eod) {
  SampleRules r;
  r.seq_length = cfg.model.seq_length;
  r.eod = eod;
  r.reset_position_ids = cfg.data.reset_position_ids, r.reset_attention_mask = cfg.data.reset_attention_mask;
  r.eod_mask_loss = cfg.data.eod_mask_loss, r.pack = cfg.data.pack;
  return r;
}

std::vector<const SampleReader*> readers_of(const SampleReader& train, const std::optional<SampleReader>& val) {
  std::vector<const SampleReader*> r{&train};
  if (val) r.push_back(&*val);
  return r;
}

}  // namespace

Trainer::Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, kernels::Backend backend,
                 const std::string& tokenizer, std::optional<int> eod)
    : cfg_(cfg),
      plan_(plan),
      ps_(ps),
      k32_(kernels::kernel_table<float>(backend)),
      train_data_(open_checked(ps, cfg, tokenizer, "train")),
      val_data_(cfg.training.eval_interval > 0 ? open_checked(ps, cfg, tokenizer, "val") : nullptr),
      train_reader_(*train_data_, sample_rules(cfg, eod)),
      val_reader_(val_data_ ? std::optional<SampleReader>(std::in_place, *val_data_, sample_rules(cfg, eod)) : std::nullopt),
      tp_(ps.tp()),
      dispatch_(ps.ep().size() > 1 ? std::make_unique<AllToAllExpertDispatch>(ps.ep(), device_for(backend)) : nullptr),
      model_(make_gpt_model(make_rank_plan(cfg, plan, ps.coords()), &tp_, backend, &ps.cp(), dispatch_.get())),
      grad_sync_(model_->plan(), model_->params(), model_->grads(), ps, cfg.system.overlap_grad_reduce, plan.num_micro_batches),
      sharded_(model_->plan().shards_params() ? std::make_unique<ShardedParams>(model_->plan(), model_->params(), ps) : nullptr),
      adamw_(model_->plan(), cfg.optimizer, backend),
      scaler_(cfg.system.precision == Precision::fp16 ? std::optional<LossScaler>(std::in_place, cfg.optimizer) : std::nullopt),
      deferred_(!scaler_ && !model_->plan().offload_optimizer),
      window_(deferred_ ? std::clamp(cfg.logging.log_interval, 1, kMaxPendingSteps) : 1),
      batches_(model_->device(), model_->dims(), plan.num_micro_batches, plan.micro_batch, cfg.model.seq_length, window_,
               readers_of(train_reader_, val_reader_)),
      sums_(model_->device(), 2 * static_cast<std::size_t>(window_) * sizeof(double)),
      factor_(model_->device(), sizeof(float)),
      stage_(*model_),
      train_exec_(stage_, ps, plan.schedule,
                  schedule_actions(plan.schedule, plan.sizes.pp, plan.num_micro_batches, plan.sizes.v, ps.coords().pp),
                  plan.num_micro_batches, plan.sizes.v),
      eval_exec_(stage_, ps, plan.schedule,
                 forward_only(schedule_actions(plan.schedule, plan.sizes.pp, plan.num_micro_batches, plan.sizes.v, ps.coords().pp)),
                 plan.num_micro_batches, plan.sizes.v),
      predicted_bubble_(plan.bubble) {
  skipped_batches_.insert(cfg.training.iterations_to_skip.steps.begin(), cfg.training.iterations_to_skip.steps.end());
  init_weights(cfg.training.seed);
  if (model_->plan().offload_optimizer)
    grad_sync_.on_final([this](ArenaRange mine) { adamw_.gradients_final(model_->grads(), mine); });
  const bool wait_gather = cfg.system.use_distributed_optimizer && cfg.system.overlap_param_gather;
  model_->set_layer_hook([this, wait_gather](int layer, LayerPhase phase) {
    if (sharded_) sharded_->on_layer(layer, phase);
    if (phase == LayerPhase::before_forward && wait_gather && layer >= 0) grad_sync_.wait_params(layer);
    // A layer's gradients are written in its backward, or in B (the norms) and W (the rest) of a split
    // one, and complete after its backward or its W.
    const bool writes = phase == LayerPhase::before_backward || phase == LayerPhase::before_weight_grad;
    const bool complete = phase == LayerPhase::after_backward || phase == LayerPhase::after_weight_grad;
    if (writes && layer >= 0) grad_sync_.block_backward_begin(layer);
    if (complete && layer >= 0) grad_sync_.block_backward_done(layer);
  });
}

void Trainer::init_weights(std::uint64_t seed) {
  constexpr std::size_t kPiece = std::size_t{1} << 22;  // elements per piece: 16 MiB of fp32
  std::vector<float> values;
  write_kept_parameters([&](const ArenaRange& range) {
    for (std::size_t at = range.begin; at < range.end; at += kPiece) {
      const ArenaRange piece{at, std::min(range.end, at + kPiece)};
      values.resize(piece.end - piece.begin);
      init_parameters(model_->table(), seed, piece, values.data());
      model_->set_parameters(piece, values.data());
      adamw_.set_master(piece, values.data());  // bf16: the exact fp32 initial values, not their rounding
    }
  });
}

void Trainer::write_kept_parameters(const std::function<void(const ArenaRange&)>& write) {
  if (sharded_) return sharded_->write_owned(write);  // ZeRO-3: a bucket's slice at a time (offloaded: then to host memory)
  for (const ArenaRange& range : model_->plan().param_ranges()) write(range);
}

double Trainer::load_batches(const SampleReader& reader, const std::string& stream, std::uint64_t step, std::size_t slot, bool queued) {
  const std::uint64_t counted = batches_.load(reader, cfg_.training.seed, stream, step, ps_.coords().dp, slot, queued);
  if (!batches_.has_loss_mask()) return static_cast<double>(cfg_.model.global_batch_size) * cfg_.model.seq_length;
  // Each data-parallel rank's samples once (its tp, cp and pp ranks read the same ones): an exact sum of
  // integers, the same on every rank and layout.
  const Coords& c = ps_.coords();
  return sum_over_world(c.tp == 0 && c.cp == 0 && c.pp == 0 ? static_cast<double>(counted) : 0.0);
}

void Trainer::sum_over_world_on_device(double* sums) {
  // Every member of a group gets the same bits from it; groups of one axis with the same inputs (the
  // tp ranks' cp groups, say) are taken to sum alike, as the gradient reductions of parameters
  // replicated over tp already take: they have the same size and span the same kind of links.
  for (Axis a : {Axis::tp, Axis::cp, Axis::dp, Axis::pp})
    if (ps_.group(a).size() > 1) ps_.group(a).all_reduce(sums, 2, DType::f64, ReduceOp::sum, {"allreduce (loss/norm)"});
}

double Trainer::sum_over_world(double v) const {
  ps_.world().all_reduce(&v, 1, DType::f64, ReduceOp::sum, {"allreduce (loss/norm)"});
  return v;
}

void Trainer::for_each_counted_run(const std::function<void(std::size_t, std::size_t)>& visit) const {
  // The gradients this rank is responsible for: its optimizer ranges of the tensors whose moments it
  // writes (all ranges on rank 0 of a tensor's gradient group when the optimizer is not distributed),
  // so every element is counted on one rank only. Adjacent counted tensors form one run.
  const RankPlan& rp = model_->plan();
  const auto& tensors = rp.table.tensors();
  for (const auto& range : rp.optimizer_ranges) {
    std::size_t run_lo = 0, run_hi = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorSpec& t = tensors[i];
      const std::size_t lo = std::max(range.begin, t.offset), hi = std::min(range.end, t.offset + t.numel);
      if (lo >= hi || !rp.writes_moments(i)) continue;
      if (lo != run_hi) {
        if (run_lo < run_hi) visit(run_lo, run_hi);
        run_lo = lo;
      }
      run_hi = hi;
    }
    if (run_lo < run_hi) visit(run_lo, run_hi);
  }
}

void Trainer::add_counted_sum_squares(double* sum) {
  // One reduction per contiguous run rather than per tensor, added up on the device.
  const float* grads = model_->grads().as<float>();
  for_each_counted_run([&](std::size_t lo, std::size_t hi) { k32_.sum_squares(sum, grads + lo, static_cast<long>(hi - lo)); });
}

void Trainer::inject_nonfinite_gradient() {
  bool done = false;
  for_each_counted_run([&](std::size_t lo, std::size_t) {
    if (!done) k32_.fill(model_->grads().as<float>() + lo, std::numeric_limits<float>::infinity(), 1);
    done = true;
  });
}

void Trainer::read_pending() {
  if (pending_.empty()) return;
  std::vector<PendingStep> steps;
  steps.swap(pending_);  // read or thrown away: a rollback goes on without them
  std::vector<double> sums(2 * steps.size());
  model_->device().copy(sums.data(), sums_.data(), sums.size() * sizeof(double));  // the one wait for the device
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const PendingStep& p = steps[i];
    // The same values on every rank (summed over the world): all decide alike. The scale is a power of
    // two unless configured otherwise, so dividing it out is exact.
    const StepLoss s{p.step, sums[2 * i] / p.tokens, std::sqrt(sums[2 * i + 1]) / p.loss_scale};
    // A non-finite loss stops training (the forward pass overflowed or diverged: no scale cures that); a
    // non-finite gradient norm skips the update in an fp16 run (the scale was too large) and stops
    // training otherwise. The device skipped the step's update in both cases (step_factor).
    // At the smallest scale no back-off remains: skipping would skip every step that follows and exit 0.
    const bool floor = scaler_ && scaler_->at_floor();
    const bool overflow = scaler_ && !floor && std::isfinite(s.loss) && !std::isfinite(s.grad_norm);
    if (!overflow && (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))) {
      settled_.clear();
      const int last = steps.back().step + 1;
      char buf[640];
      std::snprintf(buf, sizeof buf,
                    "step %d: the loss is %g and the gradient norm %g%s; its optimizer update was skipped and training stops%s, "
                    "and nothing from it is saved (the last checkpoint, if any, is untouched); lower optimizer.lr, set "
                    "optimizer.clip_grad, check the data, or let training.on_nonfinite=rollback go back to the last checkpoint "
                    "and skip this step's batch",
                    p.step + 1, s.loss, s.grad_norm,
                    floor ? " at fp16's smallest loss scale (optimizer.min_loss_scale), which no back-off can lower" : "",
                    last == p.step + 1 ? "" : (" at step " + std::to_string(last) + ", where it was read back").c_str());
      throw NonFiniteStep(p.step + 1, buf);
    }
    if (scaler_) {
      scaler_->update(overflow);
      if (overflow) {
        ++skipped_steps_;
        adamw_.drop_early_copies();
      }
    }
    settled_.push_back(s);
  }
}

std::vector<StepLoss> Trainer::settle() {
  read_pending();
  std::vector<StepLoss> done;
  done.swap(settled_);
  return done;
}

void Trainer::abandon_step() {
  pending_.clear(), settled_.clear();
  grad_sync_.wait_all_params();
  if (sharded_) sharded_->discard_all();
  adamw_.drop_early_copies();
}

StepResult Trainer::train_step(int step) {
  if (skipped_batches_.count(step + 1)) {
    ++skipped_steps_;  // the learning-rate schedule and AdamW's step count follow the updates taken
    StepResult r;
    r.batch_skipped = true;
    return r;
  }
  const bool loss_owner = model_->part().head && ps_.coords().tp == 0;  // the stage with the LM head
  Arena& grads = model_->grads();
  const double all_to_all_before = ps_.ep().all_to_all_seconds();
  // A full window (kMaxPendingSteps) is read back before the step touches anything (it may throw).
  if (static_cast<int>(pending_.size()) == window_) read_pending();
  grad_sync_.wait_params(-1);
  grad_sync_.start_step();
  MoeStats& moe = model_->moe_stats();
  moe.reset();  // from this step's forward passes only (not validation's)
  // The step's sums on the device, (2), in its pending slot: the summed token loss (the last stage's
  // forwards add to it) and the squared gradient norm; read back by settle().
  Device& device = model_->device();
  const std::size_t slot = pending_.size();
  double* sums = sums_.as<double>() + 2 * slot;
  device.zero(sums, 2 * sizeof(double));
  // Queued: the step's pinned batch is rewritten only after a settle has waited for the device. With a
  // loss mask the loss is the mean over the global batch's counted targets (a global batch with none
  // divides by 1: its loss and gradients are 0).
  const double tokens =
      std::max(1.0, load_batches(train_reader_, "train", static_cast<std::uint64_t>(step), slot, /*queued=*/true));
  // Fault injection (debug.stall_*): this rank stops making progress in its first forward of the
  // step, as a wedged GPU or node would.
  bool stall = ps_.world_rank() == cfg_.debug.stall_rank && step + 1 == cfg_.debug.stall_at_step;
  if (stall && !cfg_.debug.stall_once_file.empty()) {  // once: a restart of the job runs on
    std::error_code ec;
    stall = !std::filesystem::exists(cfg_.debug.stall_once_file, ec);
    if (stall) std::ofstream(cfg_.debug.stall_once_file) << "stalled at step " << step + 1 << "\n";
  }
  // fp16: the backward pass starts from the loss times the scale, so the gradients carry it too.
  const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
  stage_.bind(batches_.view(), sums, static_cast<float>(loss_scale / tokens), [stall](int) {
    while (stall) std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  const bool timed = plan_.schedule == PipelineSchedule::zbv && plan_.sizes.pp > 1 && steps_run_ == 1;
  train_exec_.set_timing(timed);
  const PipelineStepStats st = train_exec_.run();
  ++steps_run_;
  if (timed) replan_zbv(st);
  {
    Trace::Span span(ps_.trace(), "gradient sync", "dp");
    model_->fold_tied_head_gradient();
    grad_sync_.finish();
  }
  if (step + 1 == cfg_.debug.nonfinite_grad_at_step && ps_.world_rank() == 0) inject_nonfinite_gradient();

  add_counted_sum_squares(sums + 1);
  if (!loss_owner) device.zero(sums, sizeof(double));  // tp > 0 computed the same loss; other stages none
  sum_over_world_on_device(sums);
  // The update's factor from the sums, on the device: the loss scale divided out and the clipping, or
  // NaN, which skips the update, for a non-finite loss or norm.
  k32_.step_factor(factor_.as<float>(), sums, tokens, loss_scale, cfg_.optimizer.clip_grad);
  pending_.push_back({step, loss_scale, tokens});
  StepResult r;
  if (!moe.tokens.empty()) {
    // Every tp rank holds the same statistics: tp rank 0 reports them (with context parallelism each cp
    // rank its own tokens per expert, and cp rank 0 the micro-batch's load-balancing loss).
    const bool owner = ps_.coords().tp == 0;
    std::vector<double> sums(1 + moe.tokens.size(), 0.0);
    if (owner) sums[0] = moe.aux_loss, std::copy(moe.tokens.begin(), moe.tokens.end(), sums.begin() + 1);
    ps_.world().all_reduce(sums.data(), static_cast<long>(sums.size()), DType::f64, ReduceOp::sum, {"allreduce (MoE statistics)"});
    r.moe_aux = sums[0] / (static_cast<double>(plan_.num_micro_batches) * plan_.sizes.dp);
    r.moe_tokens.assign(sums.begin() + 1, sums.end());
  }
  const RankPlan& rp = model_->plan();
  const int updates = step - static_cast<int>(skipped_steps_);  // updates taken before this step's
  r.lr = learning_rate(cfg_.optimizer, updates, cfg_.training.train_iters);
  {
    Trace::Span span(ps_.trace(), "optimizer", "optimizer");
    // Parameter offload: an offloaded optimizer updates the slices in host memory where they live;
    // AdamW on the device needs them in the arena for the update.
    const bool on_host = sharded_ && rp.offload_params && rp.offload_optimizer;
    if (sharded_ && !on_host) sharded_->owned_to_device();
    adamw_.step(model_->params(), grads, r.lr, updates + 1, factor_.as<float>(), on_host ? sharded_->host_slices() : nullptr);
    if (sharded_ && !on_host) sharded_->owned_to_host();
  }
  if (!deferred_) {
    // fp16: the scaler takes the step's overflow before the next step; the scale and skip are the step's.
    const std::int64_t skipped_before = skipped_steps_;
    read_pending();
    r.skipped = skipped_steps_ > skipped_before;
    if (scaler_) r.loss_scale = scaler_->scale();
    // The step line's rate: the schedule at the updates taken, this step's skip counted (as before the
    // factor moved to the device; the update itself used the rate before it, and for a skip none).
    r.lr = learning_rate(cfg_.optimizer, step - static_cast<int>(skipped_steps_), cfg_.training.train_iters);
  }
  grad_sync_.gather_params(cfg_.system.overlap_param_gather);
  if (sharded_) sharded_->discard_all();  // ZeRO-3: the gathered copies are stale now
  // Measured bubble: every rank's waiting fraction, averaged (all ranks of a stage wait alike).
  r.bubble = sum_over_world(st.total_seconds > 0 ? st.wait_seconds / st.total_seconds : 0.0) / ps_.layout().world_size();
  if (ps_.ep().size() > 1)
    r.all_to_all_s = sum_over_world(ps_.ep().all_to_all_seconds() - all_to_all_before) / ps_.layout().world_size();
  return r;
}

void Trainer::replan_zbv(const PipelineStepStats& timed) {
  train_exec_.set_timing(false);
  const ScheduleTuning t = tune_zbv(timed, ps_.world_comm(), plan_.sizes.pp, plan_.num_micro_batches);
  const bool better = t.bubble < t.equal_cost_bubble && (t.nccl_safe || !ps_.pipeline_on_nccl());
  if (better) train_exec_.reschedule(t.stages[static_cast<std::size_t>(ps_.coords().pp)]);
  predicted_bubble_ = better ? t.bubble : t.equal_cost_bubble;
  char line[400];
  std::snprintf(line, sizeof line,
                "zbv: measured per chunk forward %.3g ms, input gradient %.3g ms, weight gradient %.3g ms (costs 1 : %.2f : %.2f); %s "
                "(predicted bubble %.1f%%, %.1f%% in the order for equal times)",
                1e3 * t.seconds[0], 1e3 * t.seconds[1], 1e3 * t.seconds[2], t.costs.input_grad, t.costs.weight_grad,
                better ? "actions reordered for them" : !t.nccl_safe && ps_.pipeline_on_nccl() ? "their order would not run on NCCL: kept"
                                                                                                 : "the order stays",
                100 * (better ? t.bubble : t.equal_cost_bubble), 100 * t.equal_cost_bubble);
  schedule_message_ = line;
}

double Trainer::evaluate() {
  if (!val_data_) fatal("evaluate() without a validation file (training.eval_interval = 0)");
  read_pending();  // sums_ is reused below
  grad_sync_.wait_all_params();
  const bool loss_owner = model_->part().head && ps_.coords().tp == 0;  // the stage with the LM head
  Device& device = model_->device();
  double* sum = sums_.as<double>();  // the summed token loss of every batch, on the device
  device.zero(sum, sizeof(double));
  double tokens = 0.0;  // the counted targets of every batch
  for (int it = 0; it < cfg_.training.eval_iters; ++it) {
    tokens += load_batches(*val_reader_, "val", static_cast<std::uint64_t>(it), 0, /*queued=*/false);  // the pinned batch is reused at once
    stage_.bind(batches_.view(), sum, 0.0f);
    eval_exec_.run();
  }
  double loss_sum = 0.0;
  device.copy(&loss_sum, sum, sizeof loss_sum);
  return sum_over_world(loss_owner ? loss_sum : 0.0) / std::max(1.0, tokens);
}

}  // namespace dtrain
