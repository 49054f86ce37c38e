// The planner's search: every layout of a model on a cluster (tp, cp, pp, v, ep, dp, micro-batch,
// recomputation, optimizer sharding), ranked by the cost model's step time, kept only where dtrain
// accepts it (validate_config, make_plan's checks) and where make_plan's memory per rank fits the
// device. Pure (no MPI). Fast on large clusters: sizes are divisors, the cost model is arithmetic, a
// lower bound of the model state drops layouts that cannot fit before any plan is built, and full
// plans are built lazily, fastest first, until `top` fit.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"

namespace dtrain {

struct RankedLayout {
  Layout layout;
  StepCost cost;
  double tokens_per_s = 0;
  double mfu = 0;            // model FLOPs (plan/model_flops) x tokens/s over the devices' peak
  std::size_t memory = 0;    // bytes per rank of the largest stage (make_plan)
};

struct SearchResult {
  int world = 0;
  std::vector<RankedLayout> best;  // fastest first, at most `top`; all fit
  long enumerated = 0;             // layouts the sizes allow
  long over_lower_bound = 0;       // dropped before planning: the model state alone exceeds the memory
  long planned = 0;                // make_plan built (lazily, fastest first)
  long too_big = 0;                // planned, but more memory than a device has
  std::map<std::string, long> refused;  // dtrain's own checks refused them: first line of the message -> count
  // When nothing fits: the layout needing the least memory per rank, and that memory.
  bool any_valid = false;
  RankedLayout least_memory;
};

// Layouts of cfg's model (the input's batch, precision, overlap flags, async_save) on `cluster`.
// `least_memory`: when nothing fits, also find the layout that needs the least memory.
SearchResult search_layouts(const Config& cfg, const ClusterSpec& cluster, int top, bool least_memory = true);

// One given layout on `cluster` (world = the layout's): its predicted cost and make_plan's memory per
// rank (which may exceed the device's). UserError with dtrain's own message when it refuses the layout.
RankedLayout cost_layout(const Config& cfg, const ClusterSpec& cluster, const Layout& layout);

// Positive divisors of n, ascending.
std::vector<int> divisors(int n);

}  // namespace dtrain
