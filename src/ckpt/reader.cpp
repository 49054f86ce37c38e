// CheckpointReader: the manifest check, the shard index (every piece's geometry and checksum), whole
// shard files hashed against the manifest. Reading parts of tensors is ckpt/slices.cpp.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/h5_file.hpp"
#include "ckpt/io_phases.hpp"
#include "ckpt/shard.hpp"
#include "common/error.hpp"
#include "config/validate.hpp"

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
  t.numel = static_cast<std::size_t>(product(local));
  return t;
}

}  // namespace

void CheckpointReader::check_piece_geometry(const Piece& p, const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return UserError("checkpoint shard '" + path + "': dataset " + p.dataset + " " + why + " (corrupt)");
  };
  const std::size_t dims = p.global_shape.size();
  if (dims == 0 || p.local_shape.size() != dims || p.local_offset.size() != dims) throw bad("has inconsistent shape attributes");
  // No tensor comes near 2^50 elements; bounding the global shape first keeps every sum and product
  // below in range (huge attributes overflowed them: undefined behaviour, found by fuzzing).
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;
  std::int64_t elements = 1;
  for (std::int64_t g : p.global_shape) {
    if (g < 1 || g > kMaxElements / elements) throw bad("describes a tensor of more than 2^50 elements");
    elements *= g;
  }
  if (p.flat_begin > kMaxElements || p.count > kMaxElements) throw bad("is larger than its slice");
  for (std::size_t d = 0; d < dims; ++d)
    if (p.global_shape[d] < 1 || p.local_shape[d] < 1 || p.local_offset[d] < 0 || p.local_offset[d] > p.global_shape[d] ||
        p.local_shape[d] > p.global_shape[d] - p.local_offset[d])
      throw bad("describes a slice outside its tensor");
  if (p.count < 0) throw bad("is not one-dimensional");
  if (p.flat_begin < 0 || p.flat_begin + p.count > product(p.local_shape)) throw bad("is larger than its slice");
}

CheckpointReader::CheckpointReader(const std::string& step_dir, bool hash_files) : dir_(step_dir) {
  const Manifest manifest = read_manifest(dir_ + "/manifest.txt");
  const std::uint64_t id = manifest.checkpoint_id;
  const std::int64_t step = manifest.step;
  meta_.val_loss = manifest.val_loss;  // kept by a reshard (keep_best and load_best rank checkpoints by it)
  meta_.run_id = manifest.run_id;
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
    if (hash_files && h5::file_hash(path) != r.hash)
      throw UserError("checkpoint shard '" + path + "' fails its checksum (corrupt: bytes changed)");
    if (f.attr_int("step") != step)
      throw UserError("checkpoint shard '" + path + "' is of another step than its manifest");
    if (shards_.empty()) {
      meta_.checkpoint_id = id;
      meta_.step = step;
      meta_.consumed_samples = f.attr_int("consumed_samples");
      const auto layout = f.attr_ints("layout");
      const bool sizes_ok = std::all_of(layout.begin(), layout.end(), [](std::int64_t n) { return n >= 1 && n <= kMaxRanks; });
      if ((layout.size() != 5 && layout.size() != 6) || !sizes_ok)
        throw UserError("checkpoint shard '" + path + "' has a malformed layout attribute");
      ParallelLayout& l = meta_.layout;
      l.tp = static_cast<int>(layout[0]), l.cp = static_cast<int>(layout[1]), l.pp = static_cast<int>(layout[2]);
      l.dp = static_cast<int>(layout[3]), l.v = static_cast<int>(layout[4]);
      l.ep = layout.size() == 6 ? static_cast<int>(layout[5]) : 1;
      meta_.order = f.attr_string("rank_order");
      const bool distributed = f.attr_int("distributed_optimizer") != 0;
      const std::int64_t stage = f.has_attr("zero_stage") ? f.attr_int("zero_stage") : (distributed ? 1 : 0);
      if (stage < 0 || stage > 3 || (stage > 0) != distributed)
        throw UserError("checkpoint shard '" + path + "' has a malformed zero_stage attribute");
      l.zero = static_cast<int>(stage);
      meta_.version = f.attr_string("dtrain_version");
      meta_.config_text = f.attr_string("config");
      if (f.has_attr("tokenizer")) meta_.tokenizer = f.attr_string("tokenizer");
      if (f.has_attr("skipped_steps")) meta_.skipped_steps = f.attr_int("skipped_steps");
      if (f.has_attr("skipped_batches")) meta_.skipped_batches = f.attr_ints("skipped_batches");
      if (f.has_attr("best_val_loss"))
        meta_.validations = CheckpointMeta::Validations{f.attr_double("best_val_loss"), f.attr_int("best_val_step"),
                                                        f.attr_int("stale_validations")};
      if (meta_.skipped_steps < 0 || meta_.skipped_steps > step)
        throw UserError("checkpoint shard '" + path + "' has a malformed skipped_steps attribute");
      if (f.has_attr("loss_scale")) {
        const auto trackers = f.attr_ints("loss_scale_trackers");
        if (trackers.size() != 2) throw UserError("checkpoint shard '" + path + "' has a malformed loss_scale_trackers attribute");
        meta_.loss_scaler = CheckpointMeta::LossScaler{f.attr_double("loss_scale"), trackers[0], trackers[1]};
      }
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
      const auto dims = f.shape(ds);
      p.count = dims.size() == 1 ? dims[0] : -1;
      check_piece_geometry(p, path);
      if (p.count > 0) {
        const TensorSpec g = geometry(p.global_shape, p.local_shape, p.local_offset);
        p.global_first = global_index(g, static_cast<long>(p.flat_begin));
        p.global_end = global_index(g, static_cast<long>(p.flat_begin + p.count - 1)) + 1;
      }
      const std::string hash = f.attr_string("hash64", ds);
      if (!h5::parse_hex64(hash, p.hash))
        throw UserError("checkpoint shard '" + path + "': dataset " + ds + " has a malformed checksum '" + hash + "' (corrupt)");
      pieces_[ds.substr(0, last)].push_back(p);
    }
    shards_.push_back(path);
    shard_hashes_.push_back(r.hash);
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

const std::vector<CheckpointReader::Piece>& CheckpointReader::pieces_of(const std::string& kind, const std::string& name) const {
  auto it = pieces_.find(kind + "/" + name);
  if (it == pieces_.end())
    throw UserError("checkpoint '" + dir_ + "' has no " + kind + " of tensor '" + name + "' (written for another model?)");
  return it->second;
}

const h5::File& CheckpointReader::open(const std::string& path) const {
  auto f = open_.find(path);
  if (f != open_.end()) return f->second;
  if (open_.size() >= 16) open_.clear();  // every HDF5 file open costs its caches: keep a few
  return open_.emplace(path, h5::File::open_read(path)).first->second;
}

void CheckpointReader::verify_files(int rank, int size) const {
  IoPhaseTimer timer(IoPhase::file_hash);
  for (std::size_t i = static_cast<std::size_t>(rank); i < shards_.size(); i += static_cast<std::size_t>(size))
    if (h5::file_hash(shards_[i]) != shard_hashes_[i])
      throw UserError("checkpoint shard '" + shards_[i] + "' fails its checksum (corrupt: bytes changed)");
}

}  // namespace dtrain
