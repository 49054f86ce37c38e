// run_training: set-up, resume, the step loop with logging, validation, stops and saves; then the
// final weights and a text sample (after_training).
#include "train/training_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "comm/parallel_state.hpp"
#include "common/error.hpp"
#include "launch/compute_budget.hpp"
#include "plan/model_flops.hpp"
#include "plan/p2p_traffic.hpp"
#include "runtime/machine.hpp"
#include "runtime/stop_signal.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/after_training.hpp"
#include "train/checkpointing.hpp"
#include "train/log_window.hpp"
#include "train/step_log.hpp"
#include "train/trainer.hpp"

namespace dtrain {

int run_training(HostComm world, const Config& cfg, const TrainingPlan& plan, const LaunchEnv& env, const Placement& placement,
                 const std::string& config_text, StartupStop& startup) {
  const kernels::Backend backend = placement.backend;
  const RankLayout layout(plan.sizes, cfg.system.rank_order);
  Watchdog watchdog(env.world_rank, cfg.system.collective_timeout_s, cfg.system.step_timeout_s, env.node_name);
  Trace trace(env.world_rank, cfg.logging.trace_file, [world] { barrier(world); });
  CommOptions comm;
  comm.synchronous_sends = cfg.debug.synchronous_sends;
  comm.device = &device_for(backend);
  comm.nccl = placement.nccl;
  comm.nccl_pipeline = nccl_pipeline_safe(plan.schedule, plan.sizes.pp, plan.num_micro_batches, plan.sizes.v);
  const ParallelState ps(world, layout, comm, &watchdog, &trace);
  // The peak MFU divides by: given (logging.mfu_peak_tflops, per node or GPU), or measured; a GPU run
  // measures its GPUs, not the CPUs.
  const bool cuda = backend == kernels::Backend::cuda;
  const double given_gflops = cfg.logging.mfu_peak_tflops * 1e3;
  ComputeBudget compute = measure_compute(world, env.node, cfg.system.threads_per_rank, cuda ? -1.0 : given_gflops, &watchdog);
  char peak_source[160];
  if (given_gflops > 0)
    std::snprintf(peak_source, sizeof peak_source, "logging.mfu_peak_tflops=%g for each %s", cfg.logging.mfu_peak_tflops, cuda ? "GPU" : "node");
  else
    std::snprintf(peak_source, sizeof peak_source, "sgemm on all %d core(s) of each node", compute.node_cores);
  if (cuda) {
    int gpus = 0;
    compute.job_peak_gflops = measure_gpu_peak(world, env.node, placement.gpu, cfg.system.precision, given_gflops, &watchdog, gpus);
    if (given_gflops <= 0)
      std::snprintf(peak_source, sizeof peak_source, "%s cuBLAS GEMM on each of %d GPU(s)", to_string(cfg.system.precision), gpus);
  }

  const bool rank0 = env.world_rank == 0;
  // The run's tokenizer, loaded once, by rank 0 (its files parsed, its vocabulary against
  // model.vocab_size); every rank gets its identity, which the token files, checkpoints and weights
  // carry. Rank 0 keeps it for the sample at the end.
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_id;
  int eod = -1;  // its end-of-document token, which ends the documents packed in samples (-1: none)
  collective_check(world, [&] {
    if (!rank0) return;
    tokenizer = make_tokenizer(cfg.data.tokenizer);
    check_vocab_fits(*tokenizer, cfg.model.vocab_size, "the run");
    tokenizer_id = tokenizer->identity();
    if (const auto id = tokenizer->eod()) eod = static_cast<int>(*id);
  });
  broadcast_string(world, tokenizer_id);
  broadcast(world, &eod, 1, 0);
  double before_model = static_cast<double>(resident_bytes());
  ps.world().all_reduce(&before_model, 1, DType::f64, ReduceOp::max, {"largest resident memory before the model"});
  Trainer trainer(cfg, plan, ps, backend, tokenizer_id, eod >= 0 ? std::optional<int>(eod) : std::nullopt);
  trainer.set_optimizer_threads(compute.threads);
  StepLog log(rank0, cfg.logging.metrics_file, cfg.logging.tensorboard_dir);
  const double flops_per_token = model_flops_per_token(cfg);
  const double tokens_per_step = static_cast<double>(cfg.model.global_batch_size) * cfg.model.seq_length;
  char head[512];
  std::snprintf(head, sizeof head,
                "dtrain: %d ranks (%s) on %d node(s), %s, %s, %zu parameters on rank 0, %d micro-batches of %d x %d tokens, "
                "%d BLAS thread(s)/rank, peak %.1f GFLOP/s (%s), %.3f GFLOP/token",
                env.world_size, to_string(plan.sizes, ' ').c_str(), env.num_nodes, placement.description.c_str(),
                to_string(cfg.system.precision), trainer.model().table().total(), plan.num_micro_batches, plan.micro_batch,
                cfg.model.seq_length, compute.threads, compute.job_peak_gflops, peak_source, flops_per_token / 1e9);
  log.message(head);
  char memory[256];
  std::snprintf(memory, sizeof memory,
                "memory per rank: the plan predicts %.1f MiB (largest stage; --dry-run shows the terms), on top of %.1f MiB "
                "resident before the model was built (largest rank)",
                static_cast<double>(plan.peak_memory()) / (1024.0 * 1024.0), before_model / (1024.0 * 1024.0));
  log.message(memory);
  if (!compute.warning.empty()) log.message("warning: " + compute.warning);
  if (const std::string samples = trainer.sample_description(); !samples.empty())
    log.message("data: the samples carry " + samples + "; the loss is the mean over the global batch's counted targets");
  for (const auto& w : plan.warnings) log.message("warning: " + w);
  if (comm.nccl && !comm.nccl_pipeline)
    log.message("note: the pipeline's messages go through MPI (staged through pinned memory): NCCL cannot run this "
                "interleaved schedule without deadlock (m >= 2p); tensor- and data-parallel traffic stays on NCCL");
  Checkpointing checkpoints(world, cfg, plan, config_text, tokenizer_id, log);
  const int first_step = checkpoints.resume(trainer);
  checkpoints.prepare(trainer);
  if (first_step >= cfg.training.train_iters)
    log.message("training is already complete (step " + std::to_string(first_step) + " of " +
                std::to_string(cfg.training.train_iters) + "); raise training.train_iters to go on, or set checkpoint.load=none");

  // A stop signal received during start-up (handlers are installed first thing in main): nothing has
  // been trained since the last checkpoint, so there is nothing to save.
  const int sig = all_reduce(world, received_stop_signal(), HostOp::max);
  startup.done();  // from here on a stop signal is agreed on at the step boundaries
  if (sig) {
    log.message(std::string("dtrain: received ") + signal_name(sig) + " before the first step; nothing to save" +
                (first_step > 0 ? " (step " + std::to_string(first_step) + " is already checkpointed)" : std::string()) +
                "; exiting with code " + std::to_string(kPreemptedExit) + " so the job can be requeued");
    return kPreemptedExit;
  }
  // How long a (re)start took to reach its first step, and how much of it was loading: the cost of a
  // restart besides the steps redone since the checkpoint.
  const double launch_s = all_reduce(world, seconds_since_process_start(), HostOp::max);
  const double load_s = all_reduce(world, checkpoints.last_load_seconds(), HostOp::max);
  char ready[160];
  int n = std::snprintf(ready, sizeof ready, "start-up: %.2f s from launch to the first step (slowest rank)", launch_s);
  if (load_s > 0) std::snprintf(ready + n, sizeof ready - n, ", of which %.2f s loading the checkpoint", load_s);
  log.message(ready);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  LogWindow window;
  const std::vector<std::string> node_of_rank = gather_node_names(world, env);
  const int total = cfg.training.train_iters;
  int rollbacks = 0;
  for (int step = first_step; step < total; ++step) {
    const auto t0 = clock::now();
    watchdog.take_comm_seconds();  // communication outside the step (evaluation, saves) is not the step's
    watchdog.step_begin(step);
    const bool last = step + 1 == total;
    const bool eval_now = cfg.training.eval_interval > 0 && ((step + 1) % cfg.training.eval_interval == 0 || last);
    StepResult r;
    std::vector<StepLoss> read;  // the steps read back here: at a log line, a validation, a save or a stop
    int sig = 0;
    try {
      r = trainer.train_step(step);
      if (const std::string note = trainer.take_schedule_message(); !note.empty()) log.message(note);
      // Preemption: every rank learns here whether any rank was signalled, so all stop at the same step.
      sig = all_reduce(world, received_stop_signal(), HostOp::max);
      // The steps' losses and norms come back (one wait for the device) where the host needs them: for a
      // step line, before a validation, and before a save, which must not publish a step whose loss or
      // norm is not finite (settle throws for it, naming it).
      if ((step + 1) % cfg.logging.log_interval == 0 || last || eval_now || sig || checkpoints.due(step + 1, last, eval_now))
        read = trainer.settle();
    } catch (const NonFiniteStep& e) {
      // Every rank threw it at the same point: all stop, or all roll back together.
      watchdog.step_end();
      if (cfg.training.on_nonfinite != OnNonFinite::rollback) throw;
      if (rollbacks == cfg.training.max_rollbacks)
        throw NonFiniteStep(e.step, std::string(e.what()) + " (training.max_rollbacks=" + std::to_string(cfg.training.max_rollbacks) +
                                        " rollbacks already made)");
      ++rollbacks;
      log.message("dtrain: " + std::string(e.what()).substr(0, std::string(e.what()).find(';')) + "; rolling back (" +
                  std::to_string(rollbacks) + " of training.max_rollbacks=" + std::to_string(cfg.training.max_rollbacks) +
                  "): step " + std::to_string(e.step) + "'s batch (its " + std::to_string(cfg.model.global_batch_size) +
                  " samples, chosen by training.seed=" + std::to_string(cfg.training.seed) + " and the step) is skipped from now on");
      step = checkpoints.rollback(trainer, e.step) - 1;
      continue;
    }
    watchdog.step_end();
    if (r.batch_skipped && (step + 1) % cfg.logging.log_interval == 0)
      log.message("step " + std::to_string(step + 1) + "/" + std::to_string(total) +
                  " | batch skipped (training.iterations_to_skip or a rollback): no update");
    const double step_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const double busy_seconds = step_seconds - watchdog.take_comm_seconds();
    StepRecord rec;
    rec.step = step + 1;
    rec.total_steps = total;
    if (eval_now) {
      rec.val_loss = trainer.evaluate();
      if (!std::isfinite(*rec.val_loss))  // the same value on every rank: all stop here
        throw NonFiniteStep(step + 1, "step " + std::to_string(step + 1) + ": the validation loss is " + std::to_string(*rec.val_loss) +
                                          "; training stops (the last checkpoint, if any, is untouched)");
    }
    checkpoints.poll();  // a background save is published once every rank's write has finished
    // Early stopping: a validation that is not a new best counts against training.early_stop_patience.
    // The record is the trainer's, so checkpoints carry it through a resume or a rollback.
    bool early_stop = false;
    Trainer::Validations& val = trainer.validations();
    if (rec.val_loss) {
      if (!val.best || *rec.val_loss < *val.best) {
        val.best = rec.val_loss, val.best_step = step + 1, val.stale = 0;
      } else if (cfg.training.early_stop_patience > 0 && ++val.stale >= cfg.training.early_stop_patience) {
        early_stop = true;
      }
    }
    // A skipped batch ran nothing: it stays out of the interval's averages and has no step line.
    if (!r.batch_skipped) window.add(step_seconds, busy_seconds, r, checkpoints.take_times());
    const bool log_now = !r.batch_skipped && ((step + 1) % cfg.logging.log_interval == 0 || last || rec.val_loss);
    if (log_now) {
      if (read.empty() || read.back().step != step) fatal("internal error: step " + std::to_string(step + 1) + " logged without its loss");
      rec.loss = read.back().loss;
      rec.lr = r.lr;
      rec.grad_norm = read.back().grad_norm;
      rec.pipelined = plan.sizes.pp > 1;
      rec.predicted_bubble = trainer.predicted_bubble();
      const double busy = window.busy_seconds();
      window.take(rec, cfg.model.num_experts, plan.sizes.ep > 1);
      rec.tokens_per_s = tokens_per_step / rec.step_seconds;
      rec.mfu = rec.tokens_per_s * flops_per_token / (compute.job_peak_gflops * 1e9);
      rec.elapsed_s = std::chrono::duration<double>(clock::now() - start).count();
      rec.eta_s = rec.elapsed_s / (step + 1 - first_step) * (total - step - 1);
      const Device& device = trainer.model().device();
      gather_memory_peaks(ps.world(), device.is_host() ? 0 : device.peak_bytes(), rec);  // a GPU's, in the step line
      log.step_line(rec);
      if (rec.val_loss) log.message("step " + std::to_string(step + 1) + "/" + std::to_string(total) + " | val loss " + std::to_string(*rec.val_loss));
      log.metrics(rec);
      log.stragglers(ps.world(), busy, node_of_rank);
    }
    // The step's line and metrics come before its save: a published checkpoint is never the resume point
    // of a step whose metrics line is missing (the publication needs every rank, and a job whose ranks are
    // lost right after it could not write the line). A save's time is on the next line (its window).
    // A stop or the end of training waits for its save (and for one still in flight) before going on.
    if (sig && !cfg.checkpoint.dir.empty())
      checkpoints.save(trainer, step + 1, /*wait=*/true, rec.val_loss);
    else if (!sig && checkpoints.due(step + 1, last || early_stop, rec.val_loss.has_value()))
      checkpoints.save(trainer, step + 1, /*wait=*/last || early_stop, rec.val_loss);
    if (sig) {
      log.message(std::string("dtrain: received ") + signal_name(sig) + " - " +
                  (cfg.checkpoint.dir.empty() ? "no checkpoint.dir set, so nothing was saved"
                                              : "saved step " + std::to_string(step + 1)) +
                  "; exiting with code " + std::to_string(kPreemptedExit) + " so the job can be requeued and resume");
      return kPreemptedExit;
    }
    if (early_stop) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "dtrain: early stop after step %d: %d validation(s) without a lower loss than %.6g at step %d "
                    "(training.early_stop_patience); the final weights are that step's",
                    step + 1, val.stale, *val.best, val.best_step);
      log.message(line);
      checkpoints.load_best(trainer, val.best_step);
      break;
    }
  }
  // Nothing may be in flight when the final weights are written (HDF5 has one user), and they need the
  // snapshot's memory.
  checkpoints.finish_and_release();

  write_final_weights(world, ps, cfg, trainer, log, tokenizer_id, config_text);
  log_text_sample(ps, cfg, plan, trainer, log, tokenizer.get(), backend);
  return 0;
}

}  // namespace dtrain
