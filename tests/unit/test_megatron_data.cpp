// Megatron indexed datasets and blends: the writer's bytes are Megatron's layout, the reader reads them
// (and every bad index is one UserError naming the file), a Megatron source samples exactly like a token
// file of the same tokens, and the blend's choice of source is a pure function of (seed, stream, step,
// sample) that holds each source in its proportion.
#include <catch2/catch.hpp>

#include "support/scratch_files.hpp"
#include "support/user_error.hpp"

#include <cstring>
#include <filesystem>
#include <functional>

#include "config/load.hpp"
#include "data/batch_sampler.hpp"
#include "data/data_blend.hpp"
#include "data/megatron_dataset.hpp"
#include "data/megatron_writer.hpp"
#include "data/open_data.hpp"
#include "data/token_file.hpp"

using namespace dtrain;
using namespace dtrain::testing;  // TempDir, load_bytes, save_bytes, error_of, contains
namespace fs = std::filesystem;

namespace {

void write_dataset(const std::string& prefix, const std::vector<std::vector<std::uint32_t>>& documents, int vocab) {
  MegatronWriter w(prefix, vocab);
  for (const auto& d : documents) w.add_document(d);
  w.finish();
}

std::vector<int> read_all(const TokenSource& s) {
  std::vector<int> out(s.size());
  s.read(0, static_cast<int>(s.size()), out.data());
  return out;
}

template <typename T>
T field(const std::vector<std::uint8_t>& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// A source whose every token is its own id: a sample's tokens tell which source it came from.
class Constant : public TokenSource {
 public:
  explicit Constant(int id) : id_(id) {}
  std::uint64_t size() const override { return 1000; }
  void read(std::uint64_t, int len, int* out) const override { std::fill(out, out + len, id_); }

 private:
  int id_;
};

DataBlend constants(const std::vector<double>& weights) {
  std::vector<std::unique_ptr<TokenSource>> sources;
  for (std::size_t i = 0; i < weights.size(); ++i) sources.push_back(std::make_unique<Constant>(static_cast<int>(i)));
  return DataBlend(std::move(sources), weights);
}

// Share of each source among `steps` x `batch` samples.
std::vector<double> mixture(const DataBlend& blend, int steps, int batch) {
  std::vector<double> share(blend.num_sources(), 0.0);
  for (int s = 0; s < steps; ++s)
    for (int j = 0; j < batch; ++j) share[blend.choose(1234, "train", s, j)] += 1.0 / (steps * batch);
  return share;
}

// Writes a valid 3-document dataset, lets `corrupt` edit PREFIX.idx and PREFIX.bin, and returns the
// error of opening it.
std::string open_error_after(const std::function<void(std::vector<std::uint8_t>& idx, std::vector<std::uint8_t>& bin)>& corrupt,
                             std::string* prefix_out) {
  TempDir dir;
  const std::string prefix = dir.file("bad");
  write_dataset(prefix, {{1, 2, 3}, {4, 5}, {6}}, 256);
  std::vector<std::uint8_t> idx = load_bytes(prefix + ".idx"), bin = load_bytes(prefix + ".bin");
  corrupt(idx, bin);
  save_bytes(prefix + ".idx", idx);
  save_bytes(prefix + ".bin", bin);
  *prefix_out = prefix;
  return error_of([&] { MegatronDataset::open(prefix); });
}

}  // namespace

TEST_CASE("the writer lays out PREFIX.idx and PREFIX.bin as Megatron's IndexedDatasetBuilder does", "[data][megatron]") {
  TempDir dir;
  const std::string prefix = dir.file("m");
  write_dataset(prefix, {{1, 2, 300}, {}, {4, 5}}, 50257);
  const std::vector<std::uint8_t> idx = load_bytes(prefix + ".idx");
  REQUIRE(idx.size() == 34 + 3 * 4 + 3 * 8 + 4 * 8);
  CHECK(std::memcmp(idx.data(), "MMIDIDX\0\0", 9) == 0);
  CHECK(field<std::uint64_t>(idx, 9) == 1);   // version
  CHECK(idx[17] == 8);                        // uint16
  CHECK(field<std::uint64_t>(idx, 18) == 3);  // sequences
  CHECK(field<std::uint64_t>(idx, 26) == 4);  // document indices: documents + 1
  CHECK(field<std::int32_t>(idx, 34) == 3);
  CHECK(field<std::int32_t>(idx, 38) == 0);
  CHECK(field<std::int32_t>(idx, 42) == 2);
  CHECK(field<std::int64_t>(idx, 46) == 0);  // byte pointers
  CHECK(field<std::int64_t>(idx, 54) == 6);
  CHECK(field<std::int64_t>(idx, 62) == 6);
  for (int d = 0; d < 4; ++d) CHECK(field<std::int64_t>(idx, 70 + 8 * d) == d);
  CHECK(load_bytes(prefix + ".bin") == std::vector<std::uint8_t>{1, 0, 2, 0, 44, 1, 4, 0, 5, 0});
  for (const auto& entry : fs::directory_iterator(fs::path(prefix).parent_path()))
    CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);  // temporaries renamed

