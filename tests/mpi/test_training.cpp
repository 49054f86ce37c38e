// Training at the job's rank count: the same run twice gives bit-identical losses, and data-parallel
// training over all ranks matches one rank training alone on the same global batches.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>

#include "config/load.hpp"
#include "mpi/training_fixture.hpp"

using namespace dtrain;

TEST_CASE("same seed twice gives bit-identical losses; data parallel matches one rank", "[mpi][training]") {
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  // global batch 8 divides by every dp in {1, 2, 4, 8}
  const Config cfg = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                                 "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=6\neval_iters=2\n"
                                 "[optimizer]\nlr=3e-3\nwarmup_iters=2\n", "test",
                                 {"--data.path=" + data, "--optimizer.eps=1e-4"});  // see reorder_tolerance
  const auto first = testing::train(MPI_COMM_WORLD, cfg).losses;
  const auto second = testing::train(MPI_COMM_WORLD, cfg).losses;
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i] == second[i]);  // bitwise
  CHECK(first[cfg.training.train_iters - 1] < first[0]);                          // it learns

  // Same global batches on one rank alone: only the summation order differs, in sums of at most the
  // 8 x 16 = 128 tokens of a step (a weight gradient's; the MLP's 128 inputs are as long), so every loss
  // within reorder_tolerance(128, 6) (the validation loss follows all 6 updates): 1.1e-4.
  const auto alone = testing::train_alone_on_rank0(MPI_COMM_WORLD, cfg).losses;
  const double tolerance = testing::reorder_tolerance(8 * 16, cfg.training.train_iters);
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO("step " << i << " loss " << first[i] << " one rank " << alone[i]);
    CHECK(std::abs(first[i] - alone[i]) <= tolerance * std::abs(alone[i]));
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// Fine-tuning data whose loss mask is zero throughout: no global batch has a counted target, so the
// loss is 0 (the mean divides by one, not by zero: no NaN), every gradient is 0, and AdamW without weight
// decay leaves every weight as it was, bit for bit, at the job's layout (dp over all ranks).
TEST_CASE("batches with no counted target train nothing and divide by one", "[mpi][training][documents]") {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::string data = testing::make_document_test_data(MPI_COMM_WORLD, /*counted=*/false);
  const Config cfg = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                                 "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=3\neval_iters=1\n"
                                 "[optimizer]\nlr=3e-3\nwarmup_iters=1\nweight_decay=0\n", "test",
                                 {"--data.path=" + data, "--data.reset_attention_mask=true", "--data.eod_mask_loss=true"});
  const std::size_t size = rank == 0 ? whole_model_plan(cfg, 1).arena_size : 0;
  std::vector<float> before(size), after(size);
  const auto run = testing::train(
      MPI_COMM_WORLD, cfg, [&](Trainer& t) { t.gather_full_model(rank == 0 ? after.data() : nullptr); }, kernels::Backend::host,
      [&](Trainer& t) { t.gather_full_model(rank == 0 ? before.data() : nullptr); }, testing::kTestEod);
  REQUIRE(run.losses.size() == 4);  // 3 steps and the validation loss
  for (double loss : run.losses) CHECK(loss == 0.0);
  if (rank == 0) CHECK((after == before));
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// fp16 (fp16 storage, fp32 arithmetic and master weights, dynamic loss scaling from 256, doubling every
// 4 clean steps) follows fp32 on the same global batches: every stored value is fp32's rounded to
// fp16's 2^-11, so the runs agree within bf16's resolution 2^-8 (kBf16Resolution: the bf16 tests'
// tolerance, 8 of fp16's roundings; measured 6e-5 here). Adam's update is nearly blind to a gradient's
// scale except through eps, so eps is 1e-2, near the gradients' size: gradients left scaled then move
// the losses by 1e-1 (measured), 6x the tolerance.
TEST_CASE("fp16 training with loss scaling follows fp32", "[mpi][training][fp16]") {
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const std::string ini = "[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                          "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=10\neval_iters=2\n"
                          "[optimizer]\nlr=3e-3\nwarmup_iters=2\n";
  const Config fp32 = load_config(ini, "test", {"--data.path=" + data, "--optimizer.eps=1e-2"});
  const Config fp16 = load_config(ini, "test",
                                  {"--data.path=" + data, "--optimizer.eps=1e-2", "--system.precision=fp16",
                                   "--optimizer.initial_loss_scale=256", "--optimizer.loss_scale_window=4"});
  const auto reference = testing::train(MPI_COMM_WORLD, fp32).losses;
  double scale = 0.0;
  const auto half = testing::train(MPI_COMM_WORLD, fp16, [&](Trainer& t) { scale = t.loss_scaler()->scale(); }).losses;
  CHECK(scale == 256.0 * 4);  // grown at steps 4 and 8: no step overflowed
  REQUIRE(half.size() == reference.size());
  for (std::size_t i = 0; i < half.size(); ++i) {
    INFO("step " << i << " fp32 loss " << reference[i] << " fp16 loss " << half[i]);
    CHECK(std::abs(half[i] - reference[i]) <= testing::kBf16Resolution * std::abs(reference[i]));
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}
