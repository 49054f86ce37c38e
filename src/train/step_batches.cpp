// StepBatches: planes of the pinned batch, the reads (whole samples under context parallelism, then the
// rank's chunks), and the upload.
#include "train/step_batches.hpp"

#include <algorithm>
#include <cstring>

#include "parallel/context_parallel.hpp"

namespace dtrain {

StepBatches::StepBatches(Device& device, const ActivationDims& dims, int micro_batches, int micro_batch, int seq_length, int pending_slots,
                         const std::vector<const SampleReader*>& readers)
    : device_(device), dims_(dims), micro_batches_(micro_batches), micro_batch_(micro_batch), seq_length_(seq_length),
      elements_(static_cast<std::size_t>(micro_batches) * static_cast<std::size_t>(dims.N())) {
  bool mask = false, doc = false, pos = false;
  for (const SampleReader* r : readers) mask |= r->has_loss_mask(), doc |= r->has_doc_start(), pos |= r->has_positions();
  if (mask) mask_ = planes_++;
  if (doc) doc_ = planes_++;
  if (pos) pos_ = planes_++;
  const std::size_t bytes = static_cast<std::size_t>(planes_) * elements_ * sizeof(std::uint32_t);
  for (int i = 0; i < (device.is_host() ? 1 : pending_slots); ++i) host_.emplace_back(device, bytes);
  if (!device.is_host()) device_batch_ = Arena(device, bytes);
}

std::uint32_t* StepBatches::device_plane(int p) {
  std::uint32_t* base = device_batch_.data() ? device_batch_.as<std::uint32_t>() : host_[slot_].as<std::uint32_t>();
  return base + static_cast<std::size_t>(p) * elements_;
}

std::uint64_t StepBatches::load(const SampleReader& reader, std::uint64_t seed, const std::string& stream, std::uint64_t step,
                                int dp_rank, std::size_t slot, bool queued) {
  slot_ = slot % host_.size();
  std::uint32_t* host = host_[slot_].as<std::uint32_t>();
  const auto plane = [&](int p) { return p < 0 ? nullptr : host + static_cast<std::size_t>(p) * elements_; };
  const long per_micro_batch = dims_.N();
  const std::size_t whole_plane = static_cast<std::size_t>(micro_batch_) * static_cast<std::size_t>(seq_length_);
  // Under context parallelism whole samples are read, and the rank keeps its two chunks of each plane.
  std::vector<std::uint32_t> whole(dims_.cp > 1 ? static_cast<std::size_t>(planes_) * whole_plane : 0);
  std::uint64_t counted = 0;
  for (int mb = 0; mb < micro_batches_; ++mb) {
    const std::uint64_t first = static_cast<std::uint64_t>(dp_rank * micro_batches_ + mb) * static_cast<std::uint64_t>(micro_batch_);
    const std::size_t at = static_cast<std::size_t>(mb) * static_cast<std::size_t>(per_micro_batch);
    const auto into = [&](int p) -> std::uint32_t* {
      if (p < 0) return nullptr;
      return dims_.cp > 1 ? whole.data() + static_cast<std::size_t>(p) * whole_plane : plane(p) + at;
    };
    SampleArrays out;
    out.inputs = reinterpret_cast<int*>(into(0));
    out.targets = reinterpret_cast<int*>(into(1));
    if (reader.has_loss_mask()) out.loss_mask = reinterpret_cast<float*>(into(mask_));
    if (reader.has_doc_start()) out.doc_start = reinterpret_cast<int*>(into(doc_));
    if (reader.has_positions()) out.positions = reinterpret_cast<int*>(into(pos_));
    counted += reader.fill(seed, stream, step, first, micro_batch_, out);
    if (mask_ >= 0 && !reader.has_loss_mask())  // another stream of the run has a mask, this one none: every target counts
      std::fill_n(reinterpret_cast<float*>(into(mask_)), dims_.cp > 1 ? whole_plane : static_cast<std::size_t>(per_micro_batch), 1.0f);
    if (dims_.cp > 1)
      for (int p = 0; p < planes_; ++p) keep_own_chunks(dims_, micro_batch_, seq_length_, into(p), plane(p) + at);
  }
  // To the device (on the host the same memory: nothing moves, and the host device counts what a GPU
  // would wait for).
  const std::size_t bytes = static_cast<std::size_t>(planes_) * elements_ * sizeof(std::uint32_t);
  if (queued)
    device_.upload_queued(device_plane(0), host, bytes);
  else
    device_.copy(device_plane(0), host, bytes);
  return counted;
}

BatchView StepBatches::view() {
  BatchView v;
  v.tokens = reinterpret_cast<const int*>(device_plane(0));
  v.targets = reinterpret_cast<const int*>(device_plane(1));
  if (mask_ >= 0) v.loss_mask = reinterpret_cast<const float*>(device_plane(mask_));
  if (doc_ >= 0) v.doc_start = reinterpret_cast<const int*>(device_plane(doc_));
  if (pos_ >= 0) v.positions = reinterpret_cast<const int*>(device_plane(pos_));
  return v;
}

}  // namespace dtrain
