// save_checkpoint: shards under a temporary directory, an agreement that every rank succeeded, then
// rank 0 publishes (manifest, rename, `latest`) and prunes old checkpoints.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt/checkpoint.hpp"
#include "ckpt/directory.hpp"
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

}  // namespace

std::uint64_t new_checkpoint_id(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  unsigned long long id = 0;
  if (rank == 0) id = std::random_device{}() * 4294967296ull + std::random_device{}();
  MPI_CHECK(MPI_Bcast(&id, 1, MPI_UNSIGNED_LONG_LONG, 0, comm));
  return id;
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
  try {
    collective_check(world, [&] {
      if (rank != 0) return;
      stats.bytes = publish_checkpoint(tmp, dir, meta, all);
      prune_checkpoints(dir, keep_last);
    });
  } catch (const UserError& e) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // unpublished shards (gone already if the rename happened)
    }
    throw UserError(std::string("checkpoint save of step ") + std::to_string(meta.step) +
                    " failed while publishing; the previous checkpoint is untouched: " + e.what());
  }
  MPI_CHECK(MPI_Bcast(&stats.bytes, 1, MPI_DOUBLE, 0, world));
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.path = final_dir;
  return stats;
}

}  // namespace dtrain
