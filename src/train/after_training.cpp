// write_final_weights and log_text_sample: what a run does once its steps are done.
#include "train/after_training.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "ckpt/weights_file.hpp"
#include "comm/collective_check.hpp"
#include "model/generate.hpp"
#include "runtime/machine.hpp"

namespace dtrain {

void write_final_weights(HostComm world, const ParallelState& ps, const Config& cfg, Trainer& trainer, StepLog& log,
                         const std::string& tokenizer_id, const std::string& config_text) {
  const bool rank0 = ps.world_rank() == 0;
  const std::size_t trained_peak = peak_resident_bytes();
  const std::string weights = cfg.checkpoint.dir.empty() ? "" : cfg.checkpoint.dir + "/model-final.h5";
  if (!weights.empty()) {
    std::unique_ptr<WeightsWriter> out;
    collective_check(world, [&] {
      if (!rank0) return;
      std::error_code ec;
      std::filesystem::create_directories(cfg.checkpoint.dir, ec);
      out = std::make_unique<WeightsWriter>(weights, WeightsMeta{tokenizer_id, config_text});
    });
    trainer.gather_full_model([&](const TensorSpec& t, std::size_t begin, std::size_t count, const float* values) {
      out->write(t.name, t.global_shape, begin, count, values);
    });
    collective_check(world, [&] {
      if (rank0) out->finish();
    });
    log.message("wrote final weights to " + weights + " (dtrain generate INPUT.ini --weights " + weights + ")");
    // Each rank's peak resident memory through the last step against after the final weights (VmHWM).
    double peaks[2] = {static_cast<double>(trained_peak), static_cast<double>(peak_resident_bytes()) - trained_peak};
    ps.world().all_reduce(peaks, 2, DType::f64, ReduceOp::max, {"allreduce (memory report)"});
    char memory[200];
    std::snprintf(memory, sizeof memory,
                  "memory: peak resident %.1f MB through the last step and its save (largest rank); the final weights raised no "
                  "rank's peak by more than %.3f MB",
                  peaks[0] / 1e6, std::max(0.0, peaks[1]) / 1e6);
    log.message(memory);
  }

}

void log_text_sample(const ParallelState& ps, const Config& cfg, const TrainingPlan& plan, Trainer& trainer, StepLog& log,
                     Tokenizer* tokenizer, kernels::Backend backend) {
  const bool rank0 = ps.world_rank() == 0;
  if (cfg.logging.sample_tokens == 0) return;
  const RankPlan whole = whole_model_plan(cfg, 1);
  MemoryEstimate sampling = whole.memory();
  sampling.optimizer = 0;
  const double needed = static_cast<double>(sampling.total()) + 4.0 * static_cast<double>(whole.arena_size);  // + fp32 values
  const double beside = plan.limit.bytes - static_cast<double>(plan.stage_memory.front().total());
  if (plan.limit.bytes > 0 && needed > beside) {
    char why[400];
    std::snprintf(why, sizeof why,
                  "sample: skipped: the whole model needs %.3f GB on rank 0 to generate with, beside its %.3f GB of training "
                  "state, more than the %.3f GB a rank may use (%s)",
                  needed / 1e9, static_cast<double>(plan.stage_memory.front().total()) / 1e9, plan.limit.bytes / 1e9,
                  plan.limit.source.c_str());
    log.message(why);
    return;
  }
  std::vector<float> values(rank0 ? whole.arena_size : 0);
  trainer.gather_full_model(rank0 ? values.data() : nullptr);
  if (rank0) {
    const std::unique_ptr<GptModel> copy = make_gpt_model(whole, nullptr, backend);
    copy->set_parameters(values.data());
    std::vector<float>().swap(values);
    SamplingOptions sampling;
    sampling.temperature = 0.8, sampling.seed = cfg.training.seed;
    const std::vector<std::uint32_t> sample =
        generate(*copy, {tokenizer->encode("\n")}, tokenizer->vocab_size(), cfg.logging.sample_tokens, sampling).front();
    log.message("sample: " + tokenizer->decode(sample));
  }
}

}  // namespace dtrain
