// Samples of fine-tuning data and packed documents: the loss mask, document starts and position ids
// SampleReader derives from the end-of-document token, written out by hand from Megatron's
// get_ltor_masks_and_position_ids; best-fit packing of whole documents; and loss mask files refused
// when they do not belong to their tokens (dtrain format and Megatron format).
#include <catch2/catch.hpp>

#include "support/scratch_files.hpp"
#include "support/user_error.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "data/data_blend.hpp"
#include "data/document_packing.hpp"
#include "data/loss_mask_file.hpp"
#include "data/megatron_dataset.hpp"
#include "data/megatron_writer.hpp"
#include "data/sample_reader.hpp"
#include "data/token_file.hpp"

using namespace dtrain;
using testing::contains;
using testing::error_of;
using testing::TempDir;

namespace {

constexpr int E = 9;  // the end-of-document token of these tests

// Tokens and a loss mask in memory.
class MemorySource : public TokenSource {
 public:
  MemorySource(std::vector<int> tokens, std::vector<std::uint8_t> mask) : tokens_(std::move(tokens)), mask_(std::move(mask)) {}
  std::uint64_t size() const override { return tokens_.size(); }
  void read(std::uint64_t start, int len, int* out) const override { std::copy_n(tokens_.begin() + static_cast<long>(start), len, out); }
  bool has_loss_mask() const override { return !mask_.empty(); }
  void read_loss_mask(std::uint64_t start, int len, std::uint8_t* out) const override {
    if (mask_.empty()) return TokenSource::read_loss_mask(start, len, out);
    std::copy_n(mask_.begin() + static_cast<long>(start), len, out);
  }

 private:
  std::vector<int> tokens_;
  std::vector<std::uint8_t> mask_;
};

DataBlend blend_of(std::vector<int> tokens, std::vector<std::uint8_t> mask = {}) {
  std::vector<std::unique_ptr<TokenSource>> sources;
  sources.push_back(std::make_unique<MemorySource>(std::move(tokens), std::move(mask)));
  return DataBlend(std::move(sources), {1.0});
}

}  // namespace

TEST_CASE("a window's loss mask, document starts and position ids follow its end-of-document tokens", "[data][documents]") {
  // One window (the stream is seq_length + 1 tokens: the only start is 0): documents "1 2 E", "3 E",
  // "4 5 6 E", "7". The data's mask trains on 2, E, E, 5, 6.
  const std::vector<int> stream = {1, 2, E, 3, E, 4, 5, 6, E, 7};
  const std::vector<std::uint8_t> mask = {0, 1, 1, 0, 1, 0, 1, 1, 0, 0};
  const DataBlend blend = blend_of(stream, mask);
  SampleRules rules;
  rules.seq_length = 9, rules.eod = E;
  rules.reset_position_ids = rules.reset_attention_mask = rules.eod_mask_loss = true;
  const SampleReader reader(blend, rules);
  CHECK(reader.has_loss_mask());
  std::vector<int> in(9), tg(9), ds(9), pos(9);
  std::vector<float> lm(9);
  const std::uint64_t counted = reader.fill(7, "train", 3, 0, 1, {in.data(), tg.data(), lm.data(), ds.data(), pos.data()});
  CHECK(in == std::vector<int>{1, 2, E, 3, E, 4, 5, 6, E});
  CHECK(tg == std::vector<int>{2, E, 3, E, 4, 5, 6, E, 7});
  // Megatron: a document starts after each E of the inputs; positions count from it.
  CHECK(ds == std::vector<int>{0, 0, 0, 3, 3, 5, 5, 5, 5});
  CHECK(pos == std::vector<int>{0, 1, 2, 0, 1, 0, 1, 2, 3});
  // Target t counts when the data's mask trains on token t + 1 and input t is not E.
  CHECK(lm == std::vector<float>{1, 1, 0, 1, 0, 1, 1, 0, 0});
  CHECK(counted == 5);
  // Without eod_mask_loss the E inputs' targets count where the data's mask says so.
  rules.eod_mask_loss = false;
  const SampleReader plain(blend, rules);
  plain.fill(7, "train", 3, 0, 1, {in.data(), tg.data(), lm.data(), nullptr, nullptr});
  CHECK(lm == std::vector<float>{1, 1, 0, 1, 0, 1, 1, 0, 0});  // the E inputs here predict masked tokens anyway
  // No rule and no mask: plain windows, nothing extra.
  const DataBlend unmasked = blend_of(stream);
  SampleRules none;
  none.seq_length = 9;
  const SampleReader windows(unmasked, none);
  CHECK(!windows.has_loss_mask());
  CHECK(windows.fill(7, "train", 3, 0, 1, {in.data(), tg.data(), nullptr, nullptr, nullptr}) == 9);
}

