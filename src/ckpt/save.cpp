// save_checkpoint: shards under a temporary directory, an agreement that every rank succeeded, then
// rank 0 publishes (manifest, rename, `latest`) and prunes old checkpoints; the same three phases one
// at a time for saves whose shards are written on a background thread (train/checkpointing).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "ckpt/checkpoint.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/shard.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

// Test-only fault injection: VARIABLE=<world rank>:<step> kills that rank at a point of that step's save:
// DTRAIN_FAULT_KILL_IN_SAVE right after it wrote its shard, before the agreement (a node failing in the
// middle of a save); DTRAIN_FAULT_KILL_AFTER_PUBLISH right after rank 0 published the checkpoint (a node
// failing just after a save).
void maybe_die(const char* variable, int rank, std::int64_t step) {
  const char* v = std::getenv(variable);
  if (!v) return;
  const std::string spec = v;
  const auto colon = spec.find(':');
  if (colon != std::string::npos && std::atoi(spec.c_str()) == rank && std::atoll(spec.c_str() + colon + 1) == step) raise(SIGKILL);
}

}  // namespace

std::uint64_t new_checkpoint_id(HostComm comm) {
  unsigned long long id = 0;
  if (comm.rank() == 0) id = std::random_device{}() * 4294967296ull + std::random_device{}();
  broadcast(comm, &id, 1, 0);
  return id;
}

namespace {

std::string failed(const CheckpointMeta& meta, const char* when, const std::string& why) {
  return "checkpoint save of step " + std::to_string(meta.step) + " failed" + when + "; the previous checkpoint is untouched: " + why;
}

void remove_temporary(int rank, const SaveTarget& target) {
  if (rank != 0) return;
  std::error_code ec;
  fs::remove_all(target.tmp, ec);  // unpublished shards (gone already if the rename happened)
}

}  // namespace

SaveTarget begin_save(HostComm world, const std::string& dir, const CheckpointMeta& meta, Retention keep) {
  SaveTarget target{dir, dir + "/.tmp-" + step_dir_name(meta.step) + "-" + std::to_string(meta.checkpoint_id % 1000000007ull), meta,
                    keep};
  const int rank = world.rank();
  try {
    collective_check(world, [&] {
      if (rank != 0) return;
      std::error_code ec;
      fs::create_directories(target.tmp, ec);
      if (ec) throw UserError("cannot create checkpoint directory '" + target.tmp + "': " + ec.message());
    });
  } catch (const UserError& e) {
    remove_temporary(rank, target);
    throw UserError(failed(meta, "", e.what()));
  }
  return target;
}

ShardWrite write_shard_of_rank(const SaveTarget& target, int rank, const PieceSource& pieces, double pause_s) {
  const auto t0 = std::chrono::steady_clock::now();
  take_io_phases();  // this write's phases only
  ShardWrite out;
  try {
    ShardRecord rec;
    const auto pause = [pause_s] { std::this_thread::sleep_for(std::chrono::duration<double>(pause_s)); };
    out.wrote = write_shard(target.tmp + "/" + shard_file_name(rank), target.meta, pieces, rank, rec,
                            pause_s > 0 ? std::function<void()>(pause) : std::function<void()>());
    out.bytes = rec.bytes;
    out.hash = rec.hash;
    maybe_die("DTRAIN_FAULT_KILL_IN_SAVE", rank, target.meta.step);
  } catch (const std::exception& e) {  // UserError (a full disk, a non-finite value), or the library's own
    out.error = e.what();
    if (out.error.empty()) out.error = "unknown failure writing " + shard_file_name(rank);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.phases = take_io_phases();
  return out;
}

IoStats finish_save(HostComm world, const SaveTarget& target, const ShardWrite& mine, std::vector<std::string>* pruned_aside) {
  const int rank = world.rank(), size = world.size();
  try {
    collective_check(world, [&] {
      if (!mine.error.empty()) throw UserError(mine.error);
    });
  } catch (const UserError& e) {
    remove_temporary(rank, target);
    throw UserError(failed(target.meta, "", e.what()));
  }
  // Every rank succeeded: collect the records on rank 0.
  unsigned long long local[3] = {static_cast<unsigned long long>(mine.wrote ? 1 : 0), mine.bytes, mine.hash};
  std::vector<unsigned long long> all(static_cast<std::size_t>(3) * size);
  gather(world, local, 3, all.data(), 0);
  IoStats stats;
  stats.write_seconds = all_reduce(world, mine.seconds, HostOp::max);
  try {
    collective_check(world, [&] {
      if (rank != 0) return;
      IoPhaseTimer timer(IoPhase::publish);
      stats.bytes = publish_checkpoint(target.tmp, target.dir, target.meta, all);
      prune_checkpoints(target.dir, target.keep, pruned_aside);
    });
    stats.phases = mine.phases;
    stats.phases[static_cast<int>(IoPhase::publish)] = take_io_phases()[static_cast<int>(IoPhase::publish)];
  } catch (const UserError& e) {
    remove_temporary(rank, target);
    throw UserError(failed(target.meta, " while publishing", e.what()));
  }
  maybe_die("DTRAIN_FAULT_KILL_AFTER_PUBLISH", rank, target.meta.step);
  broadcast(world, &stats.bytes, 1, 0);
  for (double& s : stats.phases) s = all_reduce(world, s, HostOp::max);
  stats.path = target.dir + "/" + step_dir_name(target.meta.step);
  return stats;
}

bool all_ranks(HostComm world, bool mine) {
  return all_reduce(world, mine ? 1 : 0, HostOp::min) == 1;
}

IoStats save_checkpoint(HostComm world, const std::string& dir, const CheckpointMeta& meta, const RankState& state,
                        Retention keep, double pause_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const SaveTarget target = begin_save(world, dir, meta, keep);
  const ShardWrite mine =
      write_shard_of_rank(target, world.rank(), [&](const PieceVisitor& visit) { for_each_piece(state, visit); }, pause_s);
  IoStats stats = finish_save(world, target, mine);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace dtrain
