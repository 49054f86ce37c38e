// Time of one collective on a ring of n ranks (NCCL's and MPI's large-message algorithms), and the
// link a group of ranks uses: a group whose ranks sit in one node talks over the intra-node link,
// any other over the inter-node link (whose per-device bandwidth bounds the ring). Pure arithmetic.
//   all-reduce of S bytes:                  2(n-1)/n * S / bw' + 2(n-1) * latency (bw': all_reduce_rate)
//   all-gather (S = whole):                  (n-1)/n * S / bw + (n-1) * latency
//   reduce-scatter (S = whole):              (n-1)/n * S / bw'' + (n-1) * latency (bw'': reduce_scatter_rate)
//   all-to-all (S = what one rank sends):    (n-1)/n * S / bw + (n-1) * latency
//   point-to-point of S bytes:              S / bw + latency
#pragma once
#include "plan/cluster.hpp"

namespace dtrain {

// The link of a group of `size` ranks `stride` apart in rank order (groups are aligned blocks of
// stride * size ranks): intra-node when that block lies inside one node.
Link group_link(const ClusterSpec& cluster, long stride, long size);

double all_reduce_s(double bytes, long n, const Link& link);
double all_gather_s(double bytes, long n, const Link& link);
double reduce_scatter_s(double bytes, long n, const Link& link);
double all_to_all_s(double bytes, long n, const Link& link);
double send_s(double bytes, const Link& link);

}  // namespace dtrain
