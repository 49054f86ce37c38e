// What pruning keeps (ckpt/directory.hpp, kept_checkpoints): the keep_last newest publications and the
// keep_best lowest validation losses (ties: the earlier publication), worked by hand.
#include <catch2/catch.hpp>

#include "ckpt/directory.hpp"

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
