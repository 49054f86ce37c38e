// Data pipeline: the token file round trip, every way a token file can be bad, and sample selection
// that depends only on (seed, stream, step, sample) — the same global batch on every layout.
#include <catch2/catch.hpp>

#include "support/scratch_files.hpp"
#include "support/user_error.hpp"
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "common/counter_rng.hpp"
#include "common/error.hpp"
#include "data/batch_sampler.hpp"
#include "data/token_file.hpp"

using namespace dtrain;
using testing::contains;
using testing::error_of;
using testing::load_bytes;
using testing::save_bytes;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Tokens 0, 1, 2, ... wrapping at vocab: a window's content tells where it starts.
std::vector<std::uint32_t> ramp(std::size_t n, std::uint32_t vocab) {
  std::vector<std::uint32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::uint32_t>(i % vocab);
  return t;
}

std::vector<int> read_all(const TokenFile& f) {
  std::vector<int> out(f.size());
  f.read(0, static_cast<int>(f.size()), out.data());
  return out;
}

// Writes a valid 1-byte file of 16 tokens, lets `corrupt` edit its bytes, and returns the error of
// opening it with model vocab 256.
std::string open_error_after(const std::function<void(std::vector<std::uint8_t>&)>& corrupt, std::string* path_out) {
  TempDir dir;
  const std::string path = dir.file("bad.train.bin");
  TokenFile::write(path, ramp(16, 256), 256);
  std::vector<std::uint8_t> bytes = load_bytes(path);
  corrupt(bytes);
  save_bytes(path, bytes);
  *path_out = path;
  return error_of([&] { TokenFile::open(path, 256); });
}

}  // namespace

TEST_CASE("token files round-trip with the narrowest token width", "[data]") {
  TempDir dir;
  struct Case {
    int vocab;
    std::size_t bytes_per_token;
  };
  for (const Case c : {Case{256, 1}, Case{50257, 2}, Case{100000, 4}}) {
    INFO("vocab " << c.vocab);
    const std::string path = dir.file("rt" + std::to_string(c.vocab) + ".bin");
    std::vector<std::uint32_t> tokens = ramp(1000, static_cast<std::uint32_t>(c.vocab));
    tokens.back() = static_cast<std::uint32_t>(c.vocab - 1);  // the largest id survives
    TokenFile::write(path, tokens, c.vocab);
    CHECK(fs::file_size(path) == kTokenFileHeaderBytes + tokens.size() * c.bytes_per_token);
    CHECK(load_bytes(path)[16] == c.bytes_per_token);

    const TokenFile f = TokenFile::open(path, c.vocab);
    CHECK(f.size() == tokens.size());
    CHECK(f.vocab_size() == c.vocab);
    CHECK(read_all(f) == std::vector<int>(tokens.begin(), tokens.end()));
    int window[3];
    f.read(997, 3, window);
    CHECK(window[2] == c.vocab - 1);
    CHECK_THROWS_AS(f.read(998, 3, window), std::out_of_range);
  }
}

TEST_CASE("the header is little-endian with the documented layout", "[data]") {
  TempDir dir;
  const std::string path = dir.file("h.bin");
  TokenFile::write(path, {1, 300, 2}, 1000);
  const std::vector<std::uint8_t> expected = {
      'D', 'T', 'R', 'A', 'I', 'N', 'T', 'K',  // magic
      1, 0, 0, 0,                              // version
      0xE8, 0x03, 0, 0,                        // vocab_size 1000
      2, 0, 0, 0,                              // bytes_per_token
      0, 0, 0, 0,                              // reserved
      3, 0, 0, 0, 0, 0, 0, 0,                  // count
      1, 0, 0x2C, 0x01, 2, 0};                 // tokens
  CHECK(load_bytes(path) == expected);
  CHECK_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));  // the temp file was renamed
}

TEST_CASE("a model vocabulary larger than the file's is accepted", "[data]") {
  TempDir dir;
  const std::string path = dir.file("small.bin");
  TokenFile::write(path, {0, 1, 2}, 3);
  CHECK(TokenFile::open(path, 256).vocab_size() == 3);
}