TEST_CASE("documents packing needs an end-of-document token", "[data][documents]") {
  const DataBlend blend = blend_of({1, 2, 3, 4});
  SampleRules rules;
  rules.seq_length = 3, rules.pack = true;
  CHECK(contains(error_of([&] { SampleReader r(blend, rules); }), "end-of-document token, which data.tokenizer lacks"));
}

TEST_CASE("packing places whole documents best fit, longest first, the padding masked", "[data][documents]") {
  // Documents of 7, 3, 5, 2 and 6 tokens (each ending with E), windows of 8: 7 opens bin 0 (1 free), 6
  // bin 1 (2 free), 5 bin 2 (3 free), 3 the fullest bin it fits, bin 2, and 2 bin 1: three full bins
  // but for bin 0's one token of padding.
  std::vector<int> tokens;
  std::vector<std::uint8_t> mask;
  int next = 10;
  std::map<int, int> length_of;  // a document's first token -> its length
  for (const int n : {7, 3, 5, 2, 6}) {
    length_of[next] = n;
    for (int i = 0; i + 1 < n; ++i) tokens.push_back(next++), mask.push_back(1);
    tokens.push_back(E), mask.push_back(1);
  }
  const MemorySource source(tokens, mask);
  const PackedDocuments packed(source, E, 8);
  REQUIRE(packed.num_bins() == 3);
  CHECK(packed.num_documents() == 5);
  CHECK(packed.padding() == Approx(1.0 / 24.0));
  std::vector<std::vector<int>> bins(3, std::vector<int>(8));
  std::vector<std::uint8_t> bin_mask(8);
  std::multiset<int> firsts;
  for (int b = 0; b < 3; ++b) {
    packed.read(static_cast<std::uint64_t>(b), bins[static_cast<std::size_t>(b)].data(), bin_mask.data());
    // Each bin: whole documents (a first token, its successors, then E), then padding E with mask 0.
    const std::vector<int>& t = bins[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < t.size();) {
      if (t[i] == E) {  // padding to the end
        for (std::size_t j = i; j < t.size(); ++j) CHECK((t[j] == E && bin_mask[j] == 0));
        break;
      }
      const int n = length_of.at(t[i]);
      firsts.insert(t[i]);
      for (int k = 0; k + 1 < n; ++k) CHECK(t[i + static_cast<std::size_t>(k)] == t[i] + k);
      CHECK(t[i + static_cast<std::size_t>(n) - 1] == E);
      for (int k = 0; k < n; ++k) CHECK(bin_mask[i + static_cast<std::size_t>(k)] == 1);
      i += static_cast<std::size_t>(n);
    }
  }
  CHECK(firsts.size() == 5);  // every document exactly once
  CHECK(std::set<int>(firsts.begin(), firsts.end()).size() == 5);
  CHECK(bins[0][0] == 10);                          // the 7-token document alone in bin 0
  CHECK((bins[1][0] == 23 && bins[1][6] == 22));  // the 6-token document, then the 2-token one, in bin 1
  // A document longer than a window fills whole windows with its first pieces.
  std::vector<int> long_doc(20);
  for (int i = 0; i < 19; ++i) long_doc[static_cast<std::size_t>(i)] = 100 + i;
  long_doc[19] = E;
  const MemorySource long_source(long_doc, {});
  const PackedDocuments split(long_source, E, 8);
  CHECK(split.num_bins() == 3);  // 8 + 8 + 4
  std::vector<int> w(8);
  split.read(0, w.data(), bin_mask.data());  // the packed rest comes first, the whole windows after
  CHECK(w == std::vector<int>{116, 117, 118, E, E, E, E, E});
}

