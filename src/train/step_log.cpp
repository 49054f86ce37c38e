// StepLog: fixed-format step lines, one JSON object per logged step, and the same values as TensorBoard scalars.
#include "train/step_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "common/error.hpp"
#include "runtime/machine.hpp"

namespace dtrain {
namespace {

// 1.23 GiB, or 456.7 MiB below a GiB.
std::string format_bytes(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  char buf[32];
  if (bytes >= 1024.0 * kMiB)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * kMiB));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / kMiB);
  return buf;
}

}  // namespace

std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

StepLog::StepLog(bool active, const std::string& path, const std::string& tensorboard_dir) : active_(active), metrics_path_(path) {
  if (!active_) return;
  if (!tensorboard_dir.empty()) {
    try {
      tensorboard_ = std::make_unique<TensorBoardFile>(tensorboard_dir);
      message("TensorBoard: events go to " + tensorboard_->path() + " (tensorboard --logdir " + tensorboard_dir + ")");
    } catch (const UserError& e) {
      message(std::string("warning: ") + e.what() + "; no TensorBoard events will be written");  // rank 0 alone: not an error
    }
  }
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  metrics_.reset(std::fopen(path.c_str(), "a"));
  if (!metrics_) {
    metrics_failed_ = true;  // only rank 0 opens it: a warning, not an error that one rank alone would raise
    message("warning: cannot open logging.metrics_file '" + path + "' for appending (" + std::strerror(errno) +
            "); no metrics lines will be written (the step lines still show them)");
  }
}

void MoeWindow::add(double aux, const std::vector<double>& tokens) {
  if (tokens.empty()) return;
  tokens_.resize(tokens.size(), 0.0);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens_[i] += tokens[i];
  aux_ += aux;
  ++steps_;
}

void MoeWindow::take(StepRecord& r, int experts) {
  if (steps_ == 0 || experts < 1) return;
  double worst = 0.0;
  for (std::size_t l = 0; l + static_cast<std::size_t>(experts) <= tokens_.size(); l += static_cast<std::size_t>(experts)) {
    const auto first = tokens_.begin() + static_cast<long>(l), last = first + experts;
    const double sum = std::accumulate(first, last, 0.0);
    if (sum > 0) worst = std::max(worst, *std::max_element(first, last) / (sum / experts));
  }
  r.moe_aux = aux_ / steps_;
  r.moe_imbalance = worst;
  aux_ = 0.0;
  steps_ = 0;
  std::fill(tokens_.begin(), tokens_.end(), 0.0);
}

void StepLog::step_line(const StepRecord& r) {
  if (!active_) return;
  char moe[96] = "";
  if (r.moe_aux) std::snprintf(moe, sizeof moe, " | aux %.4g | experts max/mean %.2f", *r.moe_aux, *r.moe_imbalance);
  char bubble[96] = "";
  if (r.pipelined)
    std::snprintf(bubble, sizeof bubble, " | bubble %.1f%% (predicted %.1f%%)", 100.0 * r.bubble, 100.0 * r.predicted_bubble);
  if (r.all_to_all_s)
    std::snprintf(bubble + std::strlen(bubble), sizeof bubble - std::strlen(bubble), " | all-to-all %.1f%%",
                  100.0 * *r.all_to_all_s / r.step_seconds);
  char save[64] = "";
  if (r.sync_save_s)
    std::snprintf(save, sizeof save, " | ckpt save %.3f s", *r.sync_save_s);
  else if (r.save_stall_s)
    std::snprintf(save, sizeof save, " | ckpt stall %.3f s", *r.save_stall_s);
  char scale[64] = "";
  if (r.loss_scale) {
    const int k = std::snprintf(scale, sizeof scale, " | loss scale %.6g", *r.loss_scale);
    if (r.skipped > 0) std::snprintf(scale + k, sizeof scale - k, " | skipped %d (overflow)", r.skipped);
  }
  char memory[96];
  const int n = std::snprintf(memory, sizeof memory, " | peak mem %s (rank %d)", format_bytes(r.peak_rss).c_str(), r.peak_rss_rank);
  if (r.device_peak > 0) std::snprintf(memory + n, sizeof memory - n, ", GPU %s", format_bytes(r.device_peak).c_str());
  std::printf("step %*d/%d | loss %.4f%s | lr %.3e | grad norm %.3f%s | %.0f tok/s | MFU %.1f%%%s | %.3f s/step%s%s | elapsed %s | ETA %s\n",
              static_cast<int>(std::to_string(r.total_steps).size()), r.step, r.total_steps, r.loss, moe, r.lr, r.grad_norm, scale,
              r.tokens_per_s, 100.0 * r.mfu, bubble, r.step_seconds, save, memory, format_duration(r.elapsed_s).c_str(),
              format_duration(r.eta_s).c_str());
  std::fflush(stdout);
}

