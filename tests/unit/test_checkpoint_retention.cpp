// What pruning keeps (ckpt/directory.hpp, kept_checkpoints): the keep_last newest publications and the
// keep_best lowest validation losses (ties: the earlier publication), worked by hand; the names that
// `latest` and a manifest may give.
#include <catch2/catch.hpp>

#include <fstream>

#include "ckpt/directory.hpp"
#include "ckpt/shard.hpp"
#include "support/scratch_files.hpp"
#include "support/user_error.hpp"

using namespace dtrain;

TEST_CASE("checkpoints kept: the newest and the best validations", "[checkpoint][retention]") {
  // Publication order; steps 2 and 8 have no validation.
  std::vector<PublishedCheckpoint> all(6);
  const double losses[6] = {-1, 3.0, 2.5, -1, 2.5, 2.7};
  for (int i = 0; i < 6; ++i) {
    all[i].step = 2 * (i + 1);
    all[i].sequence = i + 1;
    if (losses[i] > 0) all[i].val_loss = losses[i];
  }
  using Kept = std::vector<bool>;
  CHECK(kept_checkpoints(all, {2, 0}) == Kept{false, false, false, false, true, true});
  // The best two: 2.5 at publications 2 and 4 (the tie keeps both: two places); the newest two besides.
  CHECK(kept_checkpoints(all, {2, 2}) == Kept{false, false, true, false, true, true});
  // One best: the tie goes to the earlier publication.
  CHECK(kept_checkpoints(all, {1, 1}) == Kept{false, false, true, false, false, true});
  // keep_last is at least 1; more best than measured keeps every measured one.
  CHECK(kept_checkpoints(all, {0, 9}) == Kept{false, true, true, false, true, true});
}

// keep_best ranks the run's own checkpoints: another run's lower validation losses in the same directory
// took its places, so its best was pruned and early stopping had nothing to load.
TEST_CASE("another run's checkpoints do not take the places of this run's best", "[checkpoint][retention]") {
  std::vector<PublishedCheckpoint> all(5);
  const double losses[5] = {1.0, 1.5, 3.0, 2.5, 2.7};  // publications 1-2 by run 7, 3-5 by run 9
  for (int i = 0; i < 5; ++i) {
    all[i].step = 2 * (i + 1);
    all[i].sequence = i + 1;
    all[i].val_loss = losses[i];
    all[i].run_id = i < 2 ? 7 : 9;
  }
  using Kept = std::vector<bool>;
  CHECK(kept_checkpoints(all, {1, 1, 9}) == Kept{false, false, false, true, true});
  CHECK(kept_checkpoints(all, {1, 1, 7}) == Kept{true, false, false, false, true});
  CHECK(kept_checkpoints(all, {1, 2, 9}) == Kept{false, false, false, true, true});
  CHECK(kept_checkpoints(all, {1, 3, 9}) == Kept{false, false, true, true, true});
}

// `latest` and the manifest name files inside the checkpoint directory: a name that leads out of it
// ("../other/step_00000100", a shard "../../x.h5") is refused, not followed.
TEST_CASE("latest and the manifest name only entries of their directory", "[checkpoint]") {
  testing::TempDir dir;
  const auto write = [](const std::string& path, const std::string& text) { std::ofstream(path) << text; };
  write(dir.file("latest"), "step_00000002\n");
  CHECK(latest_checkpoint(dir.file("")) == dir.file("") + "/step_00000002");
  for (const char* name : {"../elsewhere/step_00000002", "..", "/etc"}) {
    write(dir.file("latest"), std::string(name) + "\n");
    CHECK(testing::contains(testing::error_of([&] { latest_checkpoint(dir.file("")); }), "which is not a step directory in"));
  }
  const std::string manifest = "dtrain-checkpoint-manifest 1\ncheckpoint_id 0123456789abcdef\nstep 2\nsequence 1\nshards 1\n";
  write(dir.file("manifest.txt"), manifest + "shard shard_00000.h5 10 0123456789abcdef\n");
  CHECK(read_manifest(dir.file("manifest.txt")).shards.at(0).file == "shard_00000.h5");
  write(dir.file("manifest.txt"), manifest + "shard ../../x.h5 10 0123456789abcdef\n");
  CHECK(testing::contains(testing::error_of([&] { read_manifest(dir.file("manifest.txt")); }),
                          "shard '../../x.h5' is not a file name in the step directory"));
  // The optional lines after the shards, in either order, each at most once.
  const std::string shard = "shard shard_00000.h5 10 0123456789abcdef\n";
  write(dir.file("manifest.txt"), manifest + shard + "run 00000000000000a7\nval_loss 2.5\n");
  const Manifest m = read_manifest(dir.file("manifest.txt"));
  CHECK(m.run_id == 0xa7);
  CHECK(m.val_loss == 2.5);
  for (const char* bad : {"run 0000000000000000\n", "run 12\n", "val_loss 1\nval_loss 2\n", "runs 00000000000000a7\n"}) {
    write(dir.file("manifest.txt"), manifest + shard + bad);
    CHECK(testing::contains(testing::error_of([&] { read_manifest(dir.file("manifest.txt")); }), "is malformed"));
  }
}
