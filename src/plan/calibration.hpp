// The pure half of `dtrain calibrate`: from measured points to a cluster description's figures.
//   efficiency table  GEMM FLOPs and seconds -> FLOPs:efficiency pairs (the rate over the fastest
//                     rate measured, which is the peak), one per FLOPs, ascending
//   link              collective timings -> the bandwidth and latency that the cost model's ring
//                     formulas (plan/collective_cost) fit best: t = a/bandwidth + b*latency, where a
//                     and b are the formula's byte and latency terms; least squares on relative error;
//                     fitted over the collectives that do not reduce; all-reduce and reduce-scatter
//                     then get their own bandwidths at that latency (an MPI summing on the host, or
//                     picking a slower algorithm, is slower than the ring formula at the link's rate)
#pragma once
#include <utility>
#include <vector>

#include "plan/cluster.hpp"

namespace dtrain {

struct GemmSample {
  double flops = 0;
  double seconds = 0;
  double width = 0;  // the weight's narrower dimension (calibrate's GEMMs: rows x c by c x c, width c)
};

// The fastest rate of the samples (FLOP/s).
double peak_rate(const std::vector<GemmSample>& samples);
// FLOPs:efficiency pairs against `peak`, ascending in FLOPs; samples of equal FLOPs are averaged.
std::vector<std::pair<double, double>> efficiency_table(const std::vector<GemmSample>& samples, double peak);
// The same table per width, widths ascending (ClusterSpec::gemm_efficiency_by_width).
std::vector<std::pair<double, std::vector<std::pair<double, double>>>> efficiency_by_width(const std::vector<GemmSample>& samples,
                                                                                           double peak);

enum class Collective { all_reduce, reduce_scatter, all_gather, send_recv, all_to_all };

struct CommSample {
  Collective op = Collective::all_reduce;
  double bytes = 0;  // the formula's S (collective_cost.hpp)
  long ranks = 2;
  double seconds = 0;
};

// The cost model's time of one sample's collective on `link`.
double model_seconds(const CommSample& s, const Link& link);
// Bandwidth and latency (>= 0) minimising the relative error of model_seconds over the samples (the
// reducing collectives' own bandwidths fitted after, as above).
// UserError when the samples cannot determine a positive bandwidth.
Link fit_link(const std::vector<CommSample>& samples);

}  // namespace dtrain
