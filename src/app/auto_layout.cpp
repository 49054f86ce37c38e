// choose_layout: search_layouts on the job's shape, the first candidate the command line's keys leave
// as it is, its keys broadcast as command-line overrides.
#include "app/auto_layout.hpp"

#include <cstdio>
#include <sstream>

#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "config/validate.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"
#include "plan/layout_search.hpp"

namespace dtrain {
namespace {

bool same_layout(const Layout& a, const Layout& b) {
  return a.sizes == b.sizes && a.micro_batch == b.micro_batch && a.recompute == b.recompute &&
         a.first_stage_layers == b.first_stage_layers && a.last_stage_layers == b.last_stage_layers &&
         a.sequence_parallel == b.sequence_parallel && a.zero_bubble == b.zero_bubble;
}

std::string describe(const Layout& l) {
  std::ostringstream os;
  os << to_string(l.sizes, ' ') << ", " << to_string(l.schedule()) << ", micro-batch " << l.micro_batch << ", recompute " << l.recompute
     << (l.sequence_parallel ? ", sequence parallel" : "");
  return os.str();
}

}  // namespace

Config choose_layout(HostComm world, const LaunchEnv& env, const std::string& ini, const CommandLine& cl, const Config& cfg) {
  const int size = world.size();
  std::string chosen;  // the overrides, one per line
  collective_check(world, [&] {
    if (world.rank() != 0) return;
    ClusterSpec cluster = load_cluster_file(cfg.system.cluster_file);
    if (env.num_nodes < 1 || size % env.num_nodes != 0)
      throw UserError("system.layout=auto plans for the same number of ranks on every node; this job has " + std::to_string(size) +
                      " ranks on " + std::to_string(env.num_nodes) + " node(s): set the layout keys (system.layout=manual)");
    cluster.nodes = env.num_nodes;
    cluster.devices_per_node = size / env.num_nodes;
    const SearchResult r = search_layouts(cfg, cluster, 64);
    if (r.best.empty())
      throw UserError("system.layout=auto: no layout of this model fits " + std::to_string(size) + " rank(s) of '" + cluster.name +
                      "' (dtrain plan --cluster " + cfg.system.cluster_file + " says why)");
    const bool experts = cfg.model.num_experts > 0;
    for (std::size_t i = 0; i < r.best.size(); ++i) {
      // The command line's keys last, so that they win; a candidate they change does not agree with them.
      std::vector<std::string> overrides = layout_overrides(r.best[i].layout, experts);
      overrides.insert(overrides.end(), cl.overrides.begin(), cl.overrides.end());
      if (!same_layout(layout_of(load_config(ini, cl.input, overrides), size), r.best[i].layout)) continue;
      for (const auto& o : layout_overrides(r.best[i].layout, experts)) chosen += o + "\n";
      char line[512];
      std::snprintf(line, sizeof line,
                    "layout auto on '%s' (%d node(s) x %d ranks): %s; predicted %.4g s/step, %.0f tokens/s (%s)\n",
                    cluster.name.c_str(), cluster.nodes, cluster.devices_per_node, describe(r.best[i].layout).c_str(),
                    r.best[i].cost.step(), r.best[i].tokens_per_s,
                    i > 0 ? "the fastest predicted that agrees with the command line" : "the fastest predicted that fits");
      std::printf("%s", line);
      std::fflush(stdout);
      return;
    }
    throw UserError("system.layout=auto: none of the " + std::to_string(r.best.size()) + " fastest layouts that fit agrees with the "
                    "layout keys given on the command line; drop them or set system.layout=manual");
  });
  broadcast_string(world, chosen);
  std::vector<std::string> overrides;
  std::istringstream lines(chosen);
  for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  overrides.insert(overrides.end(), cl.overrides.begin(), cl.overrides.end());
  Config chosen_cfg = load_config(ini, cl.input, overrides);
  validate_config(chosen_cfg);
  return chosen_cfg;
}

}  // namespace dtrain
