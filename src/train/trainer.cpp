// Trainer: the optimizer step of one rank on any layout.
#include "train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <thread>

#include "common/collective_check.hpp"
#include "common/error.hpp"
#include "data/batch_sampler.hpp"
#include "optim/lr_schedule.hpp"

namespace dtrain {
namespace {

// A token file of the run, opened and checked on every rank; a problem anywhere stops all ranks.
std::unique_ptr<TokenFile> open_checked(MPI_Comm world, const Config& cfg, const std::string& stream) {
  std::unique_ptr<TokenFile> file;
  collective_check(world, [&] {
    const std::string path = cfg.data.path + "." + stream + ".bin";
    file = std::make_unique<TokenFile>(TokenFile::open(path, cfg.model.vocab_size));
    check_sequence_fits(*file, cfg.model.seq_length, path);
  });
  return file;
}

// The forward actions of a schedule, in order: evaluation runs them and keeps nothing for backward.
StageActions forward_only(const StageActions& actions) {
  StageActions f;
  for (const auto& a : actions)
    if (a.kind == PipelineAction::forward) f.push_back(a);
  return f;
}

}  // namespace

Trainer::Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, const kernels::KernelTable& k)
    : cfg_(cfg),
      plan_(plan),
      ps_(ps),
      k_(k),
      train_data_(open_checked(ps.world(), cfg, "train")),
      val_data_(open_checked(ps.world(), cfg, "val")),
      tp_(ps.tp(), ps.watchdog()),
      actions_(schedule_actions(cfg.system.pipeline_schedule, plan.sizes.pp, plan.num_micro_batches, plan.virtual_stages,
                                ps.coords().pp)),
      model_(cfg, stage_part(cfg.model.num_layers, plan.sizes.pp, plan.virtual_stages, ps.coords().pp), &tp_, ps.coords().tp,
             k, PipelineExecutor::slots_needed(actions_), plan.sizes.dp),
      grad_sync_(model_, ps, cfg.system.overlap_grad_reduce, cfg.system.use_distributed_optimizer, plan.num_micro_batches),
      adamw_(model_.table(), cfg.optimizer, k, grad_sync_.owned()),
      train_exec_(model_, ps, actions_, plan.num_micro_batches, plan.virtual_stages, cfg.debug.synchronous_sends),
      eval_exec_(model_, ps, forward_only(actions_), plan.num_micro_batches, plan.virtual_stages, cfg.debug.synchronous_sends) {
  model_.init_parameters(cfg.training.seed);
  model_.set_block_backward_hook([this](int layer) { grad_sync_.block_backward_done(layer); });
  if (cfg.system.use_distributed_optimizer && cfg.system.overlap_param_gather)
    model_.set_block_forward_hook([this](int layer) { grad_sync_.wait_params(layer); });
}

void Trainer::load(const TokenFile& file, const std::string& stream, std::uint64_t step, int slot, int mb) {
  // Fault injection (debug.stall_*): this rank stops making progress, as a wedged GPU or node would.
  if (stream == "train" && ps_.world_rank() == cfg_.debug.stall_rank && static_cast<int>(step) + 1 == cfg_.debug.stall_at_step)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  SlotActs& s = model_.activations().slot(slot);
  // Global sample index: this data-parallel rank's block of the global batch, micro-batch mb within it.
  const std::uint64_t first = static_cast<std::uint64_t>(ps_.coords().dp * plan_.num_micro_batches + mb) * plan_.micro_batch;
  fill_samples(file, cfg_.training.seed, stream, step, first, plan_.micro_batch, cfg_.model.seq_length, s.tokens, s.targets);
}

double Trainer::sum_over_world(double v) const {
  double total = 0.0;
  auto w = watch(ps_.watchdog(), {"allreduce (loss/norm)", "world", -1, 8});
  MPI_CHECK(MPI_Allreduce(&v, &total, 1, MPI_DOUBLE, MPI_SUM, ps_.world()));
  return total;
}

