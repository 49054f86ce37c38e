// validate_config: sizes, divisibility, enumerations and unsupported features, each with its fix.
#include "config/validate.hpp"

#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/rank_layout.hpp"

namespace dtrain {
namespace {

std::string s(long v) { return std::to_string(v); }

// Divisors of n, for suggestions.
std::string divisors(long n) {
  std::string out;
  for (long d = 1; d <= n; ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + s(d);
  return out;
}

}  // namespace

void validate_config(const Config& c, int world) {
  std::vector<std::string> errs;
  auto positive = [&](const char* key, long v) {
    if (v < 1) errs.push_back(std::string(key) + "=" + s(v) + " must be at least 1");
  };
  const auto& m = c.model;
  const auto& y = c.system;
  positive("model.num_layers", m.num_layers);
  positive("model.hidden_size", m.hidden_size);
  positive("model.num_attention_heads", m.num_attention_heads);
  positive("model.seq_length", m.seq_length);
  positive("model.vocab_size", m.vocab_size);
  positive("model.global_batch_size", m.global_batch_size);
  positive("system.tensor_model_parallel_size", y.tensor_model_parallel_size);
  positive("system.pipeline_model_parallel_size", y.pipeline_model_parallel_size);
  positive("system.virtual_pipeline_model_parallel_size", y.virtual_pipeline_model_parallel_size);
  positive("system.context_parallel_size", y.context_parallel_size);
  positive("logging.log_interval", c.logging.log_interval);
  if (m.ffn_hidden_size < 0) errs.push_back("model.ffn_hidden_size=" + s(m.ffn_hidden_size) + " must be >= 0 (0 = 4 * hidden_size)");
  if (c.training.train_iters < 0) errs.push_back("training.train_iters=" + s(c.training.train_iters) + " must be >= 0");
  if (c.training.eval_interval < 0) errs.push_back("training.eval_interval must be >= 0 (0 = no validation)");
  if (c.training.eval_iters < 1) errs.push_back("training.eval_iters must be at least 1");
  if (!errs.empty()) {
    std::string all;
    for (const auto& e : errs) all += (all.empty() ? "" : "\n") + e;
    throw UserError(all);
  }

  const int tp = y.tensor_model_parallel_size, pp = y.pipeline_model_parallel_size;
  const int cp = y.context_parallel_size, v = y.virtual_pipeline_model_parallel_size;
  if (y.device != "cpu" && y.device != "cuda") errs.push_back("system.device='" + y.device + "' must be cpu or cuda");
  if (cp != 1) errs.push_back("system.context_parallel_size=" + s(cp) + ": context parallelism is not supported yet; set it to 1");
  if (y.expert_model_parallel_size != 1)
    errs.push_back("system.expert_model_parallel_size=" + s(y.expert_model_parallel_size) + ": expert parallelism is not supported yet; set it to 1");
  if (m.num_experts > 1) errs.push_back("model.num_experts=" + s(m.num_experts) + ": mixture-of-experts is not supported yet; set it to 0");
  if (world % (tp * cp * pp) != 0)
    errs.push_back("system.tensor_model_parallel_size=" + s(tp) + " x system.pipeline_model_parallel_size=" + s(pp) +
                   " x system.context_parallel_size=" + s(cp) + " = " + s(tp * cp * pp) + " does not divide the " + s(world) +
                   " ranks of this job; choose sizes whose product is one of: " + divisors(world));
  if (m.num_attention_heads % tp != 0)
    errs.push_back("model.num_attention_heads=" + s(m.num_attention_heads) + " is not divisible by system.tensor_model_parallel_size=" +
                   s(tp) + "; use a tp among: " + divisors(m.num_attention_heads));
  if (m.hidden_size % m.num_attention_heads != 0)
    errs.push_back("model.hidden_size=" + s(m.hidden_size) + " is not divisible by model.num_attention_heads=" +
                   s(m.num_attention_heads) + "; use a head count among: " + divisors(m.hidden_size));
  if (m.vocab_size % tp != 0)
    errs.push_back("model.vocab_size=" + s(m.vocab_size) + " is not divisible by system.tensor_model_parallel_size=" + s(tp) +
                   "; pad the vocabulary to a multiple of " + s(tp) + " (e.g. " + s((m.vocab_size + tp - 1) / tp * tp) + ")");
  if (c.ffn_hidden() % tp != 0)
    errs.push_back("model.ffn_hidden_size=" + s(c.ffn_hidden()) + " is not divisible by system.tensor_model_parallel_size=" + s(tp));
  if (m.num_layers % (pp * v) != 0)
    errs.push_back("model.num_layers=" + s(m.num_layers) + " is not divisible by system.pipeline_model_parallel_size=" + s(pp) +
                   (v > 1 ? " x system.virtual_pipeline_model_parallel_size=" + s(v) : std::string()) +
                   "; use num_layers a multiple of " + s(pp * v) + " or pp" + (v > 1 ? "*v" : "") + " among: " + divisors(m.num_layers));
  if (y.sequence_parallel && m.seq_length % tp != 0)
    errs.push_back("system.sequence_parallel needs model.seq_length=" + s(m.seq_length) + " divisible by tensor_model_parallel_size=" + s(tp));
  const auto& sched = y.pipeline_schedule;
  if (sched != "1f1b" && sched != "interleaved" && sched != "afab")
    errs.push_back("system.pipeline_schedule='" + sched + "' must be 1f1b, interleaved or afab");
  else if (sched == "interleaved" && v < 2)
    errs.push_back("system.pipeline_schedule=interleaved needs system.virtual_pipeline_model_parallel_size >= 2");
  else if (sched != "interleaved" && v > 1)
    errs.push_back("system.virtual_pipeline_model_parallel_size=" + s(v) + " needs system.pipeline_schedule=interleaved");
  if (y.max_bubble_fraction <= 0 || y.max_bubble_fraction >= 1)
    errs.push_back("system.max_bubble_fraction must be between 0 and 1 (exclusive)");
  if (y.memory_budget_gb < 0) errs.push_back("system.memory_budget_gb must be >= 0 (0 = no limit)");
  if (y.threads_per_rank < 0) errs.push_back("system.threads_per_rank must be >= 0 (0 = automatic)");
  try {
    RankLayout(ParallelSizes{}, y.rank_order);
  } catch (const UserError& e) {
    errs.push_back(e.what());
  }
  if (c.data.tokenizer != "byte") errs.push_back("data.tokenizer='" + c.data.tokenizer + "': only 'byte' is supported");
  if (m.micro_batch_size != "auto") {
    std::size_t used = 0;
    long mb = -1;
    try {
      mb = std::stol(m.micro_batch_size, &used);
    } catch (...) {
    }
    if (used != m.micro_batch_size.size() || mb < 1) {
      errs.push_back("model.micro_batch_size='" + m.micro_batch_size + "' must be a positive integer or auto");
    } else if (world % (tp * cp * pp) == 0) {
      const long dp = world / (tp * cp * pp);
      if (m.global_batch_size % (mb * dp) != 0)
        errs.push_back("model.global_batch_size=" + s(m.global_batch_size) + " is not divisible by model.micro_batch_size=" + s(mb) +
                       " x data-parallel size " + s(dp) + " = " + s(mb * dp) + "; use a global batch that is a multiple of " +
                       s(mb * dp) + " (e.g. " + s((m.global_batch_size + mb * dp - 1) / (mb * dp) * (mb * dp)) +
                       ") or micro_batch_size=auto");
    }
  }
  if (!errs.empty()) {
    std::string all;
    for (const auto& e : errs) all += (all.empty() ? "" : "\n") + e;
    throw UserError(all);
  }
}

}  // namespace dtrain
