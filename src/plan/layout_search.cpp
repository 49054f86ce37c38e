// search_layouts: enumerate, cost, bound, then plan lazily in order of predicted step time.
#include "plan/layout_search.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "config/validate.hpp"
#include "plan/model_flops.hpp"
#include "plan/pipeline_split.hpp"
#include "plan/training_plan.hpp"

namespace dtrain {
namespace {

constexpr long kMaxChunkForwards = 1 << 20;  // make_plan refuses more chunk-forwards per step
constexpr int kMinCpPositions = 4096;        // cp > 1 only where each rank keeps this many positions

struct Candidate {
  Layout layout;
  StepCost cost;
  double lower_bound;  // bytes per rank no plan of this layout can go below
};

// Bytes per rank of the model state alone, under the layout's sharding (a lower bound of make_plan's
// memory: the arenas hold at least these parameters; 5% below for the estimate's rounding).
double state_lower_bound(const Config& cfg, const Layout& l, double params) {
  const double e = is_16bit(cfg.system.precision) ? 2 : 4, opt = is_16bit(cfg.system.precision) ? 12 : 8;
  const double nd = static_cast<double>(l.sizes.dp) * l.sizes.cp;
  const int zero = l.sizes.zero;
  const double per_param = zero == 0   ? e + 4 + opt
                           : zero == 1 ? e + 4 + opt / nd
                           : zero == 2 ? e + (4 + opt) / nd
                                       : (e + 4 + opt) / nd;
  return 0.95 * params * per_param;
}

// The splits of the blocks tried at pp stages, as (first, last) stage blocks (0, 0 = even): an input
// that sets a split itself (pipeline_first/last_stage_layers, or the embedding or loss counted as a
// block) is costed with its own alone; else the even split where num_layers divides, and Megatron's
// uneven one with lighter first and last stages, which also hold the embedding and the LM head: the
// largest f below the middle stages' share with L - 2f divisible by pp - 2 (pp = 2: the last stage the
// lighter, by one block for an odd L, two for an even one).
std::vector<std::pair<int, int>> stage_splits(const Config& cfg, int pp) {
  const SystemConfig& y = cfg.system;
  const int L = cfg.model.num_layers;
  if (y.pipeline_first_stage_layers > 0 || y.pipeline_last_stage_layers > 0) {
    if (PipelineSplit::of(cfg, pp, 1).errors().empty()) return {{y.pipeline_first_stage_layers, y.pipeline_last_stage_layers}};
    return {};  // not a split of this many stages
  }
  if (y.pipeline_account_for_embedding || y.pipeline_account_for_loss) return {{0, 0}};
  std::vector<std::pair<int, int>> out;
  if (L % pp == 0) out.emplace_back(0, 0);
  if (pp == 2 && L >= 3) {
    const int last = L % 2 ? (L - 1) / 2 : L / 2 - 1;
    out.emplace_back(L - last, last);
  }
  if (pp >= 3)
    for (int f = (L - 1) / pp; f >= 1; --f)
      if ((L - 2 * f) % (pp - 2) == 0 && f < (L - 2 * f) / (pp - 2)) {
        out.emplace_back(f, f);
        break;
      }
  return out;
}

std::vector<Layout> enumerate(const Config& cfg, int world) {
  const auto& m = cfg.model;
  const int gb = m.global_batch_size, T = m.seq_length;
  std::vector<Layout> out;
  for (int tp : divisors(world)) {
    if (m.num_attention_heads % tp || m.kv_heads() % tp || m.vocab_size % tp || cfg.ffn_hidden() % tp) continue;
    for (int cp : divisors(world / tp)) {
      if (cp > 1 && (T % (2 * cp) != 0 || T / cp < kMinCpPositions)) continue;
      for (int pp : divisors(world / (tp * cp)))
        for (const auto& [first, last] : stage_splits(cfg, pp)) {
        const int dp = world / (tp * cp * pp);
        if (gb % dp) continue;
        // Interleaving divides every stage's blocks into v equal chunks.
        PipelineSplit split = PipelineSplit::of(cfg, pp, 1);
        split.first = first, split.last = last;
        int blocks = 0;
        for (int stage = 0; stage < pp; ++stage) blocks = std::gcd(blocks, split.stage_blocks(stage));
        std::vector<int> vs{1};
        if (pp > 1)
          for (int v : divisors(blocks))
            if (v > 1) vs.push_back(v);
        const std::vector<int> eps = m.num_experts > 0 ? divisors(m.num_experts) : std::vector<int>{1};
        // Each v with its schedules: 1F1B and zb-h1 at v = 1, interleaved and (v = 2, even split) zbv above.
        std::vector<std::pair<int, bool>> schedules;
        for (int v : vs) {
          schedules.emplace_back(v, false);
          if (pp > 1 && (v == 1 || (v == 2 && first == 0 && last == 0))) schedules.emplace_back(v, true);
        }
        for (const auto& [v, zero_bubble] : schedules)
          for (int ep : eps) {
            if (dp % ep) continue;
            for (int mb : divisors(gb / dp)) {
              const long micro = gb / (static_cast<long>(dp) * mb);
              if ((v > 1 && !zero_bubble && micro < pp) || micro * v > kMaxChunkForwards) continue;
              for (auto rc : {RecomputeGranularity::none, RecomputeGranularity::selective, RecomputeGranularity::full})
                for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                  Layout l;
                  l.sizes = {tp, cp, dp, pp};
                  l.sizes.ep = ep;
                  l.sizes.v = v;
                  l.zero_bubble = zero_bubble;
                  l.micro_batch = mb;
                  l.recompute = rc;
                  l.sizes.zero = zero;
                  l.sequence_parallel = tp > 1 && T % tp == 0;
                  l.first_stage_layers = first;
                  l.last_stage_layers = last;
                  out.push_back(l);
                }
            }
          }
      }
    }
  }
  return out;
}

// make_plan's memory of a layout, or the reason dtrain refuses it.
bool plan_memory(const Config& cfg, const Layout& l, std::size_t& memory, std::string& refusal) {
  const Config c = with_layout(cfg, l);
  try {
    validate_config(c);
    memory = make_plan(c, l.sizes.world()).peak_memory();
    return true;
  } catch (const UserError& e) {
    const std::string what = e.what();
    refusal = what.substr(0, what.find('\n'));
    return false;
  }
}

// The input as the planner costs it: the cluster's device, rank order tp-cp-dp-pp.
Config planning_config(const Config& input, const ClusterSpec& cluster) {
  Config cfg = input;
  cfg.system.device = cluster.device;
  cfg.system.rank_order = "tp-cp-dp-pp";
  return cfg;
}

RankedLayout ranked(const Config& cfg, const ClusterSpec& cluster, const Layout& l, const StepCost& cost, std::size_t memory) {
  const double tokens = static_cast<double>(cfg.model.global_batch_size) * cfg.model.seq_length;
  const double tps = tokens / cost.step();
  return RankedLayout{l, cost, tps, model_flops_per_token(cfg) * tps / (cluster.world() * cluster.peak(cfg.system.precision)), memory};
}

}  // namespace

