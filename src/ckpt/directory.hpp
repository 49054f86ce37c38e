// A checkpoint directory's bookkeeping (checkpoint.dir): the published step directories in the order
// they were published, `latest`, temporaries of interrupted saves, and pruning.
//
// The order of checkpoints is the order of publication (each manifest's sequence number), not the
// step number: a run started afresh (checkpoint.load=none) in a directory that already holds a later
// step of another run publishes after it, becomes `latest`, and keep_last prunes the oldest
// publications first, whichever run made them. Pruning never removes what `latest` names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct PublishedCheckpoint {
  std::string name;          // "step_00000100"
  std::int64_t step = 0;
  std::int64_t sequence = 0;  // publication order (0 for checkpoints older than the sequence)
  std::optional<double> val_loss;  // the validation loss at its step, when one was measured there
  std::uint64_t run_id = 0;        // the run that published it (0: an older checkpoint)
};

// What pruning keeps: the keep_last newest publications, and the keep_best of run `run` with the lowest
// validation loss (checkpoint.keep_best; ties: the earlier publication). Another run's checkpoints in the
// same directory never take the places of this run's best (they would leave early stopping's best
// pruned); keep_last counts every publication.
struct Retention {
  int keep_last = 1;
  int keep_best = 0;
  std::uint64_t run = 0;
};

// The published checkpoints of dir, oldest publication first (ties by step, then name). Step
// directories whose manifest cannot be read are not listed, so nothing prunes them. Pure reading.
std::vector<PublishedCheckpoint> published_checkpoints(const std::string& dir);
// The sequence number the next publication in dir takes.
std::int64_t next_publication_sequence(const std::string& dir);
// Removes the publications `keep` does not keep (keep_last at least 1), never the one `latest` names.
// set_aside: instead of removing them, renames them to ".tmp-pruned-<name>" (no longer published;
// removing gigabytes is left to the caller, e.g. a background thread) and lists the new paths.
void prune_checkpoints(const std::string& dir, Retention keep, std::vector<std::string>* set_aside = nullptr);
// The indices of `all` (publication order) that `keep` keeps. Pure.
std::vector<bool> kept_checkpoints(const std::vector<PublishedCheckpoint>& all, Retention keep);

// The step directory of `step` published by run `run_id` in the first of `dirs` that holds one; "" when
// none does (a directory without it, a manifest of another run or step, or none readable).
std::string find_run_checkpoint(const std::vector<std::string>& dirs, std::int64_t step, std::uint64_t run_id);

// Removes temporaries in dir (".tmp-*": interrupted saves, and pruned checkpoints set aside). Returns
// how many interrupted saves there were.
int remove_stale_temporaries(const std::string& dir);
// The published checkpoint `latest` names; "" if there is no `latest` (a fresh start). An empty
// `latest` is a UserError naming it: checkpoints are never skipped silently.
std::string latest_checkpoint(const std::string& dir);

}  // namespace dtrain