  write_dataset(prefix, {{70000, 1}}, 100000);
  CHECK(load_bytes(prefix + ".idx")[17] == 4);  // int32 from a vocabulary of 65500 up
  CHECK(load_bytes(prefix + ".bin") == std::vector<std::uint8_t>{0x70, 0x11, 1, 0, 1, 0, 0, 0});
}

TEST_CASE("the reader's stream is the documents' tokens in order, across sequence boundaries", "[data][megatron]") {
  TempDir dir;
  for (const int vocab : {256, 100000}) {
    INFO("vocab " << vocab);
    const std::string prefix = dir.file("r" + std::to_string(vocab));
    write_dataset(prefix, {{1, 2, 3}, {}, {4, 5}, {6, 7, 8, 9}}, vocab);
    MegatronDataset d = MegatronDataset::open(prefix);
    CHECK(d.num_documents() == 4);
    CHECK(d.dtype() == (vocab == 256 ? MegatronDType::uint16 : MegatronDType::int32));
    CHECK(read_all(d) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9});
    int window[4];
    d.read(2, 4, window);
    CHECK(std::vector<int>(window, window + 4) == std::vector<int>{3, 4, 5, 6});
    CHECK_THROWS_AS(d.read(7, 3, window), std::out_of_range);
    d.keep_documents(1, 3);
    CHECK(read_all(d) == std::vector<int>{4, 5});
    d.keep_documents(3, 4);
    CHECK(read_all(d) == std::vector<int>{6, 7, 8, 9});
    d.keep_documents(2, 2);
    CHECK(d.size() == 0);
  }
}

TEST_CASE("a Megatron dataset samples exactly like a token file of the same tokens", "[data][megatron]") {
  TempDir dir;
  std::vector<std::uint32_t> tokens(3000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>((i * 7) % 251);
  TokenFile::write(dir.file("t.train.bin"), tokens, 256);
  std::vector<std::vector<std::uint32_t>> documents;
  for (std::size_t at = 0, len = 1; at < tokens.size(); at += len, len = len * 3 % 97 + 1)
    documents.emplace_back(tokens.begin() + at, tokens.begin() + std::min(tokens.size(), at + len));
  write_dataset(dir.file("m"), documents, 256);
  const TokenFile file = TokenFile::open(dir.file("t.train.bin"), 256);
  const MegatronDataset meg = MegatronDataset::open(dir.file("m"));
  REQUIRE(meg.size() == file.size());
  const int T = 32, B = 16;
  std::vector<int> in_file(B * T), tg_file(B * T), in_meg(B * T), tg_meg(B * T);
  fill_samples(file, 5, "train", 9, 0, B, T, in_file.data(), tg_file.data());
  fill_samples(meg, 5, "train", 9, 0, B, T, in_meg.data(), tg_meg.data());
  CHECK(in_file == in_meg);
  CHECK(tg_file == tg_meg);

  // A blend of one source is that source.
  std::vector<std::unique_ptr<TokenSource>> one;
  one.push_back(std::make_unique<MegatronDataset>(MegatronDataset::open(dir.file("m"))));
  const DataBlend blend(std::move(one), {1.0});
  std::vector<int> in_blend(B * T), tg_blend(B * T);
  fill_samples(blend, 5, "train", 9, 0, B, T, in_blend.data(), tg_blend.data());
  CHECK(in_blend == in_file);
  CHECK(tg_blend == tg_file);
}

TEST_CASE("every bad Megatron dataset is a UserError naming the file and the problem", "[data][megatron]") {
  std::string prefix;
  SECTION("index shorter than its header") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx.resize(30); }, &prefix);
    CHECK(contains(e, prefix + ".idx' is truncated: 30 bytes, shorter than the 34-byte header"));
  }
  SECTION("index shorter than its arrays") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx.pop_back(); }, &prefix);
    CHECK(contains(e, prefix + ".idx' is truncated: its header declares 3 sequences and 4 document indices"));
  }
  SECTION("wrong magic") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx[0] = 'X'; }, &prefix);
    CHECK(contains(e, prefix + ".idx' is not a Megatron index"));
  }
  SECTION("wrong version") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx[9] = 2; }, &prefix);
    CHECK(contains(e, prefix + ".idx' has index version 2, but dtrain reads version 1"));
  }
  SECTION("float tokens") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx[17] = 7; }, &prefix);
    CHECK(contains(e, prefix + ".idx' stores float32 tokens (dtype code 7)"));
  }
  SECTION("unknown dtype code") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx[17] = 42; }, &prefix);
    CHECK(contains(e, "stores unknown tokens (dtype code 42)"));
  }
  SECTION("document indices out of order") {
    const std::string e = open_error_after([](auto& idx, auto&) { idx[34 + 12 * 3 + 8 * 2] = 0; }, &prefix);
    CHECK(contains(e, prefix + ".idx' has document index 2 = 0, out of order"));
  }
  SECTION(".bin shorter than the pointers say") {
    const std::string e = open_error_after([](auto&, auto& bin) { bin.pop_back(); }, &prefix);
    CHECK(contains(e, prefix + ".bin' is shorter than its index says: sequence 2 is 1 tokens at byte 10, but the file has 11 bytes"));
  }
  SECTION("missing files") {
    TempDir dir;
    prefix = dir.file("none");
    const std::string e = error_of([&] { MegatronDataset::open(prefix); });
    CHECK(contains(e, "cannot open the Megatron index '" + prefix + ".idx' (No such file"));
  }
}

