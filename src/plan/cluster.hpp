// A cluster description: what the planner's cost model knows of the machines (nodes, devices per
// node, each device's peak FLOP/s per precision, its memory and memory bandwidth, the achieved GEMM
// efficiency by GEMM size, and the intra- and inter-node links). Read from an INI file with one
// [cluster] section (inputs/clusters/ holds examples); `format_cluster` writes the same keys back, so
// a measuring tool can produce a file the planner reads. Pure: text in, value out.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/choices.hpp"

namespace dtrain {

struct Link {
  double bandwidth = 0;            // bytes/s one device can send (one direction)
  double latency = 0;              // seconds per message
  // Bytes/s the reducing collectives' formulas see where they differ from the link's (an MPI that sums
  // on the host, or picks a slower algorithm; in-network reduction); 0: bandwidth.
  double all_reduce_bandwidth = 0;
  double reduce_scatter_bandwidth = 0;
  double all_reduce_rate() const { return all_reduce_bandwidth > 0 ? all_reduce_bandwidth : bandwidth; }
  double reduce_scatter_rate() const { return reduce_scatter_bandwidth > 0 ? reduce_scatter_bandwidth : bandwidth; }
};

struct ClusterSpec {
  std::string name;
  ComputeDevice device = ComputeDevice::cuda;  // what a rank computes on (system.device)
  int nodes = 1;
  int devices_per_node = 1;                    // ranks per node
  double peak_fp32 = 0;                        // dense FLOP/s of one device
  double peak_bf16 = 0;
  double memory = 0;                           // bytes one rank may use
  double memory_bandwidth = 0;                 // bytes/s of one device
  // Bytes/s of the elementwise kernels (norms, residual adds, activations, softmax) as the cost model
  // counts their bytes; 0 when not measured, then the memory bandwidth (kernels limited by memory).
  double elementwise_bandwidth = 0;
  // Bytes/s at which memory given back between uses (ZeRO-2/3's released buckets) is released and
  // taken again: on a host, madvise and zero-filled page faults; 0 when not measured, then the memory
  // bandwidth (a device zeroes it).
  double release_bandwidth = 0;
  // Seconds per causal score (a query-key pair, key at or before the query) of the fused attention,
  // forward and backward together, beyond its GEMMs on the efficiency curves: the softmax, its gradient
  // and the tiles' bookkeeping, which run far below the GEMM rate on a CPU. 0 when not measured (a data
  // sheet): attention is then its GEMMs alone.
  double attention_score_seconds = 0;
  // system.offload_optimizer's rates: bytes/s between a device's memory and the host's (a GPU's PCIe or
  // C2C link, per device) and of the host's memory for the host's AdamW, per rank. 0 when not given: on
  // a cpu cluster the device is the host and both are the memory bandwidth; a GPU cluster must give them
  // to price offload.
  double host_link_bandwidth = 0;
  double host_memory_bandwidth = 0;
  // Achieved share of the peak by FLOPs of one GEMM, ascending in FLOPs; interpolated in log(FLOPs),
  // held constant beyond the ends.
  std::vector<std::pair<double, double>> gemm_efficiency;
  // The same curve per GEMM width (a weight's narrower dimension: the hidden size, a head dim), widths
  // ascending. At equal FLOPs a narrow GEMM runs far below a wide one (on a CPU, 1e6 FLOPs at width 16
  // and at 64: 0.46 and 0.72 of the peak), so one curve over every width mixes them. Empty in a data
  // sheet's description: then gemm_efficiency serves every width.
  std::vector<std::pair<double, std::vector<std::pair<double, double>>>> gemm_efficiency_by_width;
  Link intra_node;                             // between devices of one node
  Link inter_node;                             // per device, between nodes

  int world() const { return nodes * devices_per_node; }
  double elementwise_rate() const { return elementwise_bandwidth > 0 ? elementwise_bandwidth : memory_bandwidth; }
  double released_rate() const { return release_bandwidth > 0 ? release_bandwidth : memory_bandwidth; }
  // UserError naming the missing key for a GPU cluster that does not give it.
  double host_link_rate() const;
  double host_memory_rate() const;
  double peak(Precision p) const { return is_16bit(p) ? peak_bf16 : peak_fp32; }  // fp16 runs at the bf16 tensor-core rate
  double efficiency(double gemm_flops) const;  // gemm_efficiency's curve
  // A GEMM of `gemm_flops` whose weight's narrower dimension is `width`: the curves of the two widths
  // around it at those FLOPs, interpolated in log(width), the end curves held beyond; gemm_efficiency's
  // curve when no curve per width is known.
  double efficiency(double gemm_flops, double width) const;
};

// Parses a description; `name` (the file's path) prefixes every error, which names the key and the fix.
ClusterSpec parse_cluster(const std::string& text, const std::string& name);
// Reads and parses a file (UserError when it cannot be read).
ClusterSpec load_cluster_file(const std::string& path);
// The description as INI text that parse_cluster reads back to the same values.
std::string format_cluster(const ClusterSpec& c);

}  // namespace dtrain
