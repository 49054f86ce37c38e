// Parts of tensors out of checkpoint pieces: CheckpointReader::read_slice maps a slice's elements to
// the pieces that hold them and reads just those (hyperslabs of the 1-D piece datasets); load_slices
// fills a rank's state from any such source, so a resume reads what the rank holds and nothing more.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "ckpt/checkpoint.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"

namespace dtrain {

TensorSpec CheckpointReader::global_geometry(const std::string& name) const {
  TensorSpec t;
  t.name = name;
  const auto shape = global_shape(name);
  t.global_shape.assign(shape.begin(), shape.end());
  t.local_shape = t.global_shape;
  t.local_offset.assign(shape.size(), 0);
  t.numel = 1;
  for (long d : t.global_shape) t.numel *= static_cast<std::size_t>(d);
  return t;
}

std::vector<float> CheckpointReader::global_tensor(const std::string& kind, const std::string& name) const {
  const TensorSpec t = global_geometry(name);
  // The pieces must hold every element (read_slice checks which): a shape attribute larger than what
  // they hold is refused before it sizes the buffer.
  std::size_t held = 0;
  for (const Piece& p : pieces_of(kind, name)) held += static_cast<std::size_t>(p.count);
  if (held < t.numel)
    throw UserError("checkpoint '" + dir_ + "': the pieces of " + kind + " of tensor '" + name + "' hold " + std::to_string(held) +
                    " elements of its " + std::to_string(t.numel) + " (corrupt or incomplete)");
  std::vector<float> values(t.numel);
  read_slice(kind, t, 0, t.numel, values.data());
  return values;
}

void CheckpointReader::read_slice(const std::string& kind, const TensorSpec& t, std::size_t begin, std::size_t count, float* out,
                                  RunningHashes* running) const {
  if (count == 0) return;
  const std::vector<Piece>& pieces = pieces_of(kind, t.name);
  const std::vector<long>& shape = t.global_shape;
  for (const Piece& p : pieces)
    if (std::vector<long>(p.global_shape.begin(), p.global_shape.end()) != shape)
      throw UserError("checkpoint '" + dir_ + "': " + kind + " of tensor '" + t.name + "' has another shape than the model of the input file");
  // The spans to read of every piece, found run by run: a run is elements [c, c + len) of one row of
  // the global tensor, which a piece's slice meets in one column interval.
  std::vector<std::vector<h5::Span>> spans(pieces.size());
  const std::size_t dims = shape.size();
  const long row = shape.back();
  std::vector<long> index(dims, 0);  // the run's row, as indices of the leading dimensions
  for_each_run(t, static_cast<long>(begin), static_cast<long>(count), [&](long li, long gi, long len) {
    long rest = gi / row;
    const long c = gi % row;
    for (std::size_t d = dims - 1; d-- > 0;) index[d] = rest % shape[d], rest /= shape[d];
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      const Piece& p = pieces[k];
      if (gi + len <= p.global_first || gi >= p.global_end) continue;
      std::int64_t local_row = 0;
      bool inside = true;
      for (std::size_t d = 0; d + 1 < dims && inside; ++d) {
        const std::int64_t i = index[d] - p.local_offset[d];
        inside = i >= 0 && i < p.local_shape[d];
        local_row = local_row * p.local_shape[d] + i;
      }
      const std::int64_t left = p.local_offset.back(), width = p.local_shape.back();
      const std::int64_t lo = std::max<std::int64_t>(c, left), hi = std::min<std::int64_t>(c + len, left + width);
      if (!inside || lo >= hi) continue;
      // The piece's own flat indices of those columns, cut to the elements it holds.
      const std::int64_t first = local_row * width + (lo - left);
      const std::int64_t a = std::max(first, p.flat_begin), b = std::min(first + (hi - lo), p.flat_begin + p.count);
      if (a >= b) continue;
      const std::int64_t to = (li - static_cast<long>(begin)) + (lo - c) + (a - first);
      auto& v = spans[k];
      if (!v.empty() && v.back().at + v.back().count == a - p.flat_begin && v.back().to + v.back().count == to)
        v.back().count += b - a;
      else
        v.push_back({a - p.flat_begin, b - a, to});
    }
  });
  // Every element exactly once, before anything is read.
  std::vector<std::pair<std::int64_t, std::int64_t>> filled;
  for (const auto& v : spans)
    for (const auto& s : v) filled.emplace_back(s.to, s.count);
  std::sort(filled.begin(), filled.end());
  std::int64_t next = 0;
  for (const auto& [to, n] : filled) {
    if (to < next) throw UserError("checkpoint '" + dir_ + "': pieces of " + kind + " of tensor '" + t.name + "' overlap (corrupt)");
    if (to > next) break;
    next = to + n;
  }
  if (next != static_cast<std::int64_t>(count))
    throw UserError("checkpoint '" + dir_ + "' lacks part of " + kind + " of tensor '" + t.name + "' (a shard is missing)");
  RunningHashes local;
  RunningHashes& hashes = running ? *running : local;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    if (spans[k].empty()) continue;
    const Piece& p = pieces[k];
    open(p.file).read_spans(p.dataset, spans[k], out);
    RunningHashes::State& h = hashes.pieces[&p];
    for (const auto& s : spans[k]) {
      if (h.next != s.at) {
        h.next = -1;  // not in order: this piece is not checked here
        break;
      }
      h.hasher.update(out + s.to, static_cast<std::size_t>(s.count) * sizeof(float));
      h.next += s.count;
    }
    if (h.next == p.count) {
      h.next = -1;
      if (h.hasher.digest() != p.hash)
        throw UserError("checkpoint shard '" + p.file + "': dataset " + p.dataset + " fails its checksum (corrupt)");
    }
  }
}