namespace {

// The metrics of a step after its number, in the metrics file's order, each as the file writes it:
// full precision for what a program may compare (losses, learning rate, gradient norm), fewer digits
// for rates, times and sizes. A value that is not finite (the gradient norm of a step skipped for an
// fp16 overflow) is JSON's null, and TensorBoard gets no scalar for it.
std::vector<std::pair<const char*, std::string>> metric_fields(const StepRecord& r) {
  std::vector<std::pair<const char*, std::string>> out;
  const auto add = [&](const char* name, const char* format, double v) {
    char buf[40] = "null";
    if (std::isfinite(v)) std::snprintf(buf, sizeof buf, format, v);
    out.emplace_back(name, buf);
  };
  add("loss", "%.17g", r.loss);
  add("lr", "%.17g", r.lr);
  add("grad_norm", "%.17g", r.grad_norm);
  add("tokens_per_s", "%.1f", r.tokens_per_s);
  add("mfu", "%.5f", r.mfu);
  add("step_s", "%.5f", r.step_seconds);
  add("elapsed_s", "%.2f", r.elapsed_s);
  if (r.val_loss) add("val_loss", "%.17g", *r.val_loss);
  if (r.moe_aux) add("moe_aux_loss", "%.17g", *r.moe_aux), add("moe_imbalance", "%.6f", *r.moe_imbalance);
  if (r.loss_scale) add("loss_scale", "%.17g", *r.loss_scale), add("skipped", "%.0f", r.skipped);
  if (r.pipelined) add("bubble", "%.5f", r.bubble), add("predicted_bubble", "%.5f", r.predicted_bubble);
  if (r.all_to_all_s) add("all_to_all_s", "%.6f", *r.all_to_all_s);
  if (r.save_stall_s) add("ckpt_stall_s", "%.6f", *r.save_stall_s);
  if (r.sync_save_s) add("ckpt_save_s", "%.6f", *r.sync_save_s);
  add("peak_rss_bytes", "%.0f", r.peak_rss);
  add("peak_rss_rank", "%.0f", r.peak_rss_rank);
  add("device_peak_bytes", "%.0f", r.device_peak);
  return out;
}

}  // namespace

void StepLog::metrics(const StepRecord& r) {
  if (!active_ || (!metrics_ && !tensorboard_)) return;
  const auto fields = metric_fields(r);
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> scalars;
    for (const auto& [name, text] : fields)
      if (text != "null") scalars.emplace_back(name, std::strtod(text.c_str(), nullptr));
    try {
      tensorboard_->scalars(r.step, scalars);
    } catch (const UserError& e) {
      tensorboard_.reset();  // training goes on; the user hears about it once
      message(std::string("warning: ") + e.what() + "; TensorBoard gets no more events from step " + std::to_string(r.step) +
              " on (the step lines and the metrics file still have them)");
    }
  }
  if (!metrics_) return;
  std::string line = "{\"step\": " + std::to_string(r.step);
  for (const auto& [name, text] : fields) line += std::string(", \"") + name + "\": " + text;
  line += "}\n";
  const bool written = std::fputs(line.c_str(), metrics_.get()) >= 0 && std::fflush(metrics_.get()) == 0 && !std::ferror(metrics_.get());
  if (!written && !metrics_failed_) {
    metrics_failed_ = true;  // training goes on; the user hears about it once
    message("warning: cannot write the metrics file '" + metrics_path_ + "' (" + std::strerror(errno) +
            "); metrics lines from step " + std::to_string(r.step) + " on are lost (the step lines still show them)");
  }
}

void gather_memory_peaks(Communicator& world, std::size_t device_peak, StepRecord& r) {
  const double mine[2] = {static_cast<double>(peak_resident_bytes()), static_cast<double>(device_peak)};
  std::vector<double> all(2 * static_cast<std::size_t>(world.size()));
  world.all_gather(mine, all.data(), 2, DType::f64, {"gather peak memory (step line)"});
  r.peak_rss = r.device_peak = 0.0;
  for (int rank = 0; rank < world.size(); ++rank) {
    if (all[2 * rank] > r.peak_rss) r.peak_rss = all[2 * rank], r.peak_rss_rank = rank;
    r.device_peak = std::max(r.device_peak, all[2 * rank + 1]);
  }
}

void StepLog::stragglers(Communicator& world, double busy, const std::vector<std::string>& node_of_rank) {
  const int size = world.size();
  std::vector<double> all(static_cast<std::size_t>(size));
  world.all_gather(&busy, all.data(), 1, DType::f64, {"gather busy times (straggler report)"});
  if (!active_ || size == 1) return;
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  const int slowest = static_cast<int>(std::max_element(all.begin(), all.end()) - all.begin());
  char buf[256];
  std::snprintf(buf, sizeof buf, "  busy time per step across %d ranks: min %.3f / median %.3f / max %.3f s; slowest rank %d (%s)",
                size, sorted.front(), sorted[sorted.size() / 2], sorted.back(), slowest, node_of_rank[slowest].c_str());
  message(buf);
}

void StepLog::message(const std::string& text) {
  if (!active_) return;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace dtrain
