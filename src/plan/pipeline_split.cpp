// PipelineSplit: the blocks of each stage, checked once (errors) before anything sizes a stage.
#include "plan/pipeline_split.hpp"

#include <algorithm>

#include "plan/pipeline_schedule.hpp"

namespace dtrain {
namespace {

std::string s(long v) { return std::to_string(v); }

}  // namespace

PipelineSplit PipelineSplit::of(const Config& cfg, int pp, int v) {
  const SystemConfig& y = cfg.system;
  PipelineSplit p;
  p.num_layers = cfg.model.num_layers;
  p.pp = pp;
  p.v = v;
  p.first = y.pipeline_first_stage_layers;
  p.last = y.pipeline_last_stage_layers;
  p.embedding_as_layer = y.pipeline_account_for_embedding;
  p.loss_as_layer = y.pipeline_account_for_loss;
  p.v_shape = y.pipeline_schedule == PipelineSchedule::zbv;
  return p;
}

int PipelineSplit::stage_blocks(int stage) const {
  if (first > 0 || last > 0) {
    if (stage == 0 && first > 0) return first;
    if (stage == pp - 1 && last > 0) return last;
    const int fixed = (first > 0) + (last > 0), others = pp - fixed;
    return others > 0 ? (num_layers - first - last) / others : 0;
  }
  const long long per_chunk = (num_layers + embedding_as_layer + loss_as_layer) / (static_cast<long long>(pp) * v);
  return static_cast<int>(per_chunk * v) - (stage == 0 && embedding_as_layer) - (stage == pp - 1 && loss_as_layer);
}

int PipelineSplit::chunk_begin(int stage, int chunk) const {
  int begin = 0;
  if (v_shape) {  // the virtual stages before this one, wherever they sit
    const int vs = virtual_stage(PipelineSchedule::zbv, pp, stage, chunk);
    for (int u = 0; u < vs; ++u) begin += chunk_blocks(stage_chunk(PipelineSchedule::zbv, pp, u).stage);
    return begin;
  }
  for (int c = 0; c <= chunk; ++c)
    for (int st = 0; st < pp && (c < chunk || st < stage); ++st) begin += chunk_blocks(st);
  return begin;
}

int PipelineSplit::min_chunk_blocks() const {
  int fewest = chunk_blocks(0);
  for (int st = 1; st < pp; ++st) fewest = std::min(fewest, chunk_blocks(st));
  return fewest;
}

std::vector<std::string> PipelineSplit::errors() const {
  std::vector<std::string> errs;
  const std::string stages = "system.pipeline_model_parallel_size=" + s(pp) +
                             (v > 1 ? " x system.virtual_pipeline_model_parallel_size=" + s(v) : std::string());
  if (even()) {
    const long long chunks = static_cast<long long>(pp) * v;  // each up to 2^20: no overflow in 64 bits
    if (num_layers % chunks != 0)
      errs.push_back("model.num_layers=" + s(num_layers) + " is not divisible by " + stages + "; use num_layers a multiple of " +
                     s(chunks) + ", or set system.pipeline_first_stage_layers / pipeline_last_stage_layers for an uneven split");
    return errs;
  }
  if (v_shape) {
    errs.push_back("system.pipeline_schedule=zbv places the first and the last blocks on stage 0 and needs an even split: unset "
                   "system.pipeline_first_stage_layers / pipeline_last_stage_layers / pipeline_account_for_embedding / _loss, or use "
                   "zb-h1");
    return errs;
  }
  if ((first > 0 || last > 0) && (embedding_as_layer || loss_as_layer)) {
    errs.push_back("system.pipeline_first_stage_layers / pipeline_last_stage_layers and system.pipeline_account_for_embedding / "
                   "_loss are two ways to split the stages unevenly; use one");
    return errs;
  }
  if (pp == 1) {
    errs.push_back("an uneven pipeline split (system.pipeline_first_stage_layers, pipeline_last_stage_layers, "
                   "pipeline_account_for_embedding or _loss) needs system.pipeline_model_parallel_size > 1");
    return errs;
  }
  if (first > 0 || last > 0) {
    const int fixed = (first > 0) + (last > 0), others = pp - fixed, rest = num_layers - first - last;
    const std::string given = (first > 0 ? "system.pipeline_first_stage_layers=" + s(first) : std::string()) +
                              (first > 0 && last > 0 ? " + " : "") +
                              (last > 0 ? "system.pipeline_last_stage_layers=" + s(last) : std::string());
    if (rest < others || (others == 0 && rest != 0))
      errs.push_back(given + " leave " + s(rest) + " of model.num_layers=" + s(num_layers) + " blocks for the " + s(others) +
                     " other stage(s)" + (others == 0 ? "; with pp=2 both must add up to num_layers" : ", at least one each"));
    else if (others > 0 && rest % others != 0)
      errs.push_back(given + " leave " + s(rest) + " of model.num_layers=" + s(num_layers) + " blocks, not divisible by the " +
                     s(others) + " other stages of " + stages);
    else if (v > 1)
      for (int st = 0; st < pp; ++st)
        if (stage_blocks(st) % v != 0) {
          errs.push_back("stage " + s(st) + " holds " + s(stage_blocks(st)) + " blocks, not divisible by its " + s(v) +
                         " model chunks (" + stages + ", " + given + ")");
          break;
        }
    return errs;
  }
  const int counted = num_layers + embedding_as_layer + loss_as_layer;
  const std::string which = std::string(embedding_as_layer ? "the embedding" : "") + (embedding_as_layer && loss_as_layer ? " and " : "") +
                            (loss_as_layer ? "the loss" : "");
  if (v > 1)
    errs.push_back("system.pipeline_account_for_embedding / _loss work without interleaving only (a stage's model chunks would "
                   "differ in size); use system.pipeline_first_stage_layers / pipeline_last_stage_layers with " + stages);
  else if (counted % pp != 0)
    errs.push_back("model.num_layers=" + s(num_layers) + " + " + which + " counted as a layer = " + s(counted) +
                   " is not divisible by " + stages);
  else if (min_chunk_blocks() < 1)
    errs.push_back("with " + which + " counted as a layer, a stage of " + stages + " holds no block; use fewer stages");
  return errs;
}

std::string PipelineSplit::describe() const {
  std::string out;
  for (int st = 0; st < pp;) {
    int run = 1;
    while (st + run < pp && stage_blocks(st + run) == stage_blocks(st)) ++run;
    out += (out.empty() ? "" : ", ") + s(stage_blocks(st)) + (run > 1 ? " x " + s(run) : std::string());
    st += run;
  }
  return out;
}

}  // namespace dtrain
