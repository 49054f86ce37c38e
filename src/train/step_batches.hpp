// StepBatches: one rank's micro-batches of a step, read by a SampleReader into a pinned host batch and
// put in the device's memory: token ids and targets and, when the data calls for them, the loss mask,
// the document starts and the position ids (planes of (m, B, T) each). Under context parallelism whole
// samples are read and the rank keeps its two chunks of each plane. On a GPU each pending step has a
// pinned batch of its own, whose queued copy may not have run yet (the host rewrites one only after a
// settle); on the host one batch serves every step, and the device's memory is that batch itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/sample_reader.hpp"
#include "plan/activation_layout.hpp"
#include "runtime/arena.hpp"
#include "runtime/device.hpp"

namespace dtrain {

// A step's batch in the device's memory; the optional planes are null when the run has none.
struct BatchView {
  const int* tokens = nullptr;
  const int* targets = nullptr;
  const float* loss_mask = nullptr;
  const int* doc_start = nullptr;
  const int* positions = nullptr;
};

class StepBatches {
 public:
  // readers: every reader the run loads from (training, validation): the planes are those any writes.
  StepBatches(Device& device, const ActivationDims& dims, int micro_batches, int micro_batch, int seq_length, int pending_slots,
              const std::vector<const SampleReader*>& readers);

  // Step `step` of `stream` for data-parallel rank `dp_rank` (its block of micro_batches x micro_batch
  // global samples) into pending slot `slot`, then to the device (queued: in the device's queue, the
  // host not waiting). Returns the targets that count in this rank's whole samples.
  std::uint64_t load(const SampleReader& reader, std::uint64_t seed, const std::string& stream, std::uint64_t step, int dp_rank,
                     std::size_t slot, bool queued);
  BatchView view();  // of the last load
  bool has_loss_mask() const { return mask_ >= 0; }

 private:
  std::uint32_t* device_plane(int p);
  Device& device_;
  ActivationDims dims_;
  int micro_batches_, micro_batch_, seq_length_;
  int planes_ = 2, mask_ = -1, doc_ = -1, pos_ = -1;  // plane indices (-1: none)
  std::size_t elements_;                               // per plane: m x B x T of the rank's rows
  std::vector<PinnedBuffer> host_;
  Arena device_batch_;  // on a GPU; on the host the pinned batch is the device's memory
  std::size_t slot_ = 0;
};

}  // namespace dtrain
