// Shared by the MPI training tests: a deterministic pseudo-text data set written by rank 0 into a
// directory all ranks share, and a small training run returning its per-step losses.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/trainer.hpp"

namespace dtrain::testing {

// Writes PREFIX.train.bin / PREFIX.val.bin once per test process group; returns PREFIX.
std::string make_test_data(MPI_Comm comm);
// Removes the data directory (rank 0, after a barrier).
void remove_test_data(MPI_Comm comm, const std::string& prefix);

struct RunResult {
  std::vector<double> losses;  // per training step, then the validation loss
};

// Trains cfg on the ranks of comm for cfg.training.train_iters steps; calls inspect(trainer) at the end.
// On the cuda backend the ranks use the MPI backend of the communication layer (staged through pinned
// memory), which lets several ranks share one GPU.
RunResult train(MPI_Comm comm, const Config& cfg, const std::function<void(Trainer&)>& inspect = {},
                kernels::Backend backend = kernels::Backend::host);

// The one-rank reference of a comparison: rank 0 of comm trains cfg alone (on MPI_COMM_SELF; inspect
// runs there only) while the other ranks wait without taking its cores, then every rank gets its losses.
RunResult train_alone_on_rank0(MPI_Comm comm, const Config& cfg, const std::function<void(Trainer&)>& inspect = {});

// Relative L2 distance |w - ref| / |ref| of two weight vectors.
double relative_distance(const std::vector<float>& w, const std::vector<float>& ref);

}  // namespace dtrain::testing
