// Fits of calibration.hpp: the efficiency table and the link's least squares.
#include "plan/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "common/error.hpp"
#include "plan/collective_cost.hpp"

namespace dtrain {

double peak_rate(const std::vector<GemmSample>& samples) {
  double peak = 0;
  for (const auto& s : samples)
    if (s.seconds > 0) peak = std::max(peak, s.flops / s.seconds);
  return peak;
}

std::vector<std::pair<double, double>> efficiency_table(const std::vector<GemmSample>& samples, double peak) {
  std::map<double, std::pair<double, int>> by_flops;  // FLOPs -> (sum of efficiencies, count)
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !(s.flops > 0) || !(peak > 0)) continue;
    auto& e = by_flops[s.flops];
    e.first += std::min(1.0, s.flops / s.seconds / peak);
    ++e.second;
  }
  std::vector<std::pair<double, double>> table;
  for (const auto& [flops, e] : by_flops) table.emplace_back(flops, std::max(1e-6, e.first / e.second));
  return table;
}

std::vector<std::pair<double, std::vector<std::pair<double, double>>>> efficiency_by_width(const std::vector<GemmSample>& samples,
                                                                                           double peak) {
  std::map<double, std::vector<GemmSample>> by_width;
  for (const auto& s : samples) by_width[s.width].push_back(s);
  std::vector<std::pair<double, std::vector<std::pair<double, double>>>> curves;
  for (const auto& [width, same] : by_width) curves.emplace_back(width, efficiency_table(same, peak));
  return curves;
}

double model_seconds(const CommSample& s, const Link& link) {
  switch (s.op) {
    case Collective::all_reduce: return all_reduce_s(s.bytes, s.ranks, link);
    case Collective::reduce_scatter: return reduce_scatter_s(s.bytes, s.ranks, link);
    case Collective::all_gather: return all_gather_s(s.bytes, s.ranks, link);
    case Collective::all_to_all: return all_to_all_s(s.bytes, s.ranks, link);
    case Collective::send_recv: return send_s(s.bytes, link);
  }
  return 0;
}

namespace {

// t = a * (1/bw) + b * latency, with a = the formula at bandwidth 1 and no latency, b = at infinite
// bandwidth and latency 1; both divided by the measured t, so that the residual is a relative error.
struct Row {
  double a, b;
};

bool reduces(Collective op) { return op == Collective::all_reduce || op == Collective::reduce_scatter; }

// The rows of the samples of `op`, or (op = nullopt) of the collectives that do not reduce.
std::vector<Row> rows_of(const std::vector<CommSample>& samples, std::optional<Collective> op) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Row> rows;
  for (const auto& s : samples)
    if (s.seconds > 0 && (op ? s.op == *op : !reduces(s.op)))
      rows.push_back({model_seconds(s, {1.0, 0.0}) / s.seconds, model_seconds(s, {inf, 1.0, inf, inf}) / s.seconds});
  return rows;
}

// The bandwidth 1/x with x minimising sum (a x + b latency - 1)^2 at a given latency; 0 without rows.
double bandwidth_at(const std::vector<Row>& rows, double latency) {
  double aa = 0, ar = 0;
  for (const auto& r : rows) aa += r.a * r.a, ar += r.a * (1 - r.b * latency);
  return aa > 0 && ar > 0 ? aa / ar : 0.0;
}

Link fit_rows(const std::vector<Row>& rows) {
  double aa = 0, ab = 0, bb = 0, at = 0, bt = 0;
  for (const auto& r : rows) aa += r.a * r.a, ab += r.a * r.b, bb += r.b * r.b, at += r.a, bt += r.b;
  const double det = aa * bb - ab * ab;
  double inv_bw = det > 0 ? (at * bb - bt * ab) / det : 0, latency = det > 0 ? (aa * bt - ab * at) / det : 0;
  if (latency < 0 || !(det > 0)) latency = 0, inv_bw = aa > 0 ? at / aa : 0;  // refit without latency
  if (!(inv_bw > 0) || !std::isfinite(inv_bw))
    throw UserError("dtrain calibrate: the collective timings do not determine a bandwidth; measure larger messages");
  return {1.0 / inv_bw, latency};
}

}  // namespace

Link fit_link(const std::vector<CommSample>& samples) {
  const std::vector<Row> others = rows_of(samples, std::nullopt);
  if (others.empty()) {  // only reducing collectives timed: they are the link
    std::vector<Row> all;
    for (auto op : {Collective::all_reduce, Collective::reduce_scatter}) {
      const auto rows = rows_of(samples, op);
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return fit_rows(all);
  }
  Link link = fit_rows(others);
  // At the link's latency; where noisy timings (a loaded machine) leave a reduction's time below that
  // latency, with none: its bandwidth then absorbs the latency, a slower link but a measured one.
  const auto reducing_bandwidth = [&](Collective op) {
    const std::vector<Row> rows = rows_of(samples, op);
    const double at_latency = bandwidth_at(rows, link.latency);
    return at_latency > 0 ? at_latency : bandwidth_at(rows, 0.0);
  };
  link.all_reduce_bandwidth = reducing_bandwidth(Collective::all_reduce);
  link.reduce_scatter_bandwidth = reducing_bandwidth(Collective::reduce_scatter);
  return link;
}

}  // namespace dtrain
