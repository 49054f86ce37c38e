// The ring formulas of collective_cost.hpp.
#include "plan/collective_cost.hpp"

namespace dtrain {

Link group_link(const ClusterSpec& c, long stride, long size) {
  const long block = stride * size, node = c.devices_per_node;
  return block <= node && node % block == 0 ? c.intra_node : c.inter_node;
}

double all_reduce_s(double bytes, long n, const Link& l) {
  if (n <= 1) return 0.0;
  return 2.0 * (n - 1) / n * bytes / l.all_reduce_rate() + 2.0 * (n - 1) * l.latency;
}

double all_gather_s(double bytes, long n, const Link& l) {
  if (n <= 1) return 0.0;
  return static_cast<double>(n - 1) / n * bytes / l.bandwidth + (n - 1) * l.latency;
}

double reduce_scatter_s(double bytes, long n, const Link& l) {
  if (n <= 1) return 0.0;
  return static_cast<double>(n - 1) / n * bytes / l.reduce_scatter_rate() + (n - 1) * l.latency;
}

double all_to_all_s(double bytes, long n, const Link& l) { return all_gather_s(bytes, n, l); }

double send_s(double bytes, const Link& l) { return bytes / l.bandwidth + l.latency; }

}  // namespace dtrain
