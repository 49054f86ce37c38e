// run_plan: the ranked table, the winner's overrides, the nothing-fits message, scaling curves.
#include "app/plan_command.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "plan/layout_search.hpp"
#include "plan/layout_spec.hpp"

namespace dtrain {
namespace {

double gb(double bytes) { return bytes / 1e9; }

std::string layout_text(const Layout& l, bool experts) {
  ParallelLayout shown = l.sizes;
  if (!experts) shown.ep = 1;
  std::ostringstream os;
  os << to_string(shown, ' ') << " schedule=" << to_string(l.schedule()) << " micro_batch=" << l.micro_batch << " recompute=" << l.recompute
     << (l.sizes.distributed_optimizer() ? "" : " (no distributed optimizer)");
  if (l.first_stage_layers > 0 || l.last_stage_layers > 0)
    os << " first_stage_layers=" << l.first_stage_layers << " last_stage_layers=" << l.last_stage_layers;
  return os.str();
}

void print_table(const SearchResult& r, bool experts) {
  std::printf("%3s %4s %3s %3s %3s %-5s %5s%s %4s %5s %-9s %4s %9s %11s %6s %8s %7s | %s\n", "#", "tp", "cp", "pp", "v", "sched", "dp",
              experts ? "   ep" : "", "mb", "m", "recompute", "zero", "step s", "tokens/s", "MFU", "GB/rank", "bubble",
              "compute   TP  bubble   DP  other (% of step)");
  int i = 0;
  for (const auto& b : r.best) {
    const Layout& l = b.layout;
    const StepCost& c = b.cost;
    const double s = c.step();
    std::ostringstream rc;
    rc << l.recompute;
    const PipelineSchedule sched = l.schedule();
    const char* shown = sched == PipelineSchedule::interleaved ? "int" : to_string(sched);
    std::printf("%3d %4d %3d %3d %3d %-5s %5d", ++i, l.sizes.tp, l.sizes.cp, l.sizes.pp, l.sizes.v, l.sizes.pp > 1 ? shown : "-", l.sizes.dp);
    if (experts) std::printf(" %4d", l.sizes.ep);
    std::printf(" %4d %5d %-9s %4s %9.3f %11.0f %5.1f%% %8.2f %6.1f%% | %6.1f %4.1f %7.1f %4.1f %6.1f\n", l.micro_batch,
                c.micro_batches, rc.str().c_str(), l.sizes.distributed_optimizer() ? std::to_string(l.sizes.zero).c_str() : "-", s,
                b.tokens_per_s, 100 * b.mfu, gb(static_cast<double>(b.memory)), 100 * c.bubble_fraction, 100 * c.compute / s,
                100 * c.tp / s, 100 * c.bubble / s, 100 * c.dp / s, 100 * c.other() / s);
    if (l.first_stage_layers > 0 || l.last_stage_layers > 0)
      std::printf("      (uneven stages: first %d, last %d blocks)\n", l.first_stage_layers, l.last_stage_layers);
  }
}

void print_search_counts(const SearchResult& r, const ClusterSpec& cl) {
  std::printf("searched %ld layouts: %ld dropped by a lower bound of their model state, %ld planned (%ld over %.1f GB per rank",
              r.enumerated, r.over_lower_bound, r.planned, r.too_big, gb(cl.memory));
  long refused = 0;
  for (const auto& [why, n] : r.refused) refused += n;
  std::printf(", %ld refused by dtrain's checks)\n", refused);
  for (const auto& [why, n] : r.refused) std::printf("  refused %ld: %s\n", n, why.c_str());
}

[[noreturn]] void nothing_fits(const SearchResult& r, const ClusterSpec& cl, bool experts) {
  std::fflush(stdout);  // the search's counts before the error
  if (!r.any_valid)
    throw UserError("dtrain plan: no layout of this model is valid on " + std::to_string(r.world) +
                    " devices (sizes must divide the world, heads, layers, vocabulary and global batch); change --nodes or "
                    "model.global_batch_size");
  char need[64], have[64];
  std::snprintf(need, sizeof need, "%.1f GB", gb(static_cast<double>(r.least_memory.memory)));
  std::snprintf(have, sizeof have, "%.1f GB", gb(cl.memory));
  throw UserError("dtrain plan: no layout fits the " + std::string(have) + " per device of '" + cl.name + "' on " +
                  std::to_string(r.world) + " devices; the layout needing the least (" + layout_text(r.least_memory.layout, experts) +
                  ") needs " + need + " per rank: use devices with at least " + need + ", more nodes (--nodes), a smaller "
                  "model.global_batch_size or a smaller model");
}

// The cluster with `devices` devices: whole nodes, or part of one node.
ClusterSpec resized(const ClusterSpec& cl, int devices, const std::string& option) {
  ClusterSpec c = cl;
  if (devices < cl.devices_per_node) {
    c.nodes = 1;
    c.devices_per_node = devices;
  } else {
    if (devices % cl.devices_per_node != 0)
      throw UserError("dtrain plan: " + option + " " + std::to_string(devices) + " is not a whole number of nodes of " +
                      std::to_string(cl.devices_per_node) + " devices (nor less than one node)");
    c.nodes = devices / cl.devices_per_node;
  }
  return c;
}

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> counts;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto n = whole_number(item, 1);
    if (!n) throw UserError("dtrain plan: --scaling '" + text + "' must be device counts separated by commas (e.g. 8,64,512,4096)");
    counts.push_back(*n);
  }
  return counts;
}

