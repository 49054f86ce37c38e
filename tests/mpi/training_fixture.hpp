// Shared by the MPI training tests: a deterministic pseudo-text data set written by rank 0 into a
// directory all ranks share, and a small training run returning its per-step losses.
#pragma once
#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/trainer.hpp"

namespace dtrain::testing {

// Writes PREFIX.train.bin / PREFIX.val.bin once per test process group; returns PREFIX.
std::string make_test_data(MPI_Comm comm);
// Fine-tuning-like data: documents of 3 to 40 tokens of a vocabulary of 64, each ending with the
// end-of-document token kTestEod, and a loss mask that trains on the second half of each (its
// "answer"), beside PREFIX.train.bin and PREFIX.val.bin; returns PREFIX.
constexpr int kTestEod = 63;
std::string make_document_test_data(MPI_Comm comm, bool counted = true);  // counted = false: a mask of zeros throughout
// Removes the data directory (rank 0, after a barrier).
void remove_test_data(MPI_Comm comm, const std::string& prefix);

struct RunResult {
  std::vector<double> losses;  // per training step, then the validation loss
};

// Trains cfg on the ranks of comm for cfg.training.train_iters steps; calls before(trainer) ahead of the
// first step and inspect(trainer) at the end. On the cuda backend the ranks use the MPI backend of the
// communication layer (staged through pinned memory), which lets several ranks share one GPU.
// eod: the end-of-document token of the run's data (the tokenizer's in a real run).
RunResult train(MPI_Comm comm, const Config& cfg, const std::function<void(Trainer&)>& inspect = {},
                kernels::Backend backend = kernels::Backend::host, const std::function<void(Trainer&)>& before = {},
                std::optional<int> eod = std::nullopt);

// The one-rank reference of a comparison: rank 0 of comm trains cfg alone (on MPI_COMM_SELF; inspect
// runs there only) while the other ranks wait without taking its cores, then every rank gets its losses.
RunResult train_alone_on_rank0(MPI_Comm comm, const Config& cfg, const std::function<void(Trainer&)>& inspect = {},
                               const std::function<void(Trainer&)>& before = {}, std::optional<int> eod = std::nullopt);

// How far trained weights w are from the reference's ref, measured against how far training moved the
// reference from its initial weights init: the largest over the tensors of table (arena order of the
// whole model) of |w - ref| / |ref - init|, and that tensor's name. A fault in one small tensor's
// gradient (a LayerNorm's, a bias's) moves that tensor's update by a large part of itself, where a
// distance over all weights would dilute it; rounding differences stay the size of the update's own.
struct UpdateDeviation {
  double relative = 0.0;
  std::string tensor;
};
UpdateDeviation update_deviation(const std::vector<float>& w, const std::vector<float>& ref, const std::vector<float>& init,
                                 const TensorTable& table);

// The relative deviation allowed between two fp32 runs that add the same numbers in different orders
// (another layout, another reduction order), `steps` optimizer steps in, when the longest sum whose
// order differs has `terms` summands. Any order of a sum of n terms lies within (n - 1) * u of the sum
// of its magnitudes from the exact sum (u = 2^-24, fp32's unit roundoff; Higham, Accuracy and
// Stability, 4.2), so two orders differ by at most 2 * n * u, whatever order a CPU's vector width or
// BLAS blocking picks. Each optimizer step carries such a difference into the weights once more, at
// first order, so after s steps losses, and weights measured against their update (update_deviation:
// Adam's update m / sqrt(v) moves with the gradient's relative difference, the bound above times how
// much the gradient's sum cancels; tests take n as a step's token count, the longest sum a gradient
// has, above the few partial sums a layout actually reorders), differ by at most (s + 1) * 2 * n * u. First
// order holds where Adam's update is smooth in the gradient: where eps is far above the gradients'
// rounding noise (a test that reorders gradient sums sets optimizer.eps so; with eps at 1e-8 an element
// whose gradient is noise moves by lr * sign(noise), and the runs drift apart by far more). A real
// fault (a wrong slice, a missing reduction, a lost micro-batch) moves losses by 1e-2 or more.
inline double reorder_tolerance(long terms, int steps) { return (steps + 1.0) * 2.0 * static_cast<double>(terms) * 0x1p-24; }

// The relative deviation allowed between two bf16 runs (bf16 storage, fp32 arithmetic, fp32 master
// weights) that differ only in fp32 summation order: bf16's unit roundoff 2^-8. A last-bit fp32
// difference of a value that lies at a bf16 rounding boundary moves its stored copy by one bf16 step;
// every stored activation, gradient and weight copy is resolved to 2^-8 relative, so two such runs agree
// to that resolution and no closer than it can be asked. The loss (a mean of per-token cross-entropies
// of bf16 logits) and the master weights (Adam's updates, with eps above the noise, are smooth in
// gradients resolved to 2^-8) follow at the same relative size. A real fault is 1e-2 or more (2.5x).
constexpr double kBf16Resolution = 0x1p-8;

// The same for fp16 runs (fp16 storage, fp32 arithmetic, fp32 master weights, a loss scale that no
// layout overflows): fp16's unit roundoff 2^-11 (10 stored mantissa bits), by the argument above. A
// run that skipped a step another did not is off by a whole update (1e-2 or more).
constexpr double kFp16Resolution = 0x1p-11;

// The same for fp8 runs (system.precision = fp8: bf16 storage, the blocks' linear layers on operands
// rounded to fp8 at power-of-two scales from amaxes that every layout reduces exactly): the argument
// above at the coarsest rounding an operand gets. A bf16 step of an operand that lies at an fp8 rounding
// boundary moves its fp8 copy by one fp8 step: the forward's operands (E4M3, 3 stored mantissa bits)
// by 2^-4 relative, the output gradients (E5M2, 2 bits) by 2^-3. Losses follow the forward's, weights
// (Adam's updates, smooth in gradients resolved to 2^-3) the gradients'.
constexpr double kFp8ForwardResolution = 0x1p-4;
constexpr double kFp8GradientResolution = 0x1p-3;

}  // namespace dtrain::testing
