// Rank <-> coordinates on the (tp, cp, dp, pp) grid, and the groups of each axis. Pure math, no MPI.
//
// The order string lists the axes fastest-varying first (Megatron's convention). With the default
// "tp-cp-dp-pp": rank = tp_rank + tp*(cp_rank + cp*(dp_rank + dp*pp_rank)), so a tensor-parallel group
// is a block of adjacent ranks (inside one node) and pipeline stages are furthest apart.
// Example, 16 ranks, tp=2 pp=4 dp=2: TP groups [0,1] [2,3] ...; DP groups [0,2] [1,3] [4,6] ...;
// PP groups [0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]; embedding groups [0,12] [1,13] ...
//
// Expert parallelism (ep, dividing dp) is carved from the data-parallel ranks as Megatron does (its
// order tp-cp-ep-dp-pp): ep consecutive data-parallel ranks form an expert-parallel (EP) group, EP rank
// = dp_rank % ep. The expert-data-parallel (EDP) group holds the replicas of one EP rank's experts: the
// ranks with the same tp, pp and EP rank, varying cp and dp / ep (size cp x dp / ep), ordered by EDP
// rank = cp_rank + cp x (dp_rank / ep). Example, 8 ranks, dp=8 ep=4: EP groups [0,1,2,3] [4,5,6,7],
// EDP groups [0,4] [1,5] [2,6] [3,7].
#pragma once
#include <array>
#include <string>
#include <vector>

#include "config/parallel_layout.hpp"

namespace dtrain {

class RankLayout {
 public:
  // Throws UserError when the order string is not a permutation of tp, cp, dp, pp.
  RankLayout(ParallelLayout sizes, const std::string& order);

  const ParallelLayout& sizes() const { return sizes_; }
  const std::string& order() const { return order_; }
  int world_size() const { return sizes_.world(); }

  Coords coords_of(int rank) const;
  int rank_of(const Coords& c) const;

  // The ranks that share every coordinate with `rank` except `axis`, ordered by their `axis` coordinate.
  std::vector<int> group_of(Axis axis, int rank) const;
  // All groups of an axis, ordered by their smallest rank.
  std::vector<std::vector<int>> groups(Axis axis) const;
  // Index of rank's group among groups(axis) (the colour of its communicator split).
  int group_index(Axis axis, int rank) const;

  // Expert parallelism (see the top of this file).
  std::vector<int> ep_group_of(int rank) const;   // ordered by EP rank
  std::vector<int> edp_group_of(int rank) const;  // ordered by EDP rank
  std::vector<std::vector<int>> ep_groups() const;
  std::vector<std::vector<int>> edp_groups() const;

  // First and last pipeline stage of rank's pipeline (one rank when pp == 1); they hold the tied
  // token embedding. Empty when rank is on neither end.
  std::vector<int> embedding_group_of(int rank) const;
  std::vector<std::vector<int>> embedding_groups() const;

  // The ranks that hold the same parameters as `rank` (same tp and pp coordinates): its data- and
  // context-parallel ranks, ordered by replica index dp * cp + cp (context fastest). Gradients are
  // reduced, and the distributed optimizer shards, over this group; it is the dp group when cp = 1.
  std::vector<int> replica_group_of(int rank) const;
  int replica_index(int rank) const;        // rank's place in replica_group_of(rank)
  int replica_group_index(int rank) const;  // colour of its communicator split: one per (tp, pp)

 private:
  // Every distinct group group_of(rank) gives, ordered by smallest rank.
  template <typename GroupOf>
  std::vector<std::vector<int>> distinct(GroupOf group_of) const;

  ParallelLayout sizes_;
  std::string order_;
  std::array<Axis, 4> axes_{};    // fastest first
  std::array<int, 4> stride_{};   // indexed by Axis
};

}  // namespace dtrain
