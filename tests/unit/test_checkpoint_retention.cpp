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
}
