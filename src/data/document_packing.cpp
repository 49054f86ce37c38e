// PackedDocuments: the documents found by their end-of-document tokens, split where longer than a
// window, and placed best fit decreasing.
#include "data/document_packing.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "common/error.hpp"

namespace dtrain {

PackedDocuments::PackedDocuments(const TokenSource& source, int eod, int capacity) : source_(source), eod_(eod), capacity_(capacity) {
  if (capacity < 2) fatal("PackedDocuments: a window must hold at least 2 tokens");
  // The documents: [start, end) ending after an end-of-document token; the stream's tail may lack one.
  std::vector<Piece> shared;   // pieces to pack together (each ends with an end-of-document token)
  std::vector<Piece> alone;    // pieces that fill a window of their own
  constexpr int kChunk = 1 << 16;
  std::vector<int> chunk(kChunk);
  const auto add_document = [&](std::uint64_t start, std::uint64_t end, bool closed) {
    ++documents_;
    std::uint64_t at = start;
    for (; end - at > static_cast<std::uint64_t>(capacity_); at += static_cast<std::uint64_t>(capacity_))
      alone.push_back({at, static_cast<std::uint32_t>(capacity_)});
    if (at < end) (closed ? shared : alone).push_back({at, static_cast<std::uint32_t>(end - at)});
  };
  std::uint64_t start = 0;
  for (std::uint64_t at = 0; at < source.size(); at += kChunk) {
    const int n = static_cast<int>(std::min<std::uint64_t>(kChunk, source.size() - at));
    source.read(at, n, chunk.data());
    for (int i = 0; i < n; ++i)
      if (chunk[static_cast<std::size_t>(i)] == eod) {
        add_document(start, at + i + 1, true);
        start = at + i + 1;
      }
  }
  if (start < source.size()) add_document(start, source.size(), false);
  tokens_ = source.size();

  // Best fit decreasing: the longest piece first (ties: the earlier one), into the bin with the least
  // room that holds it (ties: the earlier bin).
  std::vector<std::size_t> order(shared.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return shared[a].length > shared[b].length; });
  std::vector<std::vector<Piece>> bins;
  std::set<std::pair<std::uint32_t, std::size_t>> room;  // (free tokens, bin)
  for (const std::size_t i : order) {
    const Piece& p = shared[i];
    auto it = room.lower_bound({p.length, 0});
    std::size_t bin;
    std::uint32_t free;
    if (it == room.end()) {
      bin = bins.size();
      bins.emplace_back();
      free = static_cast<std::uint32_t>(capacity_);
    } else {
      bin = it->second, free = it->first;
      room.erase(it);
    }
    bins[bin].push_back(p);
    if (free > p.length) room.insert({free - p.length, bin});
  }
  for (const Piece& p : alone) bins.push_back({p});
  for (const auto& bin : bins) {
    pieces_.insert(pieces_.end(), bin.begin(), bin.end());
    bin_begin_.push_back(pieces_.size());
  }
}

double PackedDocuments::padding() const {
  const double held = static_cast<double>(num_bins()) * capacity_;
  return held > 0 ? 1.0 - static_cast<double>(tokens_) / held : 0.0;
}

void PackedDocuments::read(std::uint64_t b, int* tokens, std::uint8_t* mask) const {
  int at = 0;
  for (std::uint64_t i = bin_begin_[b]; i < bin_begin_[b + 1]; ++i) {
    const Piece& p = pieces_[i];
    source_.read(p.start, static_cast<int>(p.length), tokens + at);
    source_.read_loss_mask(p.start, static_cast<int>(p.length), mask + at);
    at += static_cast<int>(p.length);
  }
  std::fill(tokens + at, tokens + capacity_, eod_);  // padding: end-of-document tokens, never trained on
  std::fill(mask + at, mask + capacity_, std::uint8_t{0});
}

}  // namespace dtrain
