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

// The relative deviation allowed between two fp32 runs that add the same numbers in different orders
// (another layout, another reduction order), `steps` optimizer steps in, when the longest sum whose
// order differs has `terms` summands. A reordered sum of n terms differs by at most n * u of the sum
// of its magnitudes (u = 2^-24, fp32's unit roundoff; the worst case, whatever order a CPU's vector
// width or BLAS blocking picks). Each optimizer step carries such a difference into the weights once
// more, at first order, so after s steps losses and weights differ by at most (s + 1) * n * u. First
// order holds where Adam's update is smooth in the gradient: where eps is far above the gradients'
// rounding noise (a test that reorders gradient sums sets optimizer.eps so; with eps at 1e-8 an element
// whose gradient is noise moves by lr * sign(noise), and the runs drift apart by far more). A real
// fault (a wrong slice, a missing reduction, a lost micro-batch) moves losses by 1e-2 or more.
inline double reorder_tolerance(long terms, int steps) { return (steps + 1.0) * static_cast<double>(terms) * 0x1p-24; }

}  // namespace dtrain::testing
