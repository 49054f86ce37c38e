// check_layout: sizes against the world and against each other, and training.freeze against the model.
#include "plan/layout_checks.hpp"

#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/validate.hpp"
#include "plan/frozen_tensors.hpp"
#include "plan/pipeline_split.hpp"
#include "plan/rank_layout.hpp"

namespace dtrain {
namespace {

std::string s(long v) { return std::to_string(v); }

}  // namespace

void check_layout(const Config& c, int world) {
  std::vector<std::string> errs;
  const auto& m = c.model;
  const auto& y = c.system;
  const long tp = y.tensor_model_parallel_size, pp = y.pipeline_model_parallel_size;
  const long cp = y.context_parallel_size, v = y.virtual_pipeline_model_parallel_size;
  bool sizes_fit = true;
  for (auto [key, size] : {std::pair<const char*, long>{"system.tensor_model_parallel_size", tp},
                           {"system.pipeline_model_parallel_size", pp}, {"system.context_parallel_size", cp}})
    if (size > world) {
      errs.push_back(std::string(key) + "=" + s(size) + " is larger than the " + s(world) + " ranks of this job");
      sizes_fit = false;
    }
  const long model_parallel = sizes_fit ? tp * cp * pp : 0;  // each <= kMaxRanks = 2^20 (validated): no overflow
  if (sizes_fit && world % model_parallel != 0)
    errs.push_back("system.tensor_model_parallel_size=" + s(tp) + " x system.pipeline_model_parallel_size=" + s(pp) +
                   " x system.context_parallel_size=" + s(cp) + " = " + s(model_parallel) + " does not divide the " + s(world) +
                   " ranks of this job; choose sizes whose product is one of: " + divisor_list(world));
  if (m.num_attention_heads % tp != 0)
    errs.push_back("model.num_attention_heads=" + s(m.num_attention_heads) + " is not divisible by system.tensor_model_parallel_size=" +
                   s(tp) + "; use a tp among: " + divisor_list(m.num_attention_heads));
  if (m.group_query_attention && m.num_query_groups % tp != 0)
    errs.push_back("model.num_query_groups=" + s(m.num_query_groups) + " is not divisible by system.tensor_model_parallel_size=" +
                   s(tp) + " (each tensor-parallel rank holds whole key/value groups); use a tp among: " +
                   divisor_list(m.num_query_groups));
  if (m.vocab_size % tp != 0)
    errs.push_back("model.vocab_size=" + s(m.vocab_size) + " is not divisible by system.tensor_model_parallel_size=" + s(tp) +
                   "; pad the vocabulary to a multiple of " + s(tp) + " (e.g. " + s((m.vocab_size + tp - 1) / tp * tp) + ")");
  if (c.ffn_hidden() % tp != 0)
    errs.push_back("model.ffn_hidden_size=" + s(c.ffn_hidden()) + " is not divisible by system.tensor_model_parallel_size=" + s(tp));
  if (m.num_experts > 0 && c.moe_ffn_hidden() % tp != 0)
    errs.push_back("model.moe_ffn_hidden_size=" + s(c.moe_ffn_hidden()) + " is not divisible by system.tensor_model_parallel_size=" +
                   s(tp) + " (each tensor-parallel rank holds a slice of every expert's MLP)");
  const PipelineSplit split = PipelineSplit::of(c, static_cast<int>(pp), static_cast<int>(v));
  const std::vector<std::string> split_errors = split.errors();
  errs.insert(errs.end(), split_errors.begin(), split_errors.end());
  if (split.even() && split_errors.size() == 1)  // the even split's one error: the stage counts that divide
    errs.back() += "; pp" + std::string(v > 1 ? "*v" : "") + " among: " + divisor_list(m.num_layers);
  if (m.recompute_granularity == RecomputeGranularity::full && m.recompute_method == RecomputeMethod::block && split_errors.empty() &&
      m.recompute_num_layers > split.min_chunk_blocks())
    errs.push_back("model.recompute_num_layers=" + s(m.recompute_num_layers) + " with recompute_method=block recomputes the first " +
                   s(m.recompute_num_layers) + " blocks of each model chunk, but a chunk holds " + s(split.min_chunk_blocks()) +
                   " (model.num_layers=" + s(m.num_layers) + " over " + s(pp * v) + (v > 1 ? " pipeline chunks" : " pipeline stages") +
                   "); use recompute_num_layers <= " + s(split.min_chunk_blocks()));
  if (y.sequence_parallel && (m.seq_length / cp) % tp != 0)
    errs.push_back("system.sequence_parallel needs model.seq_length=" + s(m.seq_length) +
                   (cp > 1 ? " / system.context_parallel_size=" + s(cp) + " = " + s(m.seq_length / cp) : std::string()) +
                   " divisible by tensor_model_parallel_size=" + s(tp));
  try {
    RankLayout(ParallelLayout{}, y.rank_order);
  } catch (const UserError& e) {
    errs.push_back(e.what());
  }
  const long ep = y.expert_model_parallel_size;
  if (ep > 1 && m.num_experts % ep != 0)
    errs.push_back("model.num_experts=" + s(m.num_experts) + " is not divisible by system.expert_model_parallel_size=" + s(ep) +
                   "; use an expert_model_parallel_size among: " + divisor_list(m.num_experts));
  if (ep > 1 && model_parallel > 0 && world % model_parallel == 0 && (world / model_parallel) % ep != 0)
    errs.push_back("system.expert_model_parallel_size=" + s(ep) + " does not divide the data-parallel size " + s(world / model_parallel) +
                   " (experts are split over data-parallel ranks); use one among: " + divisor_list(world / model_parallel));
  if (!m.micro_batch_size.automatic && model_parallel > 0 && world % model_parallel == 0) {
    const long dp = world / model_parallel, mb = m.micro_batch_size.value;  // mb <= global batch <= 2^24
    if (m.global_batch_size % (mb * dp) != 0)
      errs.push_back("model.global_batch_size=" + s(m.global_batch_size) + " is not divisible by model.micro_batch_size=" + s(mb) +
                     " x data-parallel size " + s(dp) + " = " + s(mb * dp) + "; use a global batch that is a multiple of " +
                     s(mb * dp) + " (e.g. " + s((m.global_batch_size + mb * dp - 1) / (mb * dp) * (mb * dp)) +
                     ") or micro_batch_size=auto");
  }
  const std::vector<std::string> freeze = freeze_errors(c);
  errs.insert(errs.end(), freeze.begin(), freeze.end());
  if (!errs.empty()) {
    std::string all;
    for (const auto& e : errs) all += (all.empty() ? "" : "\n") + e;
    throw UserError(all);
  }
}

}  // namespace dtrain
