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
// step, consumed samples, layout, dtrain version, the resolved configuration, the identity of the
// tokenizer of the training data (src/tokenizer; absent, in older checkpoints, means byte), the
// optimizer updates skipped and an fp16 run's loss scaler.
// A save is written under a temporary name and published (renamed, then `latest` replaced) only after
// every rank reported success; a failure or a kill at any moment leaves the last checkpoint untouched.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checksum.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/h5_file.hpp"
#include "ckpt/io_phases.hpp"
#include "comm/host_comm.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {

constexpr int kCheckpointFormat = 1;
extern const char* const kPieceKinds[3];  // "param", "exp_avg", "exp_avg_sq"

struct CheckpointMeta {
  std::int64_t step = 0;               // optimizer steps done (the data position and LR schedule follow)
  std::int64_t consumed_samples = 0;
  // The layout that saved it: attribute `layout` = {tp, cp, pp, dp, v, ep} (ep absent in older
  // checkpoints: 1), `distributed_optimizer` 0/1 and `zero_stage` (absent in older checkpoints: 1
  // with the distributed optimizer).
  ParallelLayout layout;
  std::string order = "tp-cp-dp-pp";
  std::string config_text;             // the resolved input.ini
  std::string version;
  std::string tokenizer = "byte";      // the tokenizer's identity
  std::uint64_t checkpoint_id = 0;     // random per save: a shard or manifest from another save is refused
  // Optimizer updates skipped (fp16 overflows; attribute `skipped_steps`, absent = 0): the learning-rate
  // schedule and AdamW's step count follow step - skipped_steps.
  std::int64_t skipped_steps = 0;
  // The 1-based steps whose batches are skipped (training.iterations_to_skip and the rollbacks' bad
  // steps; attribute `skipped_batches`, absent = none): a resume goes on skipping them.
  std::vector<std::int64_t> skipped_batches;
  // The validation loss measured at this step (the manifest's val_loss line; checkpoint.keep_best).
  std::optional<double> val_loss;
  // The run that published it (the manifest's run line; 0 in older checkpoints): drawn at a fresh start,
  // kept by a resume and a reshard. keep_best ranks only the run's own checkpoints.
  std::uint64_t run_id = 0;
  // The run's validations so far, for early stopping (attributes `best_val_loss`, `best_val_step`,
  // `stale_validations`; absent before the first validation and in older checkpoints).
  struct Validations {
    double best_loss = 0.0;
    std::int64_t best_step = 0, stale = 0;
  };
  std::optional<Validations> validations;
  // The loss scaler of an fp16 run (attributes `loss_scale` and `loss_scale_trackers` = {growth,
  // hysteresis}); absent in fp32 and bf16 runs.
  struct LossScaler {
    double scale = 0.0;
    std::int64_t growth_tracker = 0, hysteresis_tracker = 0;
  };
  std::optional<LossScaler> loss_scaler;
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
  IoPhaseSeconds phases{};     // per phase, the slowest rank's (publication: rank 0's)
  std::string path;
};

// Collective: a random checkpoint id, the same on every rank of comm.
std::uint64_t new_checkpoint_id(HostComm comm);

// Collective: writes and publishes step `meta.step` under dir; removes the published checkpoints `keep`
// does not keep (ckpt/directory.hpp: the keep_last newest publications and the keep_best lowest
// validation losses, never `latest`). Throws UserError on every
// rank if any rank failed (the previous checkpoint stays). pause_s: debug.save_write_delay_s.
IoStats save_checkpoint(HostComm world, const std::string& dir, const CheckpointMeta& meta, const RankState& state,
                        Retention keep, double pause_s = 0.0);

// save_checkpoint in its three phases, for a caller that writes away from the main thread:
//   begin_save   collective: the temporary step directory (rank 0 creates it);
//   write_shard_of_rank  local: this rank's shard into it. No MPI call, no exception (a failure is
//                returned), and while it runs it must be the process's only HDF5 user;
//   finish_save  collective: every rank's outcome agreed, then rank 0 publishes and prunes.
struct SaveTarget {
  std::string dir, tmp;  // checkpoint.dir, and the temporary directory the shards go to
  CheckpointMeta meta;
  Retention keep;
};
struct ShardWrite {  // one rank's write phase
  bool wrote = false;  // false: the rank owns no unique state (no shard)
  std::uint64_t bytes = 0, hash = 0;
  double seconds = 0.0;
  IoPhaseSeconds phases{};  // where the seconds went
  std::string error;  // empty: written (fsynced)
};
SaveTarget begin_save(HostComm world, const std::string& dir, const CheckpointMeta& meta, Retention keep);
// pause_s > 0 (tests: debug.save_write_delay_s): sleeps that long after the first piece, the shard half written.
ShardWrite write_shard_of_rank(const SaveTarget& target, int rank, const PieceSource& pieces, double pause_s);
// pruned_aside: rank 0 sets the checkpoints it prunes aside there (prune_checkpoints) instead of removing them.
IoStats finish_save(HostComm world, const SaveTarget& target, const ShardWrite& mine,
                    std::vector<std::string>* pruned_aside = nullptr);
