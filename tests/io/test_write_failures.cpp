// Every writer of dtrain against a failure at each step of writing: the data, HDF5's metadata, the
// fsync, the close and the rename. Runs with tests/support/fail_io.c preloaded (CTest write_failures),
// which fails the calls FAIL_IO names. Each writer must throw one UserError that names the file and
// the step, leave neither the file nor a temporary behind, and leave HDF5 able to shut down (the
// process ends normally: a half-closed HDF5 file used to crash it at exit). Without an injection each
// writes its file in full, checked here by reading it back.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/shard.hpp"
#include "ckpt/weights_file.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "data/loss_mask_file.hpp"
#include "data/megatron_dataset.hpp"
#include "data/megatron_writer.hpp"
#include "data/token_file.hpp"
#include "hf/safetensors.hpp"
#include "support/scratch_files.hpp"

namespace fs = std::filesystem;
using namespace dtrain;

namespace {

// Sets FAIL_IO for a scope and counts the failures the injector made (FAIL_IO_COUNT's file).
class Inject {
 public:
  Inject(const testing::TempDir& dir, const std::string& rule) : counter_(dir.file("../fail_io_count_" + std::to_string(::getpid()))) {
    std::error_code ec;
    fs::remove(counter_, ec);
    ::setenv("FAIL_IO_COUNT", counter_.c_str(), 1);
    ::setenv("FAIL_IO", rule.c_str(), 1);
  }
  ~Inject() {
    ::unsetenv("FAIL_IO");
    std::error_code ec;
    fs::remove(counter_, ec);
  }
  long failures() const {
    std::error_code ec;
    const auto n = fs::file_size(counter_, ec);
    return ec ? 0 : static_cast<long>(n);
  }

 private:
  std::string counter_;
};

// The names in a directory (temporaries included).
std::vector<std::string> listing(const testing::TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(dir.file("x")).parent_path())) names.push_back(e.path().filename().string());
  return names;
}

// Runs `write` with FAIL_IO = rule: it must throw a UserError containing `words`, an injection must
// have happened, and the directory must be empty afterwards.
template <typename F>
void fails_cleanly(const testing::TempDir& dir, const std::string& rule, const std::string& words, F write) {
  INFO("FAIL_IO=" << rule);
  long injected = 0;
  std::string message;
  {
    Inject inject(dir, rule);
    try {
      write();
    } catch (const UserError& e) {
      message = e.what();
    }
    injected = inject.failures();
  }
  INFO("error: " << message);
  std::string left;
  for (const auto& name : listing(dir)) left += " " + name;
  INFO("left:" << left);
  CHECK(injected > 0);
  CHECK(message.find(words) != std::string::npos);
  CHECK(listing(dir).empty());
}

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 97) - 1.0f;
  return v;
}

TensorSpec tensor(const std::string& name, std::vector<long> shape) {
  TensorSpec t;
  t.name = name;
  t.global_shape = t.local_shape = shape;
  t.local_offset.assign(shape.size(), 0);
  t.numel = 1;
  for (long d : shape) t.numel *= static_cast<std::size_t>(d);
  return t;
}

}  // namespace

TEST_CASE("a staged file fails cleanly at each step and is whole otherwise", "[write_failures]") {
  testing::TempDir dir;
  const std::string path = dir.file("notes.txt");
  const auto write = [&] { write_file_atomically(path, std::string(3 << 20, 'x'), "notes file"); };
  fails_cleanly(dir, "write:notes.txt:2", "writing", write);  // the second megabyte
  fails_cleanly(dir, "fsync:notes.txt", "syncing", write);
  fails_cleanly(dir, "close:notes.txt", "closing", write);
  fails_cleanly(dir, "rename:notes.txt", "renaming", write);
  write();
  CHECK(fs::file_size(path) == (3u << 20));
  CHECK(listing(dir) == std::vector<std::string>{"notes.txt"});
}

