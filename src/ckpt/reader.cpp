// CheckpointReader: manifest check, shard index, global tensors assembled from pieces; and
// load_rank_state, which cuts a rank's slices out of them.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/h5_file.hpp"
#include "ckpt/shard.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t n = 1;
  for (auto d : v) n *= d;
  return n;
}

// A TensorSpec carrying just the slice geometry, for global_index().
TensorSpec geometry(const std::vector<std::int64_t>& global, const std::vector<std::int64_t>& local,
                    const std::vector<std::int64_t>& offset) {
  TensorSpec t;
  t.global_shape.assign(global.begin(), global.end());
  t.local_shape.assign(local.begin(), local.end());
  t.local_offset.assign(offset.begin(), offset.end());
  return t;
}

}  // namespace

void CheckpointReader::check_piece_geometry(const Piece& p, const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return UserError("checkpoint shard '" + path + "': dataset " + p.dataset + " " + why + " (corrupt)");
  };
  const std::size_t dims = p.global_shape.size();
  if (dims == 0 || p.local_shape.size() != dims || p.local_offset.size() != dims) throw bad("has inconsistent shape attributes");
  for (std::size_t d = 0; d < dims; ++d)
    if (p.global_shape[d] < 1 || p.local_shape[d] < 1 || p.local_offset[d] < 0 || p.local_offset[d] + p.local_shape[d] > p.global_shape[d])
      throw bad("describes a slice outside its tensor");
  if (p.flat_begin < 0 || p.flat_begin > product(p.local_shape)) throw bad("starts outside its slice");
}

CheckpointReader::CheckpointReader(const std::string& step_dir, bool verify_files) : dir_(step_dir) {
  const Manifest manifest = read_manifest(dir_ + "/manifest.txt");
  const std::uint64_t id = manifest.checkpoint_id;
  const std::int64_t step = manifest.step;
  const auto& records = manifest.shards;
  if (records.empty()) throw UserError("checkpoint '" + dir_ + "' lists no shards in its manifest");
  for (const auto& r : records) {
    const std::string path = dir_ + "/" + r.file;
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    if (ec) throw UserError("checkpoint shard '" + path + "' listed in the manifest is missing");
    const UserError wrong_size("checkpoint shard '" + path + "' has " + std::to_string(bytes) + " bytes, the manifest says " +
                               std::to_string(r.bytes) + " (truncated or replaced)");
    // Which save a shard belongs to is the most telling fact, so it is checked before the size.
    std::unique_ptr<h5::File> opened;
    try {
      opened = std::make_unique<h5::File>(h5::File::open_read(path));
    } catch (const UserError&) {
      if (bytes != r.bytes) throw wrong_size;
      throw;
    }
    const h5::File& f = *opened;
    const std::string shard_id = f.attr_string("checkpoint_id");
    if (shard_id != h5::hex64(id))
      throw UserError("checkpoint shard '" + path + "' belongs to checkpoint " + shard_id + " but the manifest is of " +
                      h5::hex64(id) + " (files from different saves mixed)");
    if (bytes != r.bytes) throw wrong_size;
    if (verify_files && h5::file_hash(path) != r.hash)
      throw UserError("checkpoint shard '" + path + "' fails its checksum (corrupt: bytes changed)");
    if (f.attr_int("step") != step)
      throw UserError("checkpoint shard '" + path + "' is of another step than its manifest");
    if (shards_.empty()) {
      meta_.checkpoint_id = id;
      meta_.step = step;
      meta_.consumed_samples = f.attr_int("consumed_samples");
      const auto layout = f.attr_ints("layout");
      if (layout.size() != 5) throw UserError("checkpoint shard '" + path + "' has a malformed layout attribute");
      meta_.tp = layout[0], meta_.cp = layout[1], meta_.pp = layout[2], meta_.dp = layout[3], meta_.v = layout[4];
      meta_.order = f.attr_string("rank_order");
      meta_.distributed_optimizer = f.attr_int("distributed_optimizer");
      meta_.version = f.attr_string("dtrain_version");
      meta_.config_text = f.attr_string("config");
      if (f.has_attr("tokenizer")) meta_.tokenizer = f.attr_string("tokenizer");
    }
    for (const auto& ds : f.list_datasets()) {
      const auto first = ds.find('/'), last = ds.rfind('/');
      if (first == std::string::npos || last == first) continue;
      Piece p;
      p.file = path;
      p.dataset = ds;
      p.global_shape = f.attr_ints("global_shape", ds);
      p.local_shape = f.attr_ints("local_shape", ds);
      p.local_offset = f.attr_ints("local_offset", ds);
      p.flat_begin = f.attr_int("flat_begin", ds);
      check_piece_geometry(p, path);
      const std::string hash = f.attr_string("hash64", ds);
      if (!h5::parse_hex64(hash, p.hash))
        throw UserError("checkpoint shard '" + path + "': dataset " + ds + " has a malformed checksum '" + hash + "' (corrupt)");
      pieces_[ds.substr(0, last)].push_back(p);
    }
    shards_.push_back(path);
    bytes_ += static_cast<double>(r.bytes);
  }
}

