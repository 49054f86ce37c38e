// consolidate / reshard / verify: offline checkpoint work split over the ranks of a communicator. A
// tensor is read and written in slabs, so memory stays bounded whatever the model's size.
#include "ckpt/convert.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "ckpt/directory.hpp"
#include "ckpt/h5_file.hpp"
#include "ckpt/shard.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "config/load.hpp"
#include "plan/frozen_tensors.hpp"
#include "plan/layout_checks.hpp"
#include "plan/pipeline_split.hpp"
#include "plan/rank_layout.hpp"
#include "plan/training_plan.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

constexpr std::size_t kSlab = std::size_t{1} << 22;  // elements read (and written) at a time: 16 MB of fp32

// Reads the whole tensor `name` of a kind slab by slab, each piece's checksum checked as its last
// element is read; fn(begin, count, values) gets every slab in order.
template <typename Fn>
void stream_tensor(const CheckpointReader& reader, const std::string& kind, const std::string& name, std::vector<float>& slab,
                   Fn fn) {
  const TensorSpec t = reader.global_geometry(name);
  CheckpointReader::RunningHashes hashes;
  slab.resize(std::max(slab.size(), std::min(kSlab, t.numel)));
  for (std::size_t at = 0; at < t.numel; at += kSlab) {
    const std::size_t n = std::min(kSlab, t.numel - at);
    reader.read_slice(kind, t, at, n, slab.data(), &hashes);
    fn(at, n, slab.data());
  }
}

}  // namespace

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path + "/manifest.txt", ec)) return path;
  const std::string latest = latest_checkpoint(path);
  if (!latest.empty()) return latest;
  throw UserError("'" + path + "' is neither a checkpoint step directory (no manifest.txt) nor a checkpoint directory with a 'latest' file");
}

Config checkpoint_config(const CheckpointReader& reader) {
  return load_config(reader.meta().config_text, reader.dir() + " (stored configuration)", {});
}

void consolidate(HostComm comm, const CheckpointReader& reader, const std::string& out, bool optimizer, h5::Stored weights,
                 const Progress& progress) {
  const int rank = comm.rank(), size = comm.size();
  const auto names = reader.tensor_names();
  std::vector<std::string> kinds = {"param"};
  if (optimizer) {
    for (const char* k : {"exp_avg", "exp_avg_sq"})
      if (reader.has_kind(k)) kinds.push_back(k);
    if (kinds.size() == 1) throw UserError("checkpoint '" + reader.dir() + "' holds no optimizer state");
  }
  std::string tmp = staged_name(out);  // rank 0's: one file of all ranks
  broadcast_string(comm, tmp, 0);
  // Every step on the shared file is agreed over comm, so a failure anywhere is a failure everywhere
  // and every rank discards the file together (the discard is collective).
  std::optional<h5::File> file;
  std::vector<h5::Dataset> datasets;
  try {
    collective_check(comm, [&] { file.emplace(h5::File::create_parallel(tmp, comm)); });
    // Creating datasets is collective: every rank creates all of them, then writes its own share.
    // (kind, tensor) of every dataset: frozen tensors (the run's training.freeze) have parameters only.
    const std::vector<std::string> frozen = freeze_patterns(checkpoint_config(reader).training.freeze);
    std::vector<std::pair<std::string, std::string>> items;
    for (const auto& kind : kinds)
      for (const auto& name : names)
        if (kind == "param" || !frozen_by(frozen, name)) items.emplace_back(kind, name);
    collective_check(comm, [&] {
      for (const auto& [kind, name] : items)
        datasets.push_back(kind == "param" ? file->create_dataset(name, reader.global_shape(name), weights)
                                           : file->create_dataset("optimizer/" + kind + "/" + name, reader.global_shape(name)));
    });
    collective_check(comm, [&] {
      std::vector<float> slab;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (static_cast<int>(i % size) != rank) continue;
        const auto& [kind, name] = items[i];
        stream_tensor(reader, kind, name, slab, [&](std::size_t at, std::size_t n, const float* values) { datasets[i].write_range(at, n, values); });
        if (progress) progress(static_cast<int>(i + 1), static_cast<int>(datasets.size()), kind + " " + name);
      }
    });
    collective_check(comm, [&] {  // each close writes what HDF5 still buffers (collective)
      for (auto& d : datasets) d.close();
    });
    datasets.clear();
    collective_check(comm, [&] {  // the same values on every rank
      file->set_attr("step", reader.meta().step);
      file->set_attr("tokenizer", reader.meta().tokenizer);
      file->set_attr("config", reader.meta().config_text);
    });
    file->close();  // agrees on the outcome itself
    file.reset();
    collective_check(comm, [&] {
      if (rank == 0) publish_file(tmp, out, "consolidated checkpoint");
    });
  } catch (const UserError&) {
    datasets.clear();
    if (file) file->mark_failed();
    file.reset();
    if (rank == 0) std::remove(tmp.c_str());
    throw;
  }
}

