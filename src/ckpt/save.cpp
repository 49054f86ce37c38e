// save_checkpoint: shards under a temporary directory, an agreement that every rank succeeded, then
// rank 0 publishes (manifest, rename, `latest`) and prunes old checkpoints.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint.hpp"
#include "ckpt/shard.hpp"
#include "common/collective_check.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

// Test-only fault injection: DTRAIN_FAULT_KILL_IN_SAVE=<world rank>:<step> kills that rank right after
// it wrote its shard of that step, before the agreement (a node failing in the middle of a save).
void maybe_die_in_save(int rank, std::int64_t step) {
  const char* v = std::getenv("DTRAIN_FAULT_KILL_IN_SAVE");
  if (!v) return;
  const std::string spec = v;
  const auto colon = spec.find(':');
  if (colon != std::string::npos && std::atoi(spec.c_str()) == rank && std::atoll(spec.c_str() + colon + 1) == step) raise(SIGKILL);
}

void prune(const std::string& dir, int keep_last) {
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("step_", 0) == 0) steps.push_back(e.path().string());
  std::sort(steps.begin(), steps.end());
  const std::size_t keep = static_cast<std::size_t>(std::max(1, keep_last));  // never the newest
  for (std::size_t i = 0; i + keep < steps.size(); ++i) {
    std::error_code ec;
    fs::remove_all(steps[i], ec);
  }
}

}  // namespace

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) {
      fs::remove_all(e.path(), ec);
      ++removed;
    }
  return removed;
}

std::string latest_checkpoint(const std::string& dir) {
  const std::string path = dir + "/latest";
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  std::ifstream in(path);
  std::string name;
  if (!(in >> name))
    throw UserError("'" + path + "' is empty or unreadable, so the checkpoint to resume from is unknown; write the name of a " +
                    "step directory into it (e.g. step_00000100), or set checkpoint.load to a step directory");
  return dir + "/" + name;
}

IoStats save_checkpoint(MPI_Comm world, const std::string& dir, const CheckpointMeta& meta, const RankState& state,
                        int keep_last) {
  const auto t0 = std::chrono::steady_clock::now();
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const std::string final_dir = dir + "/" + step_dir_name(meta.step);
  const std::string tmp = dir + "/.tmp-" + step_dir_name(meta.step) + "-" + std::to_string(meta.checkpoint_id % 1000000007ull);
  ShardRecord mine;
  int wrote = 0;
  try {
    collective_check(world, [&] {
      if (rank == 0) {
        std::error_code ec;
        fs::create_directories(tmp, ec);
        if (ec) throw UserError("cannot create checkpoint directory '" + tmp + "': " + ec.message());
      }
    });
    collective_check(world, [&] {
      wrote = write_shard(tmp + "/" + shard_file_name(rank), meta, state, rank, mine) ? 1 : 0;
      maybe_die_in_save(rank, meta.step);
    });
  } catch (const UserError& e) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    throw UserError(std::string("checkpoint save of step ") + std::to_string(meta.step) +
                    " failed; the previous checkpoint is untouched: " + e.what());
  }
  // Every rank succeeded: collect the records on rank 0.
  unsigned long long local[3] = {static_cast<unsigned long long>(wrote), mine.bytes, mine.hash};
  std::vector<unsigned long long> all(static_cast<std::size_t>(3) * size);
  MPI_CHECK(MPI_Gather(local, 3, MPI_UNSIGNED_LONG_LONG, all.data(), 3, MPI_UNSIGNED_LONG_LONG, 0, world));
  IoStats stats;
  collective_check(world, [&] {
    if (rank != 0) return;
    stats.bytes = publish_checkpoint(tmp, dir, meta, all);
    prune(dir, keep_last);
  });
  MPI_CHECK(MPI_Bcast(&stats.bytes, 1, MPI_DOUBLE, 0, world));
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.path = final_dir;
  return stats;
}

}  // namespace dtrain
