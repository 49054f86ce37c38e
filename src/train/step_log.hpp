// What a user watches during training: the rank-0 step line, the JSON-lines metrics file and TensorBoard.
#pragma once
#include <cstdio>
#include <vector>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.hpp"
#include "train/tensorboard.hpp"

namespace dtrain {

struct StepRecord {
  int step = 0;            // 1-based, as shown
  int total_steps = 0;
  double loss = 0.0, lr = 0.0, grad_norm = 0.0;
  double tokens_per_s = 0.0, mfu = 0.0, step_seconds = 0.0;
  double elapsed_s = 0.0, eta_s = 0.0;
  double bubble = 0.0, predicted_bubble = 0.0;  // pipeline idle fraction: measured, from the formula
  bool pipelined = false;
  std::optional<double> all_to_all_s;  // expert parallelism: seconds per step in the token all-to-alls (mean over ranks)
  std::optional<double> val_loss;
  // Measured memory, the largest over ranks (bytes): peak resident memory of the process, and the
  // device's peak allocation (0 on the host).
  double peak_rss = 0.0, device_peak = 0.0;
  int peak_rss_rank = 0;
  // Checkpoints at the step boundaries since the last line: how long training stalled for them
  // (whole saves, or snapshots and waits of asynchronous saves), and how long whole saves took.
  std::optional<double> save_stall_s, sync_save_s;
  // MoE models: the load-balancing loss (mean per step over the interval) and the token-per-expert
  // imbalance (max / mean of the interval's tokens per expert, before dropping, the worst MoE layer).
  std::optional<double> moe_aux, moe_imbalance;
  // fp16 runs: the loss scale after the step (what the next step uses) and the optimizer updates the
  // interval skipped for overflowing gradients.
  std::optional<double> loss_scale;
  int skipped = 0;
};

// The MoE statistics of one log interval.
class MoeWindow {
 public:
  void add(double aux, const std::vector<double>& tokens /*(layers, E)*/);
  // Into r's MoE fields (left unset without MoE), then starts a new interval.
  void take(StepRecord& r, int experts);

 private:
  double aux_ = 0.0;
  int steps_ = 0;
  std::vector<double> tokens_;
};

// Collective: every rank's peak resident memory (and its device's peak allocation, device_peak) into
// r's memory fields.
void gather_memory_peaks(Communicator& world, std::size_t device_peak, StepRecord& r);

class StepLog {
 public:
  // Active on world rank 0 only; opens (appends to) the metrics file when a path is given, and a new
  // TensorBoard event file in tensorboard_dir when one is given. A metrics line or an event that cannot
  // be written is a warning, once; training goes on.
  StepLog(bool active, const std::string& metrics_path, const std::string& tensorboard_dir);
  void step_line(const StepRecord& r);
  void metrics(const StepRecord& r);
  void message(const std::string& text);
  // Every rank's busy (non-communication) time per step over the last interval: min / median / max
  // and the slowest rank. Collective; printed by rank 0.
  void stragglers(Communicator& world, double busy_seconds_per_step, const std::vector<std::string>& node_of_rank);

 private:
  bool active_;
  std::string metrics_path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics_{nullptr, &std::fclose};
  bool metrics_failed_ = false;  // warned once already
  std::unique_ptr<TensorBoardFile> tensorboard_;  // null: none, or given up after a failed write
};

std::string format_duration(double seconds);

}  // namespace dtrain
