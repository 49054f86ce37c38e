// One checkpoint shard file: writing a rank's pieces, and the manifest that lists the shards.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"

namespace dtrain {

struct ShardRecord {
  std::string file;     // name inside the step directory
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};

// Writes `state`'s pieces as `path` (fsynced). Returns false (and writes nothing) when the rank owns no
// unique state. Throws UserError on any failure, naming the file.
bool write_shard(const std::string& path, const CheckpointMeta& meta, const RankState& state, int writer_rank,
                 ShardRecord& record);
// The same from any source of pieces. after_first_piece (tests): called once, the file half written.
bool write_shard(const std::string& path, const CheckpointMeta& meta, const PieceSource& pieces, int writer_rank,
                 ShardRecord& record, const std::function<void()>& after_first_piece = {});

// manifest.txt of a step directory: the checkpoint id, the step, the publication sequence (the order
// in which checkpoints were published in their directory, by whichever run; absent in older
// checkpoints, read as 0) and every shard with its size and checksum.
struct Manifest {
  std::uint64_t checkpoint_id = 0;
  std::int64_t step = 0;
  std::int64_t sequence = 0;
  std::optional<double> val_loss;  // "val_loss" line after the shards (absent in older manifests, and without a validation)
  std::uint64_t run_id = 0;        // "run" line after the shards: the run that published it (0: absent, older manifests)
  std::vector<ShardRecord> shards;
};
void write_manifest(const std::string& path, const Manifest& manifest);
// Parses a manifest; throws UserError naming the file when it is missing or malformed.
Manifest read_manifest(const std::string& path);

std::string step_dir_name(std::int64_t step);  // "step_00000100"
std::string shard_file_name(int rank);          // "shard_00003.h5"

// The last act of a save, on one process: the manifest from (wrote, bytes, hash) triples per writer
// rank (with the next publication sequence of dir), the temporary directory renamed to
// <dir>/step_..., `latest` replaced. Returns the shard bytes.
double publish_checkpoint(const std::string& tmp, const std::string& dir, const CheckpointMeta& meta,
                          const std::vector<unsigned long long>& triples);

// Syncs a file or directory to disk (common/staged_file's sync_path), timed as the fsync phase.
void fsync_path(const std::string& path);

}  // namespace dtrain