// Collective: true on every rank when `mine` is true on every rank.
bool all_ranks(HostComm world, bool mine);

// The pieces of a checkpoint directory, verified against its manifest.
class CheckpointReader {
 public:
  // Reads the manifest and every shard's index (attributes only). hash_files: also hash every shard
  // file against the manifest here. Throws UserError naming the file on any inconsistency.
  CheckpointReader(const std::string& step_dir, bool hash_files);
  // Hashes shard files rank, rank + size, ... against the manifest (run by every rank of a group inside
  // collective_check: together they check every file once). Throws UserError naming a bad file.
  void verify_files(int rank, int size) const;
  const CheckpointMeta& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }

  // Checksums of pieces read in parts over several read_slice calls, each part in order: a piece's
  // checksum is checked when its last element has been read (consolidate and verify read every piece
  // so). A piece read out of order, or only in part, is not checked here; verify_files covers it.
  struct RunningHashes {
    struct State {
      h5::Hasher hasher;
      std::int64_t next = 0;  // the piece's next element expected; -1 once it was read out of order
    };
    std::map<const void*, State> pieces;
  };
  // Elements [begin, begin + count) (flat, in the slice) of the slice `t` describes (its global shape,
  // tensor-parallel slice and name; global_geometry() for the whole tensor) of one kind into out[0, count):
  // reads only the parts of the pieces that overlap it (hyperslabs). Every element must be covered
  // exactly once. Pieces read whole in this call (or completed in `running`) are checked against
  // their checksums.
  void read_slice(const std::string& kind, const TensorSpec& t, std::size_t begin, std::size_t count, float* out,
                  RunningHashes* running = nullptr) const;
  // The whole global tensor of a kind (read_slice over all of it).
  std::vector<float> global_tensor(const std::string& kind, const std::string& name) const;
  // A TensorSpec of the whole tensor `name` (local = global shape), for read_slice.
  TensorSpec global_geometry(const std::string& name) const;
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
    std::int64_t global_first = 0, global_end = 0;  // global indices of its first element and past its last
    std::uint64_t hash = 0;
  };
  // UserError unless the piece's shapes, offset, start and length describe a run inside its tensor.
  static void check_piece_geometry(const Piece& p, const std::string& path);
  const std::vector<Piece>& pieces_of(const std::string& kind, const std::string& name) const;
  const h5::File& open(const std::string& path) const;  // a few shard files stay open between reads
  std::string dir_;
  CheckpointMeta meta_;
  std::vector<std::string> shards_;
  std::vector<std::uint64_t> shard_hashes_;            // the manifest's, per shard
  std::map<std::string, std::vector<Piece>> pieces_;  // key: kind + "/" + tensor name
  mutable std::map<std::string, h5::File> open_;
  double bytes_ = 0.0;
};

// Fills a rank's state from a source of slices: source(kind, t, begin, count, out) puts elements
// [begin, begin + count) of kind (index into kPieceKinds) of its slice of tensor t into out. The
// parameters are read over plan->param_ranges() only (nothing else of state.params is written), the
// master weights copied from them, the moments (when state has them) read over the optimizer ranges.
using SliceSource = std::function<void(int kind, const TensorSpec& t, std::size_t begin, std::size_t count, float* out)>;
void load_slices(RankState& state, const SliceSource& source);
// Fills a rank's parameters and optimizer state from a checkpoint (any layout), reading only the
// parts of pieces its slices overlap.
void load_rank_state(const CheckpointReader& reader, RankState& state);
// The bytes of the values a rank's state holds (what load_slices fills): the parameters of its tensors
// over plan->param_ranges(), and the master weights and moments it has over its optimizer ranges.
std::size_t rank_state_bytes(const RankState& state);

// What the ranks of a group read from datasets (h5::dataset_bytes_read) while loading, against the
// bytes of the state each holds: the total, and the rank that read the most for its state.
struct ReadReport {
  double total_bytes = 0.0;
  int worst_rank = 0;
  double worst_read = 0.0, worst_state = 0.0;
  std::string text() const;  // "read 12.3 MB of datasets (rank 3 the most for its state: 1.2 MB for 1.2 MB, 1.00x)"
};
// Collective over comm.
ReadReport read_report(HostComm comm, std::uint64_t bytes_read, std::size_t state_bytes);

}  // namespace dtrain