TEST_CASE("a loss mask file belongs to its token file and nothing else", "[data][documents]") {
  TempDir dir;
  const std::string path = dir.file("sft.train.bin"), mask = loss_mask_path(path);
  CHECK(mask == dir.file("sft.train.lossmask.bin"));
  const std::vector<std::uint32_t> tokens = {1, 2, 3, 4, 5};
  write_loss_mask(mask, {0, 1, 1, 0, 1}, TokenFile::write(path, tokens, 16));
  TokenFile file = TokenFile::open(path, 16);
  file.attach_loss_mask(mask, path);
  std::vector<std::uint8_t> got(5);
  file.read_loss_mask(0, 5, got.data());
  CHECK(got == std::vector<std::uint8_t>{0, 1, 1, 0, 1});
  // The same count of other tokens: the hash tells.
  TokenFile::write(path, {1, 2, 3, 4, 6}, 16);
  TokenFile other = TokenFile::open(path, 16);
  CHECK(contains(error_of([&] { other.attach_loss_mask(mask, path); }), "was made for another token file"));
  // Another count.
  TokenFile::write(path, {1, 2, 3}, 16);
  TokenFile shorter = TokenFile::open(path, 16);
  CHECK(contains(error_of([&] { shorter.attach_loss_mask(mask, path); }), "masks 5 tokens, but token file"));
  // A value that is not 0 or 1.
  const std::uint64_t hash = TokenFile::write(path, tokens, 16);
  write_loss_mask(mask, {0, 1, 2, 0, 1}, hash);
  TokenFile again = TokenFile::open(path, 16);
  CHECK(contains(error_of([&] { again.attach_loss_mask(mask, path); }), "holds 2 at token 2, not 0 or 1"));
}

TEST_CASE("a Megatron loss mask has exactly its dataset's sequences", "[data][documents]") {
  TempDir dir;
  const std::string prefix = dir.file("m");
  const auto write = [&](const std::string& p, const std::vector<std::vector<std::uint32_t>>& docs, int vocab,
                         std::optional<MegatronDType> dtype) {
    MegatronWriter w(p, vocab, dtype);
    for (const auto& d : docs) w.add_document(d);
    w.finish();
  };
  write(prefix, {{5, 6, 7}, {8, 9}}, 100, std::nullopt);
  write(megatron_loss_mask_prefix(prefix), {{0, 1, 1}, {1, 0}}, 2, MegatronDType::uint8);
  MegatronDataset d = MegatronDataset::open(prefix);
  d.attach_loss_mask(megatron_loss_mask_prefix(prefix));
  d.keep_documents(1, 2);
  std::vector<std::uint8_t> got(2);
  d.read_loss_mask(0, 2, got.data());
  CHECK(got == std::vector<std::uint8_t>{1, 0});
  write(megatron_loss_mask_prefix(prefix), {{0, 1}, {1, 0, 1}}, 2, MegatronDType::uint8);
  MegatronDataset e = MegatronDataset::open(prefix);
  CHECK(contains(error_of([&] { e.attach_loss_mask(megatron_loss_mask_prefix(prefix)); }), "sequence lengths or document indices differ"));
  write(megatron_loss_mask_prefix(prefix), {{0, 1, 1}, {1, 0}}, 2, std::nullopt);  // uint16: not a mask
  MegatronDataset f = MegatronDataset::open(prefix);
  CHECK(contains(error_of([&] { f.attach_loss_mask(megatron_loss_mask_prefix(prefix)); }), "a loss mask is uint8 0/1"));
}