void plot(const std::vector<int>& devices, const std::vector<double>& strong, const std::vector<double>& weak) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    std::printf("(--plot: gnuplot is not installed; tools/install-deps installs it)\n");
    return;
  }
  std::fflush(stdout);
  FILE* g = popen("gnuplot", "w");
  if (!g) return;
  std::fprintf(g, "set terminal dumb size 100,28\nset logscale xy\nset xlabel 'devices'\nset ylabel 'tokens/s'\n"
                  "plot '-' with linespoints title 'strong', '-' with linespoints title 'weak'\n");
  for (const auto* curve : {&strong, &weak}) {
    for (std::size_t i = 0; i < devices.size(); ++i)
      if ((*curve)[i] > 0) std::fprintf(g, "%d %g\n", devices[i], (*curve)[i]);
    std::fprintf(g, "e\n");
  }
  pclose(g);
}

void print_scaling(const Config& cfg, const ClusterSpec& cl, const std::vector<int>& counts, bool draw) {
  std::printf("\n== predicted scaling (the best layout at each size; '-' = nothing fits) ==\n");
  std::printf("%8s | strong: global batch %-19d | %s\n", "devices", cfg.model.global_batch_size,
              "weak: global batch per device as the input's");
  std::printf("%8s | %13s %13s %12s | %6s %13s %13s %12s\n", "", "tokens/s", "per device", "MFU", "batch", "tokens/s", "per device", "MFU");
  std::vector<double> strong, weak;
  for (int d : counts) {
    const ClusterSpec c = resized(cl, d, "--scaling");
    Config w = cfg;
    w.model.global_batch_size = std::max(1, static_cast<int>(static_cast<double>(cfg.model.global_batch_size) * d / cl.world() + 0.5));
    const SearchResult s = search_layouts(cfg, c, 1, false), ws = search_layouts(w, c, 1, false);
    strong.push_back(s.best.empty() ? 0 : s.best[0].tokens_per_s);
    weak.push_back(ws.best.empty() ? 0 : ws.best[0].tokens_per_s);
    std::printf("%8d |", d);
    for (const auto* r : {&s, &ws}) {
      if (r == &ws) std::printf(" | %6d", w.model.global_batch_size);
      if (r->best.empty())
        std::printf(" %13s %13s %12s", "-", "-", "-");
      else
        std::printf(" %13.0f %13.1f %11.1f%%", r->best[0].tokens_per_s, r->best[0].tokens_per_s / d, 100 * r->best[0].mfu);
    }
    std::printf("\n");
  }
  if (draw) plot(counts, strong, weak);
}