TEST_CASE("token files, loss masks and Megatron datasets fail cleanly", "[write_failures]") {
  testing::TempDir dir;
  const std::vector<std::uint32_t> tokens(100000, 7);
  const std::string bin = dir.file("d.train.bin");
  for (const char* rule : {"write:d.train.bin", "fsync:d.train.bin", "close:d.train.bin", "rename:d.train.bin"})
    fails_cleanly(dir, rule, "token file", [&] { TokenFile::write(bin, tokens, 256); });
  const std::vector<std::uint8_t> mask(100000, 1);
  for (const char* rule : {"write:lossmask", "fsync:lossmask", "close:lossmask", "rename:lossmask"})
    fails_cleanly(dir, rule, "loss mask file", [&] { write_loss_mask(loss_mask_path(bin), mask, 42); });
  for (const char* rule : {"write:m.bin", "fsync:m.idx", "close:m.bin", "rename:m.idx"})
    fails_cleanly(dir, rule, "Megatron dataset", [&] {
      MegatronWriter w(dir.file("m"), 256);
      for (int d = 0; d < 50; ++d) w.add_document(std::vector<std::uint32_t>(3000, 5));
      w.finish();
    });
  // m.bin is published before m.idx: a failed rename of the index must not leave the data alone.
  MegatronWriter w(dir.file("m"), 256);
  w.add_document({1, 2, 3});
  w.finish();
  CHECK(MegatronDataset::open(dir.file("m")).size() == 3);
}

TEST_CASE("safetensors files fail cleanly", "[write_failures]") {
  testing::TempDir dir;
  const std::vector<float> values = ramp(300000, 0.01f);
  const auto write = [&] {
    safetensors::Writer w(dir.file("model.safetensors"), {{"a", {300000}}}, safetensors::DType::f32, {});
    w.write("a", values.data(), values.size());
    w.finish();
  };
  for (const char* rule : {"write:model.safetensors:2", "fsync:model.safetensors", "close:model.safetensors", "rename:model.safetensors"})
    fails_cleanly(dir, rule, "model.safetensors", write);
  write();
  const safetensors::Reader r(dir.file("model.safetensors"));
  CHECK(r.read(*r.find("a")) == values);
}

TEST_CASE("HDF5 weights files fail cleanly at every step, whatever HDF5 reports", "[write_failures]") {
  testing::TempDir dir;
  const std::string path = dir.file("w.h5");
  // Large tensors written directly, then small ones that HDF5 keeps in its sieve buffer until the
  // dataset closes: a failure there used to be lost, leaving zeros in a file that claimed to be whole.
  const std::vector<float> big = ramp(200000, 0.001f), small = ramp(300, 0.5f);
  const auto write = [&] {
    WeightsWriter w(path, WeightsMeta{});
    w.write("big", {200000}, 0, big.size(), big.data());
    w.write("small1", {300}, 0, small.size(), small.data());
    w.write("small2", {300}, 0, small.size(), small.data());
    w.finish();
  };
  fails_cleanly(dir, "write:w.h5.tmp:2", "weights file", write);  // the first dataset write on
  fails_cleanly(dir, "write:w.h5.tmp:3", "weights file", write);  // the sieve-buffered datasets on
  fails_cleanly(dir, "write@0:w.h5.tmp:2", "weights file", write);  // the metadata at the close
  fails_cleanly(dir, "close:w.h5.tmp", "weights file", write);
  fails_cleanly(dir, "fsync:w.h5.tmp", "syncing", write);
  fails_cleanly(dir, "rename:w.h5.tmp", "renaming", write);
  write();
  const h5::File f = h5::File::open_read(path);
  CHECK(f.read_floats("big") == big);
  CHECK(f.read_floats("small2") == small);
}

TEST_CASE("checkpoint shards fail cleanly at every step", "[write_failures]") {
  testing::TempDir dir;
  const std::string path = dir.file("shard_00000.h5");
  const TensorSpec a = tensor("wte", {64, 512}), b = tensor("lnf_w", {64});
  const std::vector<float> va = ramp(a.numel, 0.01f), vb = ramp(b.numel, 0.1f);
  const PieceSource pieces = [&](const PieceVisitor& visit) {
    visit(0, a, 0, va.data(), 0, static_cast<std::int64_t>(a.numel));
    visit(0, b, 0, vb.data(), 0, static_cast<std::int64_t>(b.numel));
  };
  CheckpointMeta meta;
  const auto write = [&] {
    ShardRecord rec;
    try {
      write_shard(path, meta, pieces, 0, rec);
    } catch (const UserError&) {
      std::error_code ec;
      fs::remove(path, ec);  // what the save does with its temporary directory
      throw;
    }
  };
  fails_cleanly(dir, "write:shard_00000.h5:2", "shard_00000.h5", write);
  fails_cleanly(dir, "write@0:shard_00000.h5:2", "shard_00000.h5", write);
  fails_cleanly(dir, "close:shard_00000.h5", "shard_00000.h5", write);
  fails_cleanly(dir, "fsync:shard_00000.h5", "shard_00000.h5", write);
  write();
  CHECK(h5::File::open_read(path).read_floats("param/lnf_w/0") == vb);
}
