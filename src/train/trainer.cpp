// Trainer: the optimizer step of one rank, data-parallel by gradient all-reduce.
#include "train/trainer.hpp"

#include <cmath>

#include "common/collective_check.hpp"
#include "common/error.hpp"
#include "data/batch_sampler.hpp"
#include "optim/lr_schedule.hpp"

namespace dtrain {

namespace {

// Both token files of the run, opened and checked on every rank; a problem anywhere stops all ranks.
std::unique_ptr<TokenFile> open_checked(const Config& cfg, const std::string& stream) {
  std::unique_ptr<TokenFile> file;
  collective_check(MPI_COMM_WORLD, [&] {
    const std::string path = cfg.data.path + "." + stream + ".bin";
    file = std::make_unique<TokenFile>(TokenFile::open(path, cfg.model.vocab_size));
    check_sequence_fits(*file, cfg.model.seq_length, path);
  });
  return file;
}

}  // namespace

Trainer::Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, const kernels::KernelTable& k)
    : cfg_(cfg),
      plan_(plan),
      ps_(ps),
      k_(k),
      train_data_(open_checked(cfg, "train")),
      val_data_(open_checked(cfg, "val")),
      model_(cfg, stage_part(cfg.model.num_layers, plan.sizes.pp, plan.virtual_stages, ps.coords().pp), plan.sizes.tp,
             ps.coords().tp, k, /*activation_slots=*/1),
      adamw_(model_.table(), cfg.optimizer, k) {
  model_.init_parameters(cfg.training.seed);
}

void Trainer::load_micro_batch(const TokenFile& file, const std::string& stream, std::uint64_t step, std::uint64_t first) {
  SlotActs& s = model_.activations().slot(0);
  fill_samples(file, cfg_.training.seed, stream, step, first, plan_.micro_batch, cfg_.model.seq_length, s.tokens, s.targets);
}

double Trainer::sum_over(MPI_Comm comm, double v) const {
  double total = 0.0;
  MPI_CHECK(MPI_Allreduce(&v, &total, 1, MPI_DOUBLE, MPI_SUM, comm));
  return total;
}

StepResult Trainer::train_step(int step) {
  const int m = plan_.num_micro_batches, mb = plan_.micro_batch, dp_rank = ps_.coords().dp;
  const double tokens = static_cast<double>(cfg_.model.global_batch_size) * cfg_.model.seq_length;
  Arena& grads = model_.grads();
  grads.zero();
  double loss_sum = 0.0;
  for (int j = 0; j < m; ++j) {
    // Global sample index: this rank's block of the global batch, micro-batch j within it.
    load_micro_batch(*train_data_, "train", static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(dp_rank * m + j) * mb);
    loss_sum += model_.forward(0);
    model_.backward(0, static_cast<float>(1.0 / tokens));
  }
  if (ps_.dp().size() > 1)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM, ps_.dp().comm()));

  StepResult r;
  r.loss = sum_over(ps_.dp().comm(), loss_sum) / tokens;
  r.grad_norm = std::sqrt(k_.sum_squares(grads.data(), static_cast<long>(grads.size())));
  if (cfg_.optimizer.clip_grad > 0 && r.grad_norm > cfg_.optimizer.clip_grad)
    k_.scale(grads.data(), static_cast<float>(cfg_.optimizer.clip_grad / (r.grad_norm + 1e-6)), static_cast<long>(grads.size()));
  r.lr = learning_rate(cfg_.optimizer, step, cfg_.training.train_iters);
  adamw_.step(model_.params(), grads, r.lr, step + 1);
  return r;
}

double Trainer::evaluate() {
  const int m = plan_.num_micro_batches, mb = plan_.micro_batch, dp_rank = ps_.coords().dp;
  double loss_sum = 0.0;
  for (int it = 0; it < cfg_.training.eval_iters; ++it)
    for (int j = 0; j < m; ++j) {
      load_micro_batch(*val_data_, "val", static_cast<std::uint64_t>(it), static_cast<std::uint64_t>(dp_rank * m + j) * mb);
      loss_sum += model_.forward(0);
    }
  const double tokens = static_cast<double>(cfg_.training.eval_iters) * cfg_.model.global_batch_size * cfg_.model.seq_length;
  return sum_over(ps_.dp().comm(), loss_sum) / tokens;
}

}  // namespace dtrain
