// The planner's cost model: predicted time of one training step of a layout on a cluster, from the
// model's shapes alone (no measurement, no MPI). Per micro-batch and pipeline stage (the slowest: the
// last, which holds the head):
//   compute    every GEMM by its shape through the cluster's efficiency table (per block QKV, output
//              projection, MLP in and out; forward once, backward twice; in MoE blocks, weighted by
//              their share of the blocks, each local expert's MLP over its share of the routed rows:
//              tokens x topk, x the capacity factor when below 1), attention's causal T^2 work as
//              batched GEMMs per head, elementwise work (norms, residuals, activation, softmax) by
//              bytes moved over the cluster's elementwise rate; recomputation (selective: attention's
//              core and the activation again; full: the block's forward again, with its TP collectives)
//   TP         per block 2 all-reduces forward and 2 backward (with sequence parallelism an all-gather
//              and a reduce-scatter for each), on the TP group's link; not overlapped
//   CP         per block cp-1 ring steps of the keys and values (forward; backward also their fp32
//              gradients), overlapped with attention: only what exceeds attention's time is exposed
//   EP         per MoE block 2 all-to-alls forward, 2 backward of the routed rows
//   PP         send/recv of the stage's activation forward and its gradient backward (v of each with
//              interleaving and zbv); the bubble is predicted_bubble's share of the step (zb-h1 and
//              zbv: their simulation with equal forward, input- and weight-gradient times; their W
//              keeps operands, which the plan's memory counts)
//   DP         gradient reduction over dp x cp (all-reduce; reduce-scatter + parameter all-gather under
//              the distributed optimizer; ZeRO-2/3 reduce per micro-batch, ZeRO-3 gathers parameters
//              before each forward and backward): overlap_grad_reduce hides it behind the backward pass
//              but for the last block's bucket
//   release    ZeRO-2/3 give buckets back between uses (gradients after each micro-batch's reduction,
//              ZeRO-3's gathered weights after each use) and take them again: those bytes at the
//              cluster's released_rate (on a host: madvise and zero-filled page faults); with
//              system.offload_params also the owned slices copied from the host before each gather
//   optimizer  the bytes of AdamW's state read and written over the memory bandwidth; with
//              system.offload_optimizer over the host's memory bandwidth, plus the owned gradients and
//              weights copied down and the weights up over the device's link to the host
// Rank order tp-cp-dp-pp (tp fastest) decides which groups fit in a node.
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cluster.hpp"
#include "plan/rank_layout.hpp"

namespace dtrain {

// One point of the planner's search space.
struct Layout {
  ParallelLayout sizes;  // tp, cp, dp, pp, ep (inside dp; 1 without experts), v (interleaved when > 1), zero
  int micro_batch = 1;
  RecomputeGranularity recompute = RecomputeGranularity::none;
  bool sequence_parallel = false;
  // An uneven pipeline split: blocks of the first / last stage (0 = even; plan/pipeline_split.hpp).
  int first_stage_layers = 0, last_stage_layers = 0;
  // The zero-bubble schedules (split backward): zb-h1 at v = 1, zbv at v = 2.
  bool zero_bubble = false;
  PipelineSchedule schedule() const {
    if (zero_bubble) return sizes.v > 1 ? PipelineSchedule::zbv : PipelineSchedule::zb_h1;
    return sizes.v > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
  }
};

// The layout a configuration runs on `world` ranks.
Layout layout_of(const Config& cfg, int world);
// The configuration with the layout's keys set (what make_plan and check_layout read).
Config with_layout(const Config& cfg, const Layout& l);
// The command-line overrides that run the layout ("--system.tensor_model_parallel_size=8", ...).
std::vector<std::string> layout_overrides(const Layout& l, bool experts);

struct StepCost {
  // Seconds of one step on the slowest stage.
  double compute = 0;    // GEMMs, attention, elementwise, recomputation of every micro-batch
  double recompute = 0;  // the part of compute that is recomputation
  double tp = 0;         // tensor-parallel collectives
  double cp = 0;         // exposed context-parallel ring exchange
  double ep = 0;         // expert-parallel all-to-alls
  double p2p = 0;        // pipeline sends and receives
  double bubble = 0;     // pipeline bubble
  double dp = 0;         // exposed data-parallel collectives
  double release = 0;    // ZeRO-2/3: memory given back and taken again
  double optimizer = 0;  // the optimizer step
  double bubble_fraction = 0;
  int micro_batches = 1;
  double rank_params = 0;  // parameters of one rank of the heaviest stage (what DP reduces, AdamW updates)
  double step() const { return compute + tp + cp + ep + p2p + bubble + dp + release + optimizer; }
  double other() const { return cp + ep + p2p + release + optimizer; }  // the step line's other communication and work
};

// Predicted step of `l` for the model of `cfg` (precision, overlap flags from cfg.system) on `cluster`.
// The layout must be valid for the model (check_layout); the world is l.sizes.world().
StepCost predict_step(const Config& cfg, const Layout& l, const ClusterSpec& cluster);

}  // namespace dtrain
