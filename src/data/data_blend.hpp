// DataBlend: the token sources of one data stream ("train" or "val") and the choice of the source of
// each sample. data.path names one prefix or a blend in Megatron's syntax ("0.7 A 0.3 B"); the choice is
// a pure function of (seed, stream, step, sample), so every layout and every resume sees the same data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_source.hpp"

namespace dtrain {

struct BlendPart {
  double weight = 1.0;  // normalised: the parts' weights sum to 1
  std::string prefix;
};

// Parses data.path: "PREFIX" (weight 1) or "W1 PREFIX1 W2 PREFIX2 ..." (whitespace-separated, weights
// finite and > 0). A UserError quoting the text and saying what is wrong otherwise.
std::vector<BlendPart> parse_blend(const std::string& text);

class DataBlend {
 public:
  // sources[i] is drawn with probability weights[i] (normalised); at least one source.
  DataBlend(std::vector<std::unique_ptr<TokenSource>> sources, const std::vector<double>& weights);

  // The source of global sample j of step s: the point
  //   u = hash(key_of(seed, stream + "/blend"), 0) + s * frac(sqrt 2) * 2^64 + j * frac(1/phi) * 2^64  (mod 2^64)
  // falls in source i's share of [0, 2^64) (cumulative weights). Along j (a global batch) and along s
  // (batches of one) u is a Weyl sequence of low discrepancy, so any run of samples holds each source in
  // its proportion within a few samples: no binomial noise, unlike a hash per sample. One source: 0.
  std::size_t choose(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t sample) const;
  // The same with the stream's offset hash(key_of(seed, stream + "/blend"), 0) computed once (per batch).
  static std::uint64_t stream_offset(std::uint64_t seed, const std::string& stream);
  std::size_t choose_at(std::uint64_t offset, std::uint64_t step, std::uint64_t sample) const;

  std::size_t num_sources() const { return sources_.size(); }
  const TokenSource& source(std::size_t i) const { return *sources_[i]; }

 private:
  std::vector<std::unique_ptr<TokenSource>> sources_;
  std::vector<std::uint64_t> upper_;  // source i takes u < upper_[i] (and u >= upper_[i-1]); the last takes the rest
};

}  // namespace dtrain