StepResult Trainer::train_step(int step) {
  const double tokens = static_cast<double>(cfg_.model.global_batch_size) * cfg_.model.seq_length;
  const bool loss_owner = ps_.is_last_stage() && ps_.coords().tp == 0;
  Arena& grads = model_.grads();
  grad_sync_.wait_params(-1);
  grads.zero();
  grad_sync_.start_step();
  const PipelineStepStats st = train_exec_.run(
      [&](int slot, int mb) { load(*train_data_, "train", static_cast<std::uint64_t>(step), slot, mb); },
      static_cast<float>(1.0 / tokens));
  {
    Trace::Span span(ps_.trace(), "gradient sync", "dp");
    grad_sync_.finish();
  }

  StepResult r;
  r.loss = sum_over_world(loss_owner ? st.loss_sum : 0.0) / tokens;
  // Squared norm over the gradients this rank is responsible for: its optimizer ranges (all of them on
  // data-parallel rank 0 when the optimizer is not distributed), each tensor counted on one rank only.
  double sq = 0.0;
  if (cfg_.system.use_distributed_optimizer || ps_.coords().dp == 0)
    for (const auto& range : grad_sync_.owned())
      for (const auto& t : model_.table().tensors()) {
        const std::size_t lo = std::max(range.begin, t.offset), hi = std::min(range.end, t.offset + t.numel);
        if (lo < hi && grad_sync_.counts_for_norm(t)) sq += k_.sum_squares(grads.data() + lo, static_cast<long>(hi - lo));
      }
  r.grad_norm = std::sqrt(sum_over_world(sq));
  if (cfg_.optimizer.clip_grad > 0 && r.grad_norm > cfg_.optimizer.clip_grad) {
    const float factor = static_cast<float>(cfg_.optimizer.clip_grad / (r.grad_norm + 1e-6));
    for (const auto& range : grad_sync_.owned()) k_.scale(grads.data() + range.begin, factor, static_cast<long>(range.end - range.begin));
  }
  r.lr = learning_rate(cfg_.optimizer, step, cfg_.training.train_iters);
  {
    Trace::Span span(ps_.trace(), "optimizer", "optimizer");
    adamw_.step(model_.params(), grads, r.lr, step + 1);
  }
  grad_sync_.gather_params(cfg_.system.overlap_param_gather);
  // Measured bubble: every rank's waiting fraction, averaged (all ranks of a stage wait alike).
  r.bubble = sum_over_world(st.total_seconds > 0 ? st.wait_seconds / st.total_seconds : 0.0) / ps_.layout().world_size();
  return r;
}

void Trainer::gather_full_model(GptModel* full) {
  grad_sync_.wait_all_params();
  const TensorTable global(ModelShape::from(cfg_.model, cfg_.ffn_hidden()), stage_part(cfg_.model.num_layers, 1, 1, 0), 1, 0);
  std::vector<float> mine(global.total(), 0.0f);  // my slices at their global places, zeros elsewhere
  const float* params = model_.params().data();
  for (const auto& t : model_.table().tensors()) {
    if (!owns_globally(t)) continue;
    const std::size_t base = global.get(t.name).offset;
    for (std::size_t i = 0; i < t.numel; ++i) mine[base + global_index(t, static_cast<long>(i))] = params[t.offset + i];
  }
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(ps_.world(), &rank));
  if (rank == 0 && (!full || full->params().size() < global.total())) fatal("gather_full_model: no unsharded model on rank 0");
  MPI_CHECK(MPI_Reduce(mine.data(), rank == 0 ? full->params().data() : nullptr, static_cast<int>(global.total()), MPI_FLOAT,
                       MPI_SUM, 0, ps_.world()));
}

RankState Trainer::rank_state() {
  grad_sync_.wait_all_params();
  RankState st;
  st.table = &model_.table();
  st.params = model_.params().data();
  st.moments[0] = adamw_.first_moment().data();
  st.moments[1] = adamw_.second_moment().data();
  st.owned = grad_sync_.owned();
  st.writes_params = [this](const TensorSpec& t) { return owns_globally(t); };
  // Optimizer state: every data-parallel rank holds a slice with the distributed optimizer, else rank 0 all.
  const bool distributed = cfg_.system.use_distributed_optimizer;
  st.writes_moments = [this, distributed](const TensorSpec& t) {
    return (distributed || ps_.coords().dp == 0) && grad_sync_.counts_for_norm(t);
  };
  return st;
}

double Trainer::evaluate() {
  grad_sync_.wait_all_params();
  const bool loss_owner = ps_.is_last_stage() && ps_.coords().tp == 0;
  double loss_sum = 0.0;
  for (int it = 0; it < cfg_.training.eval_iters; ++it)
    loss_sum += eval_exec_.run([&](int slot, int mb) { load(*val_data_, "val", static_cast<std::uint64_t>(it), slot, mb); },
                               0.0f, /*forward_only=*/true)
                    .loss_sum;
  const double tokens = static_cast<double>(cfg_.training.eval_iters) * cfg_.model.global_batch_size * cfg_.model.seq_length;
  return sum_over_world(loss_owner ? loss_sum : 0.0) / tokens;
}

}  // namespace dtrain
