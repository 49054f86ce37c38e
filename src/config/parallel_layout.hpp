// One parallel layout: the sizes of the rank grid (tp, cp, dp, pp), expert parallelism carved from dp,
// the virtual pipeline stages and the ZeRO stage, with one text form, printed and parsed here:
// "tp=2,cp=1,pp=2,dp=2,ep=1,v=1,zero=1" (the planner's --layout, ckpt-consolidate --reshard, the logs).
// The configuration's keys, the plan, the planner's search points and checkpoints all hold this type.
// Pure: no MPI, no I/O.
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <string>

namespace dtrain {

struct SystemConfig;

// The axes of the rank grid; expert parallelism is not one (it divides dp).
enum class Axis { tp = 0, cp = 1, dp = 2, pp = 3 };
constexpr std::array<Axis, 4> kAllAxes = {Axis::tp, Axis::cp, Axis::dp, Axis::pp};
const char* axis_name(Axis a);

// A rank's place on the grid.
struct Coords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  int& operator[](Axis a);
  int operator[](Axis a) const;
  bool operator==(const Coords& o) const { return tp == o.tp && cp == o.cp && dp == o.dp && pp == o.pp; }
};

struct ParallelLayout {
  // Declared in the grid's Axis order (dp before pp), which brace initialisers follow; the text form
  // prints pp before dp.
  int tp = 1, cp = 1, dp = 1, pp = 1;
  int ep = 1;    // expert-parallel ranks, a divisor of dp (not an axis of the grid)
  int v = 1;     // model chunks per pipeline stage (the interleaved schedule when > 1)
  int zero = 0;  // 0: a replicated optimizer; 1-3: the distributed optimizer at that ZeRO stage

  int operator[](Axis a) const;
  int world() const { return tp * cp * dp * pp; }
  bool distributed_optimizer() const { return zero > 0; }
  // The ranks holding the same parameters (dp x cp, context fastest) and a rank's index among them.
  int replicas() const { return dp * cp; }
  int replica(const Coords& c) const { return c.dp * cp + c.cp; }
  int edp() const { return cp * dp / ep; }  // expert-data-parallel group size
  // A rank's place in its expert-parallel and expert-data-parallel groups (see plan/rank_layout.hpp).
  int ep_rank(const Coords& c) const { return c.dp % ep; }
  int edp_rank(const Coords& c) const { return c.cp + cp * (c.dp / ep); }
  bool operator==(const ParallelLayout& o) const {
    return tp == o.tp && cp == o.cp && dp == o.dp && pp == o.pp && ep == o.ep && v == o.v && zero == o.zero;
  }
};

// Every key, in the order tp, cp, pp, dp, ep, v, zero, joined by `separator` (',' parses back; ' ' for logs).
std::string to_string(const ParallelLayout& l, char separator = ',');

// A key the caller handles beside the layout's own (the planner's mb, sp, recompute): given the key,
// its value and the whole item, returns false when it does not know the key.
using ExtraLayoutKey = std::function<bool(const std::string& key, const std::string& value, const std::string& item)>;

// Comma-separated key=value items over `base`: tp, cp, pp, dp, ep, v (whole numbers >= 1) and zero
// (0-3), plus what `extra` takes. Errors are UserErrors starting with `what` (e.g. "--reshard") that
// name the item and list `keys` (the accepted keys, as the caller words them).
ParallelLayout parse_layout(const std::string& text, const ParallelLayout& base, const std::string& what, const std::string& keys,
                            const ExtraLayoutKey& extra = {});

// The whole of `text` as a number in [lowest, 2^24] (sizes and counts); empty otherwise.
std::optional<int> whole_number(const std::string& text, int lowest);
// The value of a layout item as such a number, else the UserError parse_layout gives (for a caller's
// own keys in ExtraLayoutKey).
int layout_number(const std::string& value, const std::string& item, int lowest, const std::string& what, const std::string& keys);

// The layout a configuration runs on `world` ranks (dp = what tp x cp x pp leaves), and the
// configuration's keys set from a layout.
ParallelLayout parallel_layout(const SystemConfig& system, int world);
void set_parallel_layout(SystemConfig& system, const ParallelLayout& l);

}  // namespace dtrain