bool CheckpointReader::has_kind(const std::string& kind) const {
  for (const auto& [key, v] : pieces_)
    if (key.rfind(kind + "/", 0) == 0) return true;
  return false;
}

std::vector<std::string> CheckpointReader::tensor_names() const {
  std::set<std::string> names;
  for (const auto& [key, v] : pieces_)
    if (key.rfind("param/", 0) == 0) names.insert(key.substr(6));
  return {names.begin(), names.end()};
}

std::vector<std::int64_t> CheckpointReader::global_shape(const std::string& name) const {
  auto it = pieces_.find("param/" + name);
  if (it == pieces_.end()) throw UserError("checkpoint '" + dir_ + "' has no tensor '" + name + "'");
  return it->second.front().global_shape;
}

std::vector<float> CheckpointReader::global_tensor(const std::string& kind, const std::string& name) const {
  auto it = pieces_.find(kind + "/" + name);
  if (it == pieces_.end())
    throw UserError("checkpoint '" + dir_ + "' has no " + kind + " of tensor '" + name + "' (written for another model?)");
  const std::int64_t n = product(it->second.front().global_shape);
  std::vector<float> global(static_cast<std::size_t>(n), 0.0f);
  std::vector<unsigned char> covered(static_cast<std::size_t>(n), 0);
  std::map<std::string, h5::File> open;
  for (const Piece& p : it->second) {
    auto f = open.find(p.file);
    if (f == open.end()) f = open.emplace(p.file, h5::File::open_read(p.file)).first;
    const std::vector<float> values = f->second.read_floats(p.dataset);
    if (h5::hash64(values.data(), values.size() * sizeof(float)) != p.hash)
      throw UserError("checkpoint shard '" + p.file + "': dataset " + p.dataset + " fails its checksum (corrupt)");
    const TensorSpec g = geometry(p.global_shape, p.local_shape, p.local_offset);
    if (product(p.local_shape) < p.flat_begin + static_cast<std::int64_t>(values.size()))
      throw UserError("checkpoint shard '" + p.file + "': dataset " + p.dataset + " is larger than its slice");
    for_each_run(g, static_cast<long>(p.flat_begin), static_cast<long>(values.size()), [&](long li, long gi, long len) {
      if (gi < 0 || gi + len > n) throw UserError("checkpoint shard '" + p.file + "': dataset " + p.dataset + " points outside its tensor");
      std::copy_n(values.begin() + (li - p.flat_begin), len, global.begin() + gi);
      std::fill_n(covered.begin() + gi, len, 1);
    });
  }
  if (std::find(covered.begin(), covered.end(), 0) != covered.end())
    throw UserError("checkpoint '" + dir_ + "' lacks part of " + kind + " of tensor '" + name + "' (a shard is missing)");
  return global;
}

namespace {

// packed (back to back over the plan's optimizer ranges) <- the elements of tensor t in them, from the
// global tensor `global`.
void fill_packed(const RankPlan& plan, const TensorSpec& t, const std::vector<float>& global, float* packed) {
  std::size_t at = 0;
  for (const auto& r : plan.optimizer_ranges) {
    const std::size_t lo = std::max(r.begin, t.offset), hi = std::min(r.end, t.offset + t.numel);
    if (lo < hi)
      for_each_run(t, static_cast<long>(lo - t.offset), static_cast<long>(hi - lo), [&](long li, long gi, long len) {
        std::copy_n(global.begin() + gi, len, packed + at + (t.offset + li - r.begin));
      });
    at += r.end - r.begin;
  }
}

}  // namespace

void place_global_param(const RankPlan& plan, const TensorSpec& t, const std::vector<float>& global, RankState& st) {
  for_each_run(t, 0, static_cast<long>(t.numel),
               [&](long li, long gi, long len) { std::copy_n(global.begin() + gi, len, st.params + t.offset + li); });
  if (st.master) fill_packed(plan, t, global, st.master);
}

void load_rank_state(const CheckpointReader& reader, RankState& st) {
  for (const auto& t : st.plan->table.tensors()) {
    const std::string& name = t.name;
    const auto shape = reader.global_shape(name);
    if (std::vector<long>(shape.begin(), shape.end()) != t.global_shape)
      throw UserError("checkpoint '" + reader.dir() + "': tensor '" + name + "' has another shape than the model of the input file");
    place_global_param(*st.plan, t, reader.global_tensor("param", name), st);
    for (int k = 0; k < 2; ++k)
      if (st.moments[k]) fill_packed(*st.plan, t, reader.global_tensor(kPieceKinds[1 + k], name), st.moments[k]);
  }
}

}  // namespace dtrain
