// Blend parsing (Megatron's "weight prefix" pairs) and the layout-independent choice of a sample's source.
#include "data/data_blend.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "common/counter_rng.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // frac(1 / golden ratio) x 2^64
constexpr std::uint64_t kSqrt2 = 0x6A09E667F3BCC908ull;   // frac(sqrt 2) x 2^64

[[noreturn]] void bad_blend(const std::string& text, const std::string& problem) {
  throw UserError("data.path='" + text + "': " + problem +
                  "; give one prefix, or a blend of weights and prefixes such as \"0.7 PREFIX_A 0.3 PREFIX_B\"");
}

}  // namespace

std::vector<BlendPart> parse_blend(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) bad_blend(text, "no prefix");
  if (words.size() == 1) return {BlendPart{1.0, words[0]}};
  if (words.size() % 2 != 0) {
    bad_blend(text, std::to_string(words.size()) + " words, an odd count: each prefix needs a weight before it");
  }
  std::vector<BlendPart> parts;
  double total = 0.0;
  for (std::size_t i = 0; i < words.size(); i += 2) {
    char* end = nullptr;
    const double w = std::strtod(words[i].c_str(), &end);
    if (*end != '\0' || !std::isfinite(w)) bad_blend(text, "weight '" + words[i] + "' is not a number");
    if (!(w > 0)) bad_blend(text, "weight " + words[i] + " of '" + words[i + 1] + "' must be > 0");
    parts.push_back({w, words[i + 1]});
    total += w;
  }
  for (BlendPart& p : parts) p.weight /= total;
  return parts;
}

DataBlend::DataBlend(std::vector<std::unique_ptr<TokenSource>> sources, const std::vector<double>& weights)
    : sources_(std::move(sources)) {
  if (sources_.empty() || weights.size() != sources_.size()) {
    throw std::invalid_argument("DataBlend: needs one weight per source and at least one source");
  }
  double total = 0.0;
  for (double w : weights) total += w;
  double cumulative = 0.0;
  for (std::size_t i = 0; i + 1 < weights.size(); ++i) {
    cumulative += weights[i] / total;
    const long double bound = static_cast<long double>(cumulative) * 18446744073709551616.0L;  // x 2^64
    upper_.push_back(bound >= 18446744073709551615.0L ? ~std::uint64_t{0} : static_cast<std::uint64_t>(bound));
  }
}

std::uint64_t DataBlend::stream_offset(std::uint64_t seed, const std::string& stream) {
  return rng::hash(rng::key_of(seed, stream + "/blend"), 0);
}

std::size_t DataBlend::choose(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t sample) const {
  return choose_at(stream_offset(seed, stream), step, sample);
}

std::size_t DataBlend::choose_at(std::uint64_t offset, std::uint64_t step, std::uint64_t sample) const {
  if (upper_.empty()) return 0;
  const std::uint64_t u = offset + step * kSqrt2 + sample * kGolden;
  std::size_t i = 0;
  while (i < upper_.size() && u >= upper_[i]) ++i;
  return i;
}

}  // namespace dtrain
