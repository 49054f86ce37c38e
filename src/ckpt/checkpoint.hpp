// Sharded checkpoints: a directory per step, one HDF5 shard per rank that owns unique state, and a
// manifest listing every shard with its size and checksum.
//
//   <checkpoint.dir>/step_00000100/manifest.txt
//                                 /shard_00000.h5 ...   (file number = world rank of the writer)
//   <checkpoint.dir>/latest                               (the name of the newest published step)
//
// A shard holds pieces: 1-D datasets "<kind>/<tensor>/<n>" (kind = param, exp_avg, exp_avg_sq) with
// attributes global_shape, local_shape and local_offset (the tensor-parallel slice the writer held),
// flat_begin (where in that slice the piece starts) and hash64 (checksum of the values). Any layout
// finds its slice by mapping pieces to global element indices, so a checkpoint loads on any
// (tp, pp, dp, distributed optimizer, v). Root attributes carry the format version, checkpoint id,
// step, consumed samples, layout, dtrain version, the resolved configuration and the identity of the
// tokenizer of the training data (src/tokenizer; absent, in older checkpoints, means byte).
// A save is written under a temporary name and published (renamed, then `latest` replaced) only after
// every rank reported success; a failure or a kill at any moment leaves the last checkpoint untouched.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/rank_plan.hpp"

namespace dtrain {

constexpr int kCheckpointFormat = 1;
extern const char* const kPieceKinds[3];  // "param", "exp_avg", "exp_avg_sq"

struct CheckpointMeta {
  std::int64_t step = 0;               // optimizer steps done (the data position and LR schedule follow)
  std::int64_t consumed_samples = 0;
  std::int64_t tp = 1, cp = 1, pp = 1, dp = 1, v = 1;
  std::string order = "tp-cp-dp-pp";
  std::int64_t distributed_optimizer = 0;
  std::string config_text;             // the resolved input.ini
  std::string version;
  std::string tokenizer = "byte";      // the tokenizer's identity
  std::uint64_t checkpoint_id = 0;     // random per save: a shard or manifest from another save is refused
};

// One rank's state as the checkpoint sees it, in fp32 host memory: its plan says which tensors and
// optimizer ranges it holds and which of them it writes. "param" pieces hold the fp32 weights an
// optimizer updates: the parameters themselves in an fp32 run (written from data-parallel rank 0, a
// piece per tensor), the master weights in a bf16 run (written like the moments, by the owner of each
// optimizer range). A checkpoint therefore loads into either precision and any layout.
struct RankState {
  const RankPlan* plan = nullptr;
  float* params = nullptr;                 // (arena_size) the parameters, arena order; under ZeRO-3 only
                                           // plan->param_ranges() hold values (read and written)
  float* master = nullptr;                 // bf16 runs: fp32 master weights, back to back over the
                                           // optimizer ranges; null when params are the master (fp32)
  float* moments[2] = {nullptr, nullptr};  // AdamW first/second moments, back to back over the optimizer
                                           // ranges; null when there is no optimizer state
};

// Every piece a rank writes: kind (index into kPieceKinds), tensor, the piece's number within the
// tensor, its values, and where in the tensor's slice it starts (flat) and how many elements it has.
using PieceVisitor = std::function<void(int kind, const TensorSpec& t, int index, const float* data, std::int64_t flat_begin,
                                        std::int64_t count)>;
void for_each_piece(const RankState& state, const PieceVisitor& visit);
// What a shard is written from: calls the visitor on each piece to write, in for_each_piece's order
// (for_each_piece over a RankState, or a StateSnapshot's copy of it).
using PieceSource = std::function<void(const PieceVisitor&)>;

struct IoStats {
  double seconds = 0.0;        // the whole save, first phase to publication, on this rank
  double write_seconds = 0.0;  // the slowest rank's write phase
  double bytes = 0.0;          // over all ranks
  std::string path;
};

// Collective: a random checkpoint id, the same on every rank of comm.
std::uint64_t new_checkpoint_id(MPI_Comm comm);

// Collective: writes and publishes step `meta.step` under dir; removes the oldest published checkpoints
// beyond keep_last (ckpt/directory.hpp: by publication order, never `latest`). Throws UserError on every
// rank if any rank failed (the previous checkpoint stays). pause_s: debug.save_write_delay_s.
IoStats save_checkpoint(MPI_Comm world, const std::string& dir, const CheckpointMeta& meta, const RankState& state,
                        int keep_last, double pause_s = 0.0);

// save_checkpoint in its three phases, for a caller that writes away from the main thread:
//   begin_save   collective: the temporary step directory (rank 0 creates it);
//   write_shard_of_rank  local: this rank's shard into it. No MPI call, no exception (a failure is
//                returned), and while it runs it must be the process's only HDF5 user;
//   finish_save  collective: every rank's outcome agreed, then rank 0 publishes and prunes.
struct SaveTarget {
  std::string dir, tmp;  // checkpoint.dir, and the temporary directory the shards go to
  CheckpointMeta meta;
  int keep_last = 1;
};
struct ShardWrite {  // one rank's write phase
  bool wrote = false;  // false: the rank owns no unique state (no shard)
  std::uint64_t bytes = 0, hash = 0;
  double seconds = 0.0;
  std::string error;  // empty: written (fsynced)
};
SaveTarget begin_save(MPI_Comm world, const std::string& dir, const CheckpointMeta& meta, int keep_last);
// pause_s > 0 (tests: debug.save_write_delay_s): sleeps that long after the first piece, the shard half written.
ShardWrite write_shard_of_rank(const SaveTarget& target, int rank, const PieceSource& pieces, double pause_s);
// pruned_aside: rank 0 sets the checkpoints it prunes aside there (prune_checkpoints) instead of removing them.
IoStats finish_save(MPI_Comm world, const SaveTarget& target, const ShardWrite& mine,
                    std::vector<std::string>* pruned_aside = nullptr);
// Collective: true on every rank when `mine` is true on every rank.
bool all_ranks(MPI_Comm world, bool mine);

// The pieces of a checkpoint directory, verified against its manifest.
class CheckpointReader {
 public:
  // Reads the manifest and every shard's index. verify_files: also hash every shard file against the
  // manifest (one rank is enough). Throws UserError naming the file on any inconsistency.
  CheckpointReader(const std::string& step_dir, bool verify_files);
  const CheckpointMeta& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }
  // The whole global tensor of a kind, assembled from the pieces; every element must be covered.
  std::vector<float> global_tensor(const std::string& kind, const std::string& name) const;
  std::vector<std::string> tensor_names() const;
  std::vector<std::int64_t> global_shape(const std::string& name) const;
  bool has_kind(const std::string& kind) const;
  std::vector<std::string> shard_files() const { return shards_; }
  double total_bytes() const { return bytes_; }