TEST_CASE("every bad token file is a UserError naming the file and the problem", "[data]") {
  std::string path;
  SECTION("wrong magic") {
    const std::string e = open_error_after([](auto& b) { b[0] = 'X'; }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "not a dtrain token file"));
  }
  SECTION("wrong version") {
    const std::string e = open_error_after([](auto& b) { b[8] = 7; }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "format version 7"));
  }
  SECTION("bad bytes_per_token") {
    const std::string e = open_error_after([](auto& b) { b[16] = 3; }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "bytes_per_token=3"));
  }
  SECTION("truncated") {
    const std::string e = open_error_after([](auto& b) { b.pop_back(); }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "truncated"));
    CHECK(contains(e, "declares 16 tokens"));
  }
  SECTION("trailing bytes") {
    const std::string e = open_error_after([](auto& b) { b.insert(b.end(), {0, 0}); }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "2 trailing bytes"));
  }
  SECTION("too short for a header") {
    const std::string e = open_error_after([](auto& b) { b.resize(10); }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "too short for a header"));
  }
  SECTION("token id not below the file's vocabulary") {
    // Header vocab 10, but the ramp holds ids up to 15: the first bad one is 10 at position 10.
    const std::string e = open_error_after([](auto& b) { b[12] = 10; b[13] = 0; }, &path);
    CHECK(contains(e, path));
    CHECK(contains(e, "token id 10 at position 10"));
  }
  SECTION("model vocabulary smaller than the file's") {
    TempDir dir;
    path = dir.file("v.bin");
    TokenFile::write(path, {0, 1}, 256);
    const std::string e = error_of([&] { TokenFile::open(path, 100); });
    CHECK(contains(e, path));
    CHECK(contains(e, "model.vocab_size=100 is smaller than the token file's vocabulary 256"));
  }
  SECTION("missing file") {
    TempDir dir;
    path = dir.file("nope.train.bin");
    const std::string e = error_of([&] { TokenFile::open(path, 256); });
    CHECK(contains(e, path));
    CHECK(contains(e, "No such file"));
    CHECK(contains(e, "dtrain-data"));
  }
}

TEST_CASE("a write that cannot happen is a UserError naming the file", "[data]") {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.bin");
  const std::string e = error_of([&] { TokenFile::write(path, {1}, 256); });
  CHECK(contains(e, path));
  CHECK(contains(e, "cannot write"));
}

TEST_CASE("sample_start is the documented pure function of (seed, stream, step, sample)", "[data]") {
  const std::uint64_t n = 10000;
  const int T = 64;
  const std::uint64_t key = rng::key_of(1234, "train");
  CHECK(sample_start(1234, "train", 5, 7, n, T) == rng::hash(key, (5ull << 32) + 7) % (n - T));
  CHECK(sample_start(1234, "train", 5, 7, n, T) == sample_start(1234, "train", 5, 7, n, T));
  CHECK(sample_start(1234, "train", 5, 7, n, T) != sample_start(1234, "train", 6, 7, n, T));
  CHECK(sample_start(1234, "train", 5, 7, n, T) != sample_start(1234, "val", 5, 7, n, T));
  CHECK(sample_start(1234, "train", 5, 7, n, T) != sample_start(1235, "train", 5, 7, n, T));
  CHECK(sample_start(1, "train", 0, 0, T + 1, T) == 0);  // one window only
}

TEST_CASE("sample starts stay in range and spread over the file", "[data]") {
  const std::uint64_t n = 5000;
  const int T = 100;
  std::uint64_t lo = n, hi = 0;
  std::set<std::uint64_t> distinct;
  for (std::uint64_t s = 0; s < 4; ++s) {
    for (std::uint64_t j = 0; j < 256; ++j) {
      const std::uint64_t start = sample_start(42, "train", s, j, n, T);
      REQUIRE(start + T + 1 <= n);
      lo = std::min(lo, start);
      hi = std::max(hi, start);
      distinct.insert(start);
    }
  }
  CHECK(lo < (n - T) / 10);
  CHECK(hi > (n - T) * 9 / 10);
  CHECK(distinct.size() > 800);  // of 1024 draws from 4900 windows
}

TEST_CASE("fill_samples: the same global batch however it is split, targets shifted by one", "[data]") {
  TempDir dir;
  const std::string path = dir.file("ramp.train.bin");
  TokenFile::write(path, ramp(3000, 256), 256);
  const TokenFile f = TokenFile::open(path, 256);
  const int T = 16, B = 8;
  const std::uint64_t step = 3;

  std::vector<int> in_all(B * T), tg_all(B * T), in_split(B * T), tg_split(B * T);
  fill_samples(f, 7, "train", step, 0, B, T, in_all.data(), tg_all.data());
  fill_samples(f, 7, "train", step, 0, 4, T, in_split.data(), tg_split.data());
  fill_samples(f, 7, "train", step, 4, 4, T, in_split.data() + 4 * T, tg_split.data() + 4 * T);
  CHECK(in_all == in_split);
  CHECK(tg_all == tg_split);

  for (int i = 0; i < B; ++i) {
    INFO("sample " << i);
    const std::uint64_t start = sample_start(7, "train", step, i, f.size(), T);
    for (int t = 0; t < T; ++t) {
      CHECK(in_all[i * T + t] == static_cast<int>((start + t) % 256));
      CHECK(tg_all[i * T + t] == static_cast<int>((start + t + 1) % 256));
    }
  }

  std::vector<int> in_next(B * T), tg_next(B * T);
  fill_samples(f, 7, "train", step + 1, 0, B, T, in_next.data(), tg_next.data());
  CHECK(in_next != in_all);
}

TEST_CASE("a sequence longer than the file is rejected", "[data]") {
  TempDir dir;
  const std::string path = dir.file("short.val.bin");
  TokenFile::write(path, ramp(20, 256), 256);
  const TokenFile f = TokenFile::open(path, 256);
  CHECK_NOTHROW(check_sequence_fits(f, 19, path));
  const std::string e = error_of([&] { check_sequence_fits(f, 20, path); });
  CHECK(contains(e, path));
  CHECK(contains(e, "has 20 tokens, fewer than model.seq_length+1 = 21"));
}
