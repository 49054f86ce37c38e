// Fuzz target: a cluster description (dtrain plan --cluster FILE), parsed as the planner parses it,
// then its efficiency curves asked at a few GEMM sizes and widths as the cost model asks them.
#include "fuzz/fuzz_target.hpp"
#include "plan/cluster.hpp"

DTRAIN_FUZZ_TARGET(cluster_description) {
  const dtrain::ClusterSpec c =
      dtrain::parse_cluster(std::string(reinterpret_cast<const char*>(data), size), "fuzz-cluster.ini");
  for (double flops : {1e3, 1e9, 1e15})
    for (double width : {16.0, 768.0, 1e5}) (void)c.efficiency(flops, width);
  (void)c.efficiency(1e9);
}