void reshard(HostComm comm, const CheckpointReader& reader, const ParallelLayout& L, const std::string& out_dir,
             const Progress& progress) {
  const int rank = comm.rank(), size = comm.size();
  Config cfg = checkpoint_config(reader);
  // The new layout must fit the model as a run on it would have to (the same checks, the same words).
  set_parallel_layout(cfg.system, L);
  // The saved run's uneven pipeline split where it fits the new stages, else the even one: which shard
  // holds a piece does not change what any layout reads back.
  if (!PipelineSplit::of(cfg, L.pp, L.v).errors().empty()) {
    cfg.system.pipeline_first_stage_layers = cfg.system.pipeline_last_stage_layers = 0;
    cfg.system.pipeline_account_for_embedding = cfg.system.pipeline_account_for_loss = false;
  }
  cfg.system.sequence_parallel = false;
  cfg.model.micro_batch_size.automatic = true;  // the batch is the resuming run's business
  const int world = L.tp * L.pp * L.dp;  // bounded by parse_layout
  try {
    if (L.ep > 1 && cfg.model.num_experts < 2)
      throw UserError("ep=" + std::to_string(L.ep) + " splits experts, and this model has none (model.num_experts=" +
                      std::to_string(cfg.model.num_experts) + "); use ep=1");
    check_layout(cfg, world);
  } catch (const UserError& e) {
    throw UserError("--reshard " + to_string(L) + " does not fit the checkpoint's model:\n" + e.what());
  }
  // The plan of the new layout: which tensors, slices and optimizer ranges each of its ranks holds.
  TrainingPlan target;
  target.sizes = L;
  const RankLayout layout(target.sizes, reader.meta().order);
  CheckpointMeta meta = reader.meta();
  meta.layout = L;
  meta.checkpoint_id = new_checkpoint_id(comm);
  const std::string step = step_dir_name(meta.step);
  const std::string tmp = out_dir + "/.tmp-" + step + "-reshard";
  collective_check(comm, [&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::create_directories(tmp, ec);
    if (ec) throw UserError("cannot create '" + tmp + "': " + ec.message());
  });
  // Ranks read parts of pieces, which their checksums cannot check: the shard files are hashed first.
  collective_check(comm, [&] { reader.verify_files(rank, size); });
  const bool has_moments = reader.has_kind("exp_avg");
  std::vector<unsigned long long> records(static_cast<std::size_t>(3) * world, 0);
  collective_check(comm, [&] {
    for (int r = rank; r < world; r += size) {
      const RankPlan plan = make_rank_plan(cfg, target, layout.coords_of(r));
      std::vector<float> params(plan.arena_size, 0.0f);
      std::vector<float> m(has_moments ? plan.optimizer_elements() : 0), v(m.size());
      RankState st;
      st.plan = &plan;
      st.params = params.data();
      st.moments[0] = has_moments ? m.data() : nullptr;
      st.moments[1] = has_moments ? v.data() : nullptr;
      load_rank_state(reader, st);
      ShardRecord rec;
      if (write_shard(tmp + "/" + shard_file_name(r), meta, st, r, rec)) {
        records[3 * r] = 1;
        records[3 * r + 1] = rec.bytes;
        records[3 * r + 2] = rec.hash;
      }
      if (progress) progress(r + 1, world, "shard " + std::to_string(r));
    }
  });
  std::vector<unsigned long long> all(records.size(), 0);
  reduce_sum(comm, records.data(), all.data(), static_cast<int>(records.size()), 0);
  collective_check(comm, [&] {
    if (rank == 0) publish_checkpoint(tmp, out_dir, meta, all);
  });
}

void verify(HostComm comm, const CheckpointReader& reader, const Progress& progress) {
  const int rank = comm.rank(), size = comm.size();
  const auto names = reader.tensor_names();
  collective_check(comm, [&] { reader.verify_files(rank, size); });
  const std::vector<std::string> frozen = freeze_patterns(checkpoint_config(reader).training.freeze);  // no optimizer state
  collective_check(comm, [&] {
    int i = 0;
    const int total = static_cast<int>(names.size()) * 3;
    std::vector<float> slab;
    for (const char* kind : kPieceKinds)
      for (const auto& name : names) {
        if (i % size == rank && (std::string(kind) == "param" || (reader.has_kind(kind) && !frozen_by(frozen, name)))) {
          stream_tensor(reader, kind, name, slab, [](std::size_t, std::size_t, const float*) {});
          if (progress) progress(i + 1, total, std::string(kind) + " " + name);
        }
        ++i;
      }
  });
}

}  // namespace dtrain