RankedLayout cost_layout(const Config& input, const ClusterSpec& cluster, const Layout& l) {
  const Config cfg = planning_config(input, cluster);
  std::size_t memory = 0;
  std::string why;
  if (!plan_memory(cfg, l, memory, why)) throw UserError("dtrain plan: --layout is refused: " + why);
  return ranked(cfg, cluster, l, predict_step(cfg, l, cluster), memory);
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

SearchResult search_layouts(const Config& input, const ClusterSpec& cluster, int top, bool least_memory) {
  const Config cfg = planning_config(input, cluster);
  SearchResult r;
  r.world = cluster.world();

  std::vector<Candidate> all;
  for (const Layout& l : enumerate(cfg, r.world)) {
    const StepCost cost = predict_step(cfg, l, cluster);
    all.push_back({l, cost, state_lower_bound(cfg, l, cost.rank_params)});
  }
  r.enumerated = static_cast<long>(all.size());
  std::vector<const Candidate*> order;
  for (const auto& c : all)
    if (c.lower_bound <= cluster.memory) order.push_back(&c);
  r.over_lower_bound = r.enumerated - static_cast<long>(order.size());
  std::stable_sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) { return a->cost.step() < b->cost.step(); });
  for (const Candidate* c : order) {
    if (static_cast<int>(r.best.size()) >= top) break;
    std::size_t memory = 0;
    std::string why;
    ++r.planned;
    if (!plan_memory(cfg, c->layout, memory, why)) {
      ++r.refused[why];
    } else if (static_cast<double>(memory) > cluster.memory) {
      ++r.too_big;
    } else {
      r.best.push_back(ranked(cfg, cluster, c->layout, c->cost, memory));
    }
  }
  if (!r.best.empty() || !least_memory) return r;

  // Nothing fits: the least memory any accepted layout needs, in order of the lower bound until no
  // remaining layout can need less.
  std::vector<const Candidate*> by_bound;
  for (const auto& c : all) by_bound.push_back(&c);
  std::stable_sort(by_bound.begin(), by_bound.end(), [](const Candidate* a, const Candidate* b) { return a->lower_bound < b->lower_bound; });
  double least = std::numeric_limits<double>::infinity();
  for (const Candidate* c : by_bound) {
    if (c->lower_bound >= least) break;
    std::size_t memory = 0;
    std::string why;
    if (!plan_memory(cfg, c->layout, memory, why)) continue;
    if (static_cast<double>(memory) < least) {
      least = static_cast<double>(memory);
      r.least_memory = ranked(cfg, cluster, c->layout, c->cost, memory);
      r.any_valid = true;
    }
  }
  return r;
}

}  // namespace dtrain
