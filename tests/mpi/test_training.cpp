// Training at the job's rank count: the same run twice gives bit-identical losses, and data-parallel
// training over all ranks matches one rank training alone on the same global batches.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>
#include <unistd.h>

#include <filesystem>

#include "config/load.hpp"
#include "data/token_file.hpp"
#include "parallel/training_plan.hpp"
#include "runtime/parallel_state.hpp"
#include "train/trainer.hpp"

using namespace dtrain;

namespace {

// Token files of a deterministic pseudo-text, written by rank 0 into a directory all ranks share
// (named after rank 0's pid, so concurrent test jobs do not collide).
std::string make_data(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, comm);
  const std::string prefix =
      (std::filesystem::temp_directory_path() / ("dtrain_test_training." + std::to_string(pid)) / "data").string();
  if (rank == 0) {
    std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
    std::vector<std::uint32_t> tokens;
    const std::string words[] = {"the ", "whale ", "sea ", "ship ", "captain ", "white ", "and ", "of "};
    std::uint32_t x = 12345;
    while (tokens.size() < 20000) {
      x = x * 1103515245u + 12345u;
      for (char c : words[(x >> 16) % 8]) tokens.push_back(static_cast<unsigned char>(c));
    }
    TokenFile::write(prefix + ".train.bin", tokens, 256);
    TokenFile::write(prefix + ".val.bin", std::vector<std::uint32_t>(tokens.begin(), tokens.begin() + 4000), 256);
  }
  MPI_Barrier(comm);
  return prefix;
}

Config config_for(const std::string& data, int world) {
  // global batch 8 divides by every dp in {1, 2, 4, 8}
  Config c = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=256\n"
                         "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=6\neval_iters=2\n"
                         "[optimizer]\nlr=3e-3\nwarmup_iters=2\n", "test", {"--data.path=" + data});
  c.model.micro_batch = 1;
  (void)world;
  return c;
}

std::vector<double> train_losses(MPI_Comm comm, const Config& cfg) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const TrainingPlan plan = make_plan(cfg, size);
  const ParallelState ps(comm, RankLayout(plan.sizes, cfg.system.rank_order));
  Trainer trainer(cfg, plan, ps, kernels::kernel_table(kernels::Backend::host));
  std::vector<double> losses;
  for (int s = 0; s < cfg.training.train_iters; ++s) losses.push_back(trainer.train_step(s).loss);
  losses.push_back(trainer.evaluate());
  return losses;
}

}  // namespace

TEST_CASE("same seed twice gives bit-identical losses; data parallel matches one rank", "[mpi][training]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const Config cfg = config_for(make_data(MPI_COMM_WORLD), world);
  const auto first = train_losses(MPI_COMM_WORLD, cfg);
  const auto second = train_losses(MPI_COMM_WORLD, cfg);
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i] == second[i]);  // bitwise
  CHECK(first[cfg.training.train_iters - 1] < first[0]);                          // it learns

  // Same global batches on one rank alone: only the summation order differs, so float32 rounding
  // (~1e-7 per op, over ~1e3 accumulations) bounds the difference well below 1e-4 relative.
  const auto alone = train_losses(MPI_COMM_SELF, cfg);
  MPI_Barrier(MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::filesystem::remove_all(std::filesystem::path(cfg.data.path).parent_path());
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO("step " << i << " dp=" << world << " loss " << first[i] << " one rank " << alone[i]);
    CHECK(std::abs(first[i] - alone[i]) <= 1e-4 * std::abs(alone[i]));
  }
}
