// Rank <-> coordinate arithmetic for the parallel grid (see rank_layout.hpp for the convention).
#include "plan/rank_layout.hpp"

#include <algorithm>
#include <sstream>

#include "common/error.hpp"

namespace dtrain {

RankLayout::RankLayout(ParallelLayout sizes, const std::string& order) : sizes_(sizes), order_(order) {
  std::vector<std::string> tokens;
  std::stringstream ss(order);
  for (std::string tok; std::getline(ss, tok, '-');) tokens.push_back(tok);
  const std::string fix = "system.rank_order='" + order +
                          "' must list tp, cp, dp and pp once each, fastest first, e.g. tp-cp-dp-pp";
  if (tokens.size() != 4) throw UserError(fix);
  bool seen[4] = {false, false, false, false};
  for (std::size_t i = 0; i < 4; ++i) {
    auto it = std::find_if(kAllAxes.begin(), kAllAxes.end(), [&](Axis a) { return tokens[i] == axis_name(a); });
    if (it == kAllAxes.end() || seen[static_cast<int>(*it)]) throw UserError(fix);
    seen[static_cast<int>(*it)] = true;
    axes_[i] = *it;
  }
  int stride = 1;
  for (Axis a : axes_) {
    stride_[static_cast<int>(a)] = stride;
    stride *= sizes_[a];
  }
}

Coords RankLayout::coords_of(int rank) const {
  Coords c;
  for (Axis a : axes_) {
    c[a] = rank % sizes_[a];
    rank /= sizes_[a];
  }
  return c;
}

int RankLayout::rank_of(const Coords& c) const {
  int rank = 0;
  for (Axis a : kAllAxes) rank += c[a] * stride_[static_cast<int>(a)];
  return rank;
}

std::vector<int> RankLayout::group_of(Axis axis, int rank) const {
  Coords c = coords_of(rank);
  std::vector<int> g;
  for (int i = 0; i < sizes_[axis]; ++i) {
    c[axis] = i;
    g.push_back(rank_of(c));
  }
  return g;
}

template <typename GroupOf>
std::vector<std::vector<int>> RankLayout::distinct(GroupOf group_of) const {
  std::vector<std::vector<int>> all;
  for (int r = 0; r < world_size(); ++r) {
    auto g = group_of(r);
    if (*std::min_element(g.begin(), g.end()) == r) all.push_back(std::move(g));
  }
  return all;
}

std::vector<std::vector<int>> RankLayout::groups(Axis axis) const {
  return distinct([&](int r) { return group_of(axis, r); });
}

std::vector<int> RankLayout::ep_group_of(int rank) const {
  Coords c = coords_of(rank);
  const int first = c.dp - sizes_.ep_rank(c);
  std::vector<int> g;
  for (int i = 0; i < sizes_.ep; ++i) {
    c.dp = first + i;
    g.push_back(rank_of(c));
  }
  return g;
}

std::vector<int> RankLayout::edp_group_of(int rank) const {
  Coords c = coords_of(rank);
  const int e = sizes_.ep_rank(c);
  std::vector<int> g;
  for (int j = 0; j < sizes_.dp / sizes_.ep; ++j)
    for (int k = 0; k < sizes_.cp; ++k) {  // EDP rank k + cp * j
      c.cp = k;
      c.dp = j * sizes_.ep + e;
      g.push_back(rank_of(c));
    }
  return g;
}

std::vector<std::vector<int>> RankLayout::ep_groups() const {
  return distinct([&](int r) { return ep_group_of(r); });
}

std::vector<std::vector<int>> RankLayout::edp_groups() const {
  return distinct([&](int r) { return edp_group_of(r); });
}

int RankLayout::group_index(Axis axis, int rank) const {
  const auto g = group_of(axis, rank);
  const int lowest = *std::min_element(g.begin(), g.end());
  const auto all = groups(axis);
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].front() == lowest || *std::min_element(all[i].begin(), all[i].end()) == lowest)
      return static_cast<int>(i);
  return -1;
}

std::vector<int> RankLayout::embedding_group_of(int rank) const {
  const auto pipe = group_of(Axis::pp, rank);
  const int stage = coords_of(rank).pp;
  if (stage != 0 && stage != sizes_.pp - 1) return {};
  if (pipe.size() == 1) return {pipe.front()};
  return {pipe.front(), pipe.back()};
}

std::vector<std::vector<int>> RankLayout::embedding_groups() const {
  std::vector<std::vector<int>> all;
  for (const auto& pipe : groups(Axis::pp)) all.push_back(embedding_group_of(pipe.front()));
  return all;
}

std::vector<int> RankLayout::replica_group_of(int rank) const {
  Coords c = coords_of(rank);
  std::vector<int> g;
  for (int dp = 0; dp < sizes_.dp; ++dp)
    for (int cp = 0; cp < sizes_.cp; ++cp) {
      c.dp = dp, c.cp = cp;
      g.push_back(rank_of(c));
    }
  return g;
}

int RankLayout::replica_index(int rank) const { return sizes_.replica(coords_of(rank)); }

int RankLayout::replica_group_index(int rank) const {
  const Coords c = coords_of(rank);
  return c.pp * sizes_.tp + c.tp;
}

}  // namespace dtrain