TEST_CASE("token ids are checked against model.vocab_size over the asked range", "[data][megatron]") {
  TempDir dir;
  write_dataset(dir.file("v"), {{1, 2, 3}, {400, 5}}, 1000);
  const MegatronDataset d = MegatronDataset::open(dir.file("v"));
  CHECK_NOTHROW(d.check_tokens(1000, 0, 5));
  CHECK_NOTHROW(d.check_tokens(256, 0, 3));  // the bad token lies outside this share
  const std::string e = error_of([&] { d.check_tokens(256, 3, 5); });
  CHECK(contains(e, dir.file("v") + ".bin' holds token id 400 at token 3 of its documents, not below model.vocab_size=256"));

  // int32 tokens may be negative on disk: refused the same way.
  write_dataset(dir.file("n"), {{1, 2}}, 100000);
  std::vector<std::uint8_t> bin = load_bytes(dir.file("n") + ".bin");
  std::fill(bin.begin() + 4, bin.end(), 0xFF);
  save_bytes(dir.file("n") + ".bin", bin);
  CHECK(contains(error_of([&] { MegatronDataset::open(dir.file("n")).check_tokens(100000, 0, 2); }), "holds token id -1 at token 1"));
}

TEST_CASE("data.path blends parse Megatron's syntax and refuse malformed ones", "[data][blend]") {
  const auto one = parse_blend("  data/corpus ");
  REQUIRE(one.size() == 1);
  CHECK(one[0].prefix == "data/corpus");
  CHECK(one[0].weight == 1.0);
  const auto two = parse_blend("7 a/x 3e0 b");
  REQUIRE(two.size() == 2);
  CHECK(two[0].prefix == "a/x");
  CHECK(two[0].weight == Approx(0.7));
  CHECK(two[1].prefix == "b");
  CHECK(two[1].weight == Approx(0.3));
  CHECK(contains(error_of([] { parse_blend("0.7 A 0.3"); }), "data.path='0.7 A 0.3': 3 words, an odd count"));
  CHECK(contains(error_of([] { parse_blend("heavy A 0.3 B"); }), "weight 'heavy' is not a number"));
  CHECK(contains(error_of([] { parse_blend("0.7 A nan B"); }), "weight 'nan' is not a number"));
  CHECK(contains(error_of([] { parse_blend("0.7 A -0.3 B"); }), "weight -0.3 of 'B' must be > 0"));
  CHECK(contains(error_of([] { parse_blend(" "); }), "no prefix"));
}

TEST_CASE("a blend holds each source in its proportion, within 1% over 10k samples", "[data][blend]") {
  for (const auto& weights : {std::vector<double>{0.7, 0.3}, std::vector<double>{5, 3, 2}, std::vector<double>{0.01, 0.99}}) {
    const DataBlend blend = constants(weights);
    double total = 0;
    for (double w : weights) total += w;
    for (const auto& [steps, batch] : {std::pair{625, 16}, std::pair{1, 10000}, std::pair{10000, 1}}) {
      const std::vector<double> share = mixture(blend, steps, batch);
      for (std::size_t i = 0; i < weights.size(); ++i) {
        INFO("source " << i << " of " << weights.size() << ", " << steps << " steps of " << batch << ": " << share[i]);
        // The blend picks a source per sample from a counter-based hash, like independent draws: a
        // share of 10k samples has standard deviation <= sqrt(0.25 / 1e4) = 0.005, so 0.01 is 2 sigma
        // (the draws are fixed by the seed: the same shares on every machine).
        CHECK(std::abs(share[i] - weights[i] / total) < 0.01);
      }
    }
  }
  // Streams and seeds draw differently.
  const DataBlend blend = constants({0.5, 0.5});
  int differ_stream = 0, differ_seed = 0;
  for (int j = 0; j < 64; ++j) {
    differ_stream += blend.choose(1, "train", 0, j) != blend.choose(1, "val", 0, j);
    differ_seed += blend.choose(1, "train", 0, j) != blend.choose(2, "train", 0, j);
  }
  CHECK(differ_stream > 8);
  CHECK(differ_seed > 8);
}

