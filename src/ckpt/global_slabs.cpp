// gather_global_tensors: the runs of global tensors a rank holds, packed slab by slab and gathered on
// rank 0, which puts them in place and hands the slab on.
#include "ckpt/global_slabs.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr std::size_t kMaxSlab = std::size_t{1} << 22;  // elements: 16 MB of fp32
constexpr std::size_t kMinSlab = std::size_t{1} << 16;  // below this, a rank allocates rather than shrink every slab

// Elements [begin, begin + count) of tensor `tensor` (its index in the whole table), held at `values`.
struct Held {
  std::size_t tensor, begin, count;
  const float* values;
};

// What this rank holds of the global tensors, as runs sorted by tensor and position.
std::vector<Held> held_runs(const RankState& st, const TensorTable& whole) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < whole.tensors().size(); ++i) index[whole.tensors()[i].name] = i;
  std::vector<Held> runs;
  for_each_piece(st, [&](int kind, const TensorSpec& t, int, const float* data, std::int64_t flat, std::int64_t count) {
    if (kind != 0) return;
    const auto it = index.find(t.name);
    if (it == index.end()) fatal("gather_global_tensors: '" + t.name + "' is not a tensor of the whole model");
    for_each_run(t, static_cast<long>(flat), static_cast<long>(count), [&](long li, long gi, long len) {
      const float* v = data + (li - flat);
      Held* last = runs.empty() ? nullptr : &runs.back();
      if (last && last->tensor == it->second && last->begin + last->count == static_cast<std::size_t>(gi) && last->values + last->count == v)
        last->count += static_cast<std::size_t>(len);
      else
        runs.push_back({it->second, static_cast<std::size_t>(gi), static_cast<std::size_t>(len), v});
    });
  });
  std::sort(runs.begin(), runs.end(),
            [](const Held& a, const Held& b) { return a.tensor != b.tensor ? a.tensor < b.tensor : a.begin < b.begin; });
  return runs;
}

}  // namespace

void gather_global_tensors(HostComm comm, const RankState& state, const TensorTable& whole, const SlabSink& sink, float* scratch,
                           std::size_t scratch_floats, Watchdog* watchdog) {
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  const std::vector<Held> runs = held_runs(state, whole);
  // One slab size on every rank: what every scratch holds, within bounds, no larger than a tensor.
  std::size_t largest = 1;
  for (const auto& t : whole.tensors()) largest = std::max(largest, t.numel);
  const unsigned long long fits =
      all_reduce(comm, static_cast<unsigned long long>(scratch ? scratch_floats / (root ? 2 : 1) : kMaxSlab), HostOp::min);
  const std::size_t slab = std::min({std::max<std::size_t>(fits, kMinSlab), kMaxSlab, largest});
  const std::size_t need = root ? 2 * slab : slab;
  std::vector<float> own;
  float* buffer = scratch && scratch_floats >= need ? scratch : (own.resize(need), own.data());
  // Rank 0 packs its own values in place: they are the first of the gathered ones.
  float* const packed = buffer;
  float* const assembled = root ? buffer + slab : nullptr;

  std::vector<int> counts(root ? 2 * static_cast<std::size_t>(size) : 0), value_counts, value_offsets, part_counts, part_offsets;
  if (root) value_counts.resize(size), value_offsets.resize(size), part_counts.resize(size), part_offsets.resize(size);
  std::vector<int> parts, all_parts;  // (offset in the slab, length) of every run packed
  std::vector<std::pair<int, int>> order;
  std::string deferred;  // the sink's first error
  std::size_t first = 0;  // the first run not wholly before the current slab
  for (std::size_t ti = 0; ti < whole.tensors().size(); ++ti) {
    const TensorSpec& t = whole.tensors()[ti];
    for (std::size_t s0 = 0; s0 < t.numel; s0 += slab) {
      const std::size_t s1 = std::min(t.numel, s0 + slab);
      while (first < runs.size() && (runs[first].tensor < ti || (runs[first].tensor == ti && runs[first].begin + runs[first].count <= s0)))
        ++first;
      int n = 0;
      parts.clear();
      for (std::size_t k = first; k < runs.size() && runs[k].tensor == ti && runs[k].begin < s1; ++k) {
        const Held& h = runs[k];
        const std::size_t lo = std::max(h.begin, s0), hi = std::min(h.begin + h.count, s1);
        std::copy_n(h.values + (lo - h.begin), hi - lo, packed + n);
        parts.push_back(static_cast<int>(lo - s0));
        parts.push_back(static_cast<int>(hi - lo));
        n += static_cast<int>(hi - lo);
      }
      {  // the slab's gathering, one operation for the watchdog
        const int mine[2] = {n, static_cast<int>(parts.size())};
        auto watched = watch(watchdog, {"gather the final weights", "world", 0, static_cast<long>(sizeof(float) * (s1 - s0))});
        gather(comm, mine, 2, root ? counts.data() : nullptr, 0);
        if (root) {
          int values = 0, lengths = 0;
          for (int r = 0; r < size; ++r) {
            value_counts[r] = counts[2 * r], value_offsets[r] = values, values += counts[2 * r];
            part_counts[r] = counts[2 * r + 1], part_offsets[r] = lengths, lengths += counts[2 * r + 1];
          }
          if (static_cast<std::size_t>(values) != s1 - s0)
            fatal("gather_global_tensors: the ranks hold " + std::to_string(values) + " elements of " + std::to_string(s1 - s0) +
                  " in a slab of '" + t.name + "'");
          all_parts.resize(static_cast<std::size_t>(lengths));
        }
        gather_in_place_on_root(comm, packed, n, packed, value_counts.data(), value_offsets.data(), 0);
        gatherv(comm, parts.data(), mine[1], all_parts.data(), part_counts.data(), part_offsets.data(), 0);
      }
      if (!root) continue;
      // Every element of the slab exactly once: the parts, sorted, must tile it.
      order.clear();
      const float* from = packed;
      for (std::size_t i = 0; i < all_parts.size(); i += 2) {
        std::copy_n(from, all_parts[i + 1], assembled + all_parts[i]);
        from += all_parts[i + 1];
        order.emplace_back(all_parts[i], all_parts[i + 1]);
      }
      std::sort(order.begin(), order.end());
      int next = 0;
      for (const auto& [at, len] : order) next = at == next ? at + len : -1;
      if (static_cast<std::size_t>(next) != s1 - s0) fatal("gather_global_tensors: the ranks' parts of '" + t.name + "' overlap");
      if (!deferred.empty()) continue;
      try {
        sink(t, s0, s1 - s0, assembled);
      } catch (const UserError& e) {
        deferred = e.what();
      }
    }
  }
  collective_check(comm, [&] {
    if (!deferred.empty()) throw UserError(deferred);
  });
}

}  // namespace dtrain