namespace {

// Calls fn(lo, hi, packed) for each part [lo, hi) of tensor t (arena indices) inside one of `ranges`;
// packed: where lo falls in the ranges laid back to back.
template <typename Fn>
void overlaps(const TensorSpec& t, const std::vector<ArenaRange>& ranges, Fn fn) {
  std::size_t packed = 0;
  for (const auto& r : ranges) {
    const std::size_t lo = std::max(r.begin, t.offset), hi = std::min(r.end, t.offset + t.numel);
    if (lo < hi) fn(lo, hi, packed + (lo - r.begin));
    packed += r.end - r.begin;
  }
}

}  // namespace

void load_slices(RankState& st, const SliceSource& source) {
  const RankPlan& plan = *st.plan;
  const std::vector<ArenaRange> params = plan.param_ranges();
  for (const TensorSpec& t : plan.table.tensors()) {
    overlaps(t, params, [&](std::size_t lo, std::size_t hi, std::size_t) { source(0, t, lo - t.offset, hi - lo, st.params + lo); });
    // The parameter ranges hold the optimizer ranges: the master weights are the parameters just read.
    overlaps(t, plan.optimizer_ranges, [&](std::size_t lo, std::size_t hi, std::size_t at) {
      if (st.master) std::copy_n(st.params + lo, hi - lo, st.master + at);
      for (int k = 0; k < 2; ++k)
        if (st.moments[k]) source(1 + k, t, lo - t.offset, hi - lo, st.moments[k] + at);
    });
  }
}

void load_rank_state(const CheckpointReader& reader, RankState& st) {
  for (const auto& t : st.plan->table.tensors()) {
    const auto shape = reader.global_shape(t.name);
    if (std::vector<long>(shape.begin(), shape.end()) != t.global_shape)
      throw UserError("checkpoint '" + reader.dir() + "': tensor '" + t.name + "' has another shape than the model of the input file");
  }
  load_slices(st, [&](int kind, const TensorSpec& t, std::size_t begin, std::size_t count, float* out) {
    reader.read_slice(kPieceKinds[kind], t, begin, count, out);
  });
}

std::size_t rank_state_bytes(const RankState& st) {
  const RankPlan& plan = *st.plan;
  const std::size_t per_optimizer_element = (st.master ? 1 : 0) + (st.moments[0] ? 1 : 0) + (st.moments[1] ? 1 : 0);
  const std::vector<ArenaRange> params = plan.param_ranges();
  std::size_t n = 0;
  for (const TensorSpec& t : plan.table.tensors()) {
    overlaps(t, params, [&](std::size_t lo, std::size_t hi, std::size_t) { n += hi - lo; });
    overlaps(t, plan.optimizer_ranges, [&](std::size_t lo, std::size_t hi, std::size_t) { n += per_optimizer_element * (hi - lo); });
  }
  return n * sizeof(float);
}

ReadReport read_report(HostComm comm, std::uint64_t bytes_read, std::size_t state_bytes) {
  ReadReport r;
  double read = static_cast<double>(bytes_read), state = static_cast<double>(state_bytes);
  r.total_bytes = all_reduce(comm, read, HostOp::sum);
  const int worst = all_reduce_loc(comm, state > 0 ? read / state : (read > 0 ? 1e300 : 0.0), HostOp::max).second;
  double pair[2] = {read, state};
  broadcast(comm, pair, 2, worst);
  r.worst_rank = worst, r.worst_read = pair[0], r.worst_state = pair[1];
  return r;
}

std::string ReadReport::text() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "read %.1f MB of datasets (rank %d the most for its state: %.3f MB for %.3f MB, %.2fx)",
                total_bytes / 1e6, worst_rank, worst_read / 1e6, worst_state / 1e6,
                worst_state > 0 ? worst_read / worst_state : 0.0);
  return buf;
}

}  // namespace dtrain