 private:
  struct Piece {
    std::string file, dataset;
    std::vector<std::int64_t> global_shape, local_shape, local_offset;
    std::int64_t flat_begin = 0, count = 0;
    std::uint64_t hash = 0;
  };
  // UserError unless the piece's shapes, offset and start describe a slice inside its tensor.
  static void check_piece_geometry(const Piece& p, const std::string& path);
  std::string dir_;
  CheckpointMeta meta_;
  std::vector<std::string> shards_;
  std::map<std::string, std::vector<Piece>> pieces_;  // key: kind + "/" + tensor name
  double bytes_ = 0.0;
};

// Puts the global tensor t (global: all its elements) into a rank's state: its slice of the parameters
// and, with master weights (bf16 runs), of the master weights.
void place_global_param(const RankPlan& plan, const TensorSpec& t, const std::vector<float>& global, RankState& state);
// Fills a rank's parameters and optimizer state from a checkpoint (any layout).
void load_rank_state(const CheckpointReader& reader, RankState& state);

// Writes a sharded checkpoint for a layout from a reader: every rank of the new layout's shard, as if
// saved by that layout (ckpt-consolidate --reshard).
struct ReshardLayout {
  int tp = 1, pp = 1, dp = 1, v = 1;
  bool distributed_optimizer = false;
};

}  // namespace dtrain