// --layout: the one layout's row, its breakdown in seconds, and a machine-readable line.
int print_layout(const Config& cfg, ClusterSpec cl, const PlanOptions& o) {
  Layout base = layout_of(cfg, cfg.system.tensor_model_parallel_size * cfg.system.context_parallel_size *
                                   cfg.system.pipeline_model_parallel_size);
  const Layout l = parse_layout(o.layout, base);
  const int world = l.sizes.world();
  if (o.nodes > 0 && cl.world() != world)
    throw UserError("dtrain plan: --layout has tp x cp x pp x dp = " + std::to_string(world) + " ranks but --nodes " +
                    std::to_string(o.nodes) + " gives " + std::to_string(cl.world()) + "; make them agree or leave out --nodes");
  if (o.nodes == 0) cl = resized(cl, world, "--layout's world");
  const bool experts = cfg.model.num_experts > 0;
  SearchResult r;
  r.world = world;
  r.best.push_back(cost_layout(cfg, cl, l));
  const StepCost& c = r.best[0].cost;
  std::printf("\n== the layout %s on %d device(s) (predicted) ==\n", layout_text(l, experts).c_str(), world);
  print_table(r, experts);
  if (static_cast<double>(r.best[0].memory) > cl.memory)
    std::printf("warning: %.2f GB per rank is more than the %.1f GB of a device\n", gb(static_cast<double>(r.best[0].memory)), gb(cl.memory));
  std::printf("\nseconds: compute %.6g (recompute %.6g)  tp %.6g  cp %.6g  ep %.6g  p2p %.6g  bubble %.6g  dp %.6g  release %.6g  optimizer %.6g\n",
              c.compute, c.recompute, c.tp, c.cp, c.ep, c.p2p, c.bubble, c.dp, c.release, c.optimizer);
  std::printf("predicted_step_s = %.6g\n", c.step());
  return 0;
}

}  // namespace

int run_plan(const Config& cfg, const std::string& input, const PlanOptions& o) {
  if (o.cluster.empty()) throw UserError("dtrain plan needs --cluster FILE (a cluster description; see inputs/clusters/)");
  if (o.top < 1) throw UserError("dtrain plan: --top must be >= 1");
  if (o.plot && o.scaling.empty()) throw UserError("dtrain plan: --plot draws the --scaling curves; give --scaling D1,D2,...");
  const std::vector<int> scaling = o.scaling.empty() ? std::vector<int>{} : parse_counts(o.scaling);  // refused before any work
  ClusterSpec cl = load_cluster_file(o.cluster);
  if (o.nodes > 0) cl.nodes = o.nodes;
  if (!o.layout.empty()) {
    if (!o.scaling.empty()) throw UserError("dtrain plan: --layout costs one layout; leave out --scaling (or --layout)");
    std::printf("dtrain plan: %s on '%s'\n", input.c_str(), cl.name.c_str());
    return print_layout(cfg, cl, o);
  }
  const bool experts = cfg.model.num_experts > 0;
  std::printf("dtrain plan: %s on '%s': %d node(s) x %d devices = %d ranks, %.1f GB and %.4g TFLOP/s (%s) per device\n",
              input.c_str(), cl.name.c_str(), cl.nodes, cl.devices_per_node, cl.world(), gb(cl.memory),
              cl.peak(cfg.system.precision) / 1e12, to_string(cfg.system.precision));
  const SearchResult r = search_layouts(cfg, cl, o.top);
  print_search_counts(r, cl);
  if (r.best.empty()) nothing_fits(r, cl, experts);
  std::printf("\n== the %zu fastest layouts that fit (predicted) ==\n", r.best.size());
  print_table(r, experts);
  std::printf("\nrun the fastest:\n  dtrain %s", input.c_str());
  for (const auto& flag : layout_overrides(r.best[0].layout, experts)) std::printf(" \\\n    %s", flag.c_str());
  std::printf("\n");
  if (!scaling.empty()) print_scaling(cfg, cl, scaling, o.plot);
  return 0;
}

}  // namespace dtrain