TEST_CASE("a blend gives the same global batch at dp=1 and dp=4", "[data][blend]") {
  const DataBlend blend = constants({0.7, 0.3});
  const int T = 8, B = 64;
  for (std::uint64_t step = 0; step < 3; ++step) {
    std::vector<int> in_all(B * T), tg_all(B * T), in_dp(B * T), tg_dp(B * T);
    fill_samples(blend, 1234, "train", step, 0, B, T, in_all.data(), tg_all.data());
    for (int r = 0; r < 4; ++r)  // data-parallel rank r fills samples [16r, 16r + 16)
      fill_samples(blend, 1234, "train", step, 16 * r, 16, T, in_dp.data() + 16 * r * T, tg_dp.data() + 16 * r * T);
    CHECK(in_all == in_dp);
    CHECK(tg_all == tg_dp);
    for (int j = 0; j < B; ++j) CHECK(in_all[j * T] == static_cast<int>(blend.choose(1234, "train", step, j)));
  }
}

TEST_CASE("data.split cuts the documents in order, by rounded cumulative weights", "[data][megatron]") {
  const DataSplit megatron;  // 969,30,1
  CHECK(split_documents(1000, megatron, 0) == std::pair<std::uint64_t, std::uint64_t>{0, 969});
  CHECK(split_documents(1000, megatron, 1) == std::pair<std::uint64_t, std::uint64_t>{969, 999});
  CHECK(split_documents(1000, megatron, 2) == std::pair<std::uint64_t, std::uint64_t>{999, 1000});
  const DataSplit halves{{1, 1, 0}};
  CHECK(split_documents(5, halves, 0) == std::pair<std::uint64_t, std::uint64_t>{0, 3});
  CHECK(split_documents(5, halves, 1) == std::pair<std::uint64_t, std::uint64_t>{3, 5});
  CHECK(split_documents(5, halves, 2) == std::pair<std::uint64_t, std::uint64_t>{5, 5});
}

TEST_CASE("open_data cuts each Megatron prefix of a blend by data.split and checks its part", "[data][megatron]") {
  TempDir dir;
  std::vector<std::vector<std::uint32_t>> docs;
  for (std::uint32_t d = 0; d < 10; ++d) docs.push_back(std::vector<std::uint32_t>(20, d));
  write_dataset(dir.file("a"), docs, 256);
  DataConfig data;
  data.format = DataFormat::megatron;
  data.path = "3 " + dir.file("a") + " 1 " + dir.file("a");
  data.split = DataSplit{{8, 2, 0}};
  const DataBlend train = open_data(data, "byte", "train", 256, 16, {});
  REQUIRE(train.num_sources() == 2);
  CHECK(train.source(0).size() == 160);
  const DataBlend val = open_data(data, "byte", "val", 256, 16, {});
  CHECK(read_all(val.source(1)) == std::vector<int>{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
                                                    9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9});
  const std::string e = error_of([&] { open_data(data, "byte", "val", 256, 40, {}); });
  CHECK(contains(e, "the valid part of Megatron dataset '" + dir.file("a") + "' (documents [8, 10) of 10 by data.split=8,2,0) has 40 tokens"));
  // The token check covers the part of the share asked for: documents hold ids up to 9.
  CHECK(contains(error_of([&] { open_data(data, "byte", "train", 5, 16, {1, 2}); }), "holds token id 5 at token 100"));
  CHECK_NOTHROW(open_data(data, "byte", "train", 5, 16, {0, 2}));
}

TEST_CASE("data.format and data.split are read from the input file", "[data][config]") {
  const Config c = load_config("[model]\n[data]\nformat = megatron\nsplit = 98,2\n", "t.ini", {});
  CHECK(c.data.format == DataFormat::megatron);
  CHECK(c.data.split.weights[0] == 98);
  CHECK(c.data.split.weights[1] == 2);
  CHECK(c.data.split.weights[2] == 0);
  CHECK(load_config("[model]\n", "t.ini", {}).data.format == DataFormat::dtrain);
  CHECK(contains(error_of([] { load_config("[model]\n[data]\nformat = hdf5\n", "t.ini", {}); }), "use dtrain or megatron"));
  for (const char* bad : {"0,1,1", "1,-2", "1,x", "1,2,3,4", "1,,2", "nan"})
    CHECK(contains(error_of([&] { load_config(std::string("[model]\n[data]\nsplit = ") + bad + "\n", "t.ini", {}); }),
                   "'data.split' = '" + std::string(bad) + "' is not accepted"));
}
