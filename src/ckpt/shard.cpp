// Shard and manifest files of a checkpoint.
#include "ckpt/shard.hpp"

#include <cmath>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checksum.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/h5_file.hpp"
#include "ckpt/io_phases.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "dtrain_config.hpp"

namespace dtrain {

const char* const kPieceKinds[3] = {"param", "exp_avg", "exp_avg_sq"};

void fsync_path(const std::string& path) {
  IoPhaseTimer t(IoPhase::fsync);
  sync_path(path);
}

namespace {

void write_piece(h5::File& f, const std::string& kind, const TensorSpec& t, int index, const float* data,
                 std::int64_t flat_begin, std::int64_t count) {
  const std::string name = kind + "/" + t.name + "/" + std::to_string(index);
  f.write_floats(name, data, {count});
  f.set_attr("global_shape", std::vector<std::int64_t>(t.global_shape.begin(), t.global_shape.end()), name);
  f.set_attr("local_shape", std::vector<std::int64_t>(t.local_shape.begin(), t.local_shape.end()), name);
  f.set_attr("local_offset", std::vector<std::int64_t>(t.local_offset.begin(), t.local_offset.end()), name);
  f.set_attr("flat_begin", flat_begin, name);
  std::uint64_t hash;
  {
    IoPhaseTimer timer(IoPhase::checks);
    hash = h5::hash64(data, sizeof(float) * static_cast<std::size_t>(count));
  }
  f.set_attr("hash64", h5::hex64(hash), name);
}

}  // namespace

void for_each_piece(const RankState& st, const PieceVisitor& visit) {
  const RankPlan& plan = *st.plan;
  const auto& tensors = plan.table.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    // Whole tensors: without master weights, and frozen ones (which have none) always.
    if ((!st.master || !t.trainable) && plan.writes_params(i)) visit(0, t, 0, st.params + t.offset, 0, static_cast<std::int64_t>(t.numel));
    if (!plan.writes_moments(i)) continue;
    // Parameters kept per optimizer range: the master weights (bf16), or the parameters under ZeRO-3.
    const bool range_params = st.master || plan.shards_params();
    std::size_t packed = 0;  // offset of the current range in the packed per-range buffers
    int index = 0;
    for (const auto& r : plan.optimizer_ranges) {
      const std::size_t lo = std::max(r.begin, t.offset), hi = std::min(r.end, t.offset + t.numel);
      if (lo < hi) {
        const std::size_t at = packed + (lo - r.begin);
        const auto flat = static_cast<std::int64_t>(lo - t.offset), count = static_cast<std::int64_t>(hi - lo);
        if (range_params) visit(0, t, index, st.master ? st.master + at : st.params + lo, flat, count);
        for (int k = 0; k < 2; ++k)
          if (st.moments[k]) visit(1 + k, t, index, st.moments[k] + at, flat, count);
        ++index;
      }
      packed += r.end - r.begin;
    }
  }
}

bool write_shard(const std::string& path, const CheckpointMeta& meta, const RankState& st, int writer_rank, ShardRecord& rec) {
  return write_shard(path, meta, [&](const PieceVisitor& visit) { for_each_piece(st, visit); }, writer_rank, rec);
}

bool write_shard(const std::string& path, const CheckpointMeta& meta, const PieceSource& pieces, int writer_rank,
                 ShardRecord& rec, const std::function<void()>& after_first_piece) {
  bool any = false;
  pieces([&](int, const TensorSpec&, int, const float*, std::int64_t, std::int64_t) { any = true; });
  if (!any) return false;
  h5::File f = h5::File::create(path);
  f.set_attr("format", kCheckpointFormat);
  f.set_attr("checkpoint_id", h5::hex64(meta.checkpoint_id));
  f.set_attr("step", meta.step);
  f.set_attr("consumed_samples", meta.consumed_samples);
  const ParallelLayout& l = meta.layout;
  f.set_attr("layout", std::vector<std::int64_t>{l.tp, l.cp, l.pp, l.dp, l.v, l.ep});
  f.set_attr("rank_order", meta.order);
  f.set_attr("distributed_optimizer", std::int64_t{l.distributed_optimizer() ? 1 : 0});
  f.set_attr("zero_stage", std::int64_t{l.zero});
  f.set_attr("dtrain_version", std::string(DTRAIN_VERSION));
  f.set_attr("writer_rank", writer_rank);
  f.set_attr("config", meta.config_text);
  f.set_attr("tokenizer", meta.tokenizer);
  f.set_attr("skipped_steps", meta.skipped_steps);
  if (!meta.skipped_batches.empty()) f.set_attr("skipped_batches", meta.skipped_batches);
  if (meta.validations) {
    f.set_attr_double("best_val_loss", meta.validations->best_loss);
    f.set_attr("best_val_step", meta.validations->best_step);
    f.set_attr("stale_validations", meta.validations->stale);
  }
  if (meta.loss_scaler) {
    f.set_attr_double("loss_scale", meta.loss_scaler->scale);
    f.set_attr("loss_scale_trackers", std::vector<std::int64_t>{meta.loss_scaler->growth_tracker, meta.loss_scaler->hysteresis_tracker});
  }
  bool first = true;
  pieces([&](int kind, const TensorSpec& t, int index, const float* data, std::int64_t flat, std::int64_t count) {
    write_piece(f, kPieceKinds[kind], t, index, data, flat, count);
    if (first && after_first_piece) after_first_piece();
    first = false;
  });
  f.close();
  fsync_path(path);
  rec.file = path.substr(path.rfind('/') + 1);
  IoPhaseTimer timer(IoPhase::file_hash);
  rec.hash = h5::file_hash(path, &rec.bytes);
  return true;
}

std::string step_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string shard_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05d.h5", rank);
  return buf;
}

double publish_checkpoint(const std::string& tmp, const std::string& dir, const CheckpointMeta& meta,
                          const std::vector<unsigned long long>& triples) {
  Manifest m;
  m.checkpoint_id = meta.checkpoint_id;
  m.run_id = meta.run_id;
  m.step = meta.step;
  m.sequence = next_publication_sequence(dir);
  m.val_loss = meta.val_loss;
  double bytes = 0.0;
  for (std::size_t r = 0; 3 * r < triples.size(); ++r)
    if (triples[3 * r]) {
      m.shards.push_back({shard_file_name(static_cast<int>(r)), triples[3 * r + 1], triples[3 * r + 2]});
      bytes += static_cast<double>(triples[3 * r + 1]);
    }
  write_manifest(tmp + "/manifest.txt", m);
  fsync_path(tmp);
  const std::string final_dir = dir + "/" + step_dir_name(meta.step);
  std::error_code ec;
  if (std::filesystem::exists(final_dir, ec)) {
    // A checkpoint of the same step (an earlier attempt, another run) is swapped out in one atomic
    // step, so `latest` never names a missing or half-deleted directory; it is removed last.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      // The filesystem cannot exchange: move the old one aside, then move the new one in.
      // If the second move fails, the old one goes back: the published checkpoint is never lost.
      const std::string aside = tmp + "-replaced";
      if (std::rename(final_dir.c_str(), aside.c_str()) != 0)
        throw UserError("cannot publish '" + final_dir + "' (" + std::strerror(errno) + ")");
      if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::rename(aside.c_str(), final_dir.c_str());
        throw UserError("cannot publish '" + final_dir + "' (" + why + "); the earlier checkpoint of this step is kept");
      }
      std::filesystem::rename(aside, tmp, ec);
    }
  } else if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    throw UserError("cannot publish '" + final_dir + "' (" + std::strerror(errno) + ")");
  }
  fsync_path(dir);
  write_file_atomically(dir + "/latest", step_dir_name(meta.step) + "\n", "checkpoint pointer");
  std::filesystem::remove_all(tmp, ec);  // the replaced checkpoint, if there was one
  return bytes;
}

void write_manifest(const std::string& path, const Manifest& m) {
  std::ostringstream os;
  os << "dtrain-checkpoint-manifest " << kCheckpointFormat << "\n"
     << "checkpoint_id " << h5::hex64(m.checkpoint_id) << "\n"
     << "step " << m.step << "\n"
     << "sequence " << m.sequence << "\n"
     << "shards " << m.shards.size() << "\n";
  for (const auto& s : m.shards) os << "shard " << s.file << " " << s.bytes << " " << h5::hex64(s.hash) << "\n";
  // Optional lines after the shards, where readers of format 1 that do not know them stop reading.
  if (m.val_loss) {
    char loss[40];
    std::snprintf(loss, sizeof loss, "%.17g", *m.val_loss);
    os << "val_loss " << loss << "\n";
  }
  if (m.run_id) os << "run " << h5::hex64(m.run_id) << "\n";
  write_file_atomically(path, os.str(), "checkpoint manifest");
}

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("checkpoint manifest '" + path + "' is missing: the directory is not a published checkpoint");
  std::string word;
  int format = 0;
  std::size_t count = 0;
  Manifest m;
  auto bad = [&](const std::string& why) { return UserError("checkpoint manifest '" + path + "' is malformed: " + why); };
  if (!(in >> word >> format) || word != "dtrain-checkpoint-manifest") throw bad("no header");
  if (format != kCheckpointFormat) throw bad("format " + std::to_string(format) + ", this dtrain reads " + std::to_string(kCheckpointFormat));
  std::string hex;
  if (!(in >> word >> hex) || word != "checkpoint_id") throw bad("no checkpoint_id");
  if (!h5::parse_hex64(hex, m.checkpoint_id)) throw bad("checkpoint_id '" + hex + "' is not 16 hexadecimal digits");
  if (!(in >> word >> m.step) || word != "step") throw bad("no step");
  if (m.step < 0 || m.step > 2147483647) throw bad("step " + std::to_string(m.step) + " is out of range");
  if (!(in >> word)) throw bad("no shard count");
  if (word == "sequence" && !(in >> m.sequence >> word)) throw bad("no publication sequence");
  if (word != "shards" || !(in >> count)) throw bad("no shard count");
  for (std::size_t i = 0; i < count; ++i) {
    ShardRecord r;
    if (!(in >> word >> r.file >> r.bytes >> hex) || word != "shard") throw bad("shard line " + std::to_string(i + 1));
    if (r.file.find('/') != std::string::npos || r.file == "." || r.file == "..")
      throw bad("shard '" + r.file + "' is not a file name in the step directory");
    if (!h5::parse_hex64(hex, r.hash))
      throw bad("the checksum '" + hex + "' of " + r.file + " is not 16 hexadecimal digits");
    m.shards.push_back(r);
  }
  while (in >> word) {
    double loss = 0.0;
    if (word == "val_loss" && !m.val_loss && (in >> loss) && std::isfinite(loss)) {
      m.val_loss = loss;
    } else if (word == "run" && !m.run_id && (in >> hex)) {
      if (!h5::parse_hex64(hex, m.run_id) || m.run_id == 0) throw bad("run '" + hex + "' is not 16 hexadecimal digits, not all 0");
    } else {
      throw bad("an unknown or repeated line after the shards ('" + word.substr(0, 40) + "')");
    }
  }
  return m;
}

}  // namespace dtrain
