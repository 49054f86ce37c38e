// Trainer: the state a checkpoint saves and loads (fp32 host views of the rank's parameters, master
// weights and moments, staged from the device where they live there) and the gathered global model.
#include "train/trainer.hpp"

#include "common/error.hpp"

namespace dtrain {

namespace {

// A pinned host buffer of `floats` elements (allocated on first use).
float* staging(PinnedBuffer& buffer, Device& device, std::size_t floats) {
  if (buffer.bytes() != floats * sizeof(float)) buffer = PinnedBuffer(device, floats * sizeof(float));
  return buffer.as<float>();
}

}  // namespace

RankState Trainer::host_state() {
  grad_sync_.wait_all_params();
  Device& device = model_->device();
  const RankPlan& rp = model_->plan();
  RankState st;
  st.plan = &rp;
  // fp32 arenas on the host are used in place (not offloaded parameters: the arena holds no slices
  // between uses); anything else gets a pinned fp32 copy.
  auto view = [&](Arena& arena, PinnedBuffer& buffer) {
    return device.is_host() ? arena.as<float>() : staging(buffer, device, arena.bytes() / sizeof(float));
  };
  const bool params_in_place = device.is_host() && rp.precision == Precision::fp32 && !rp.offload_params;
  st.params = params_in_place ? model_->params().as<float>() : staging(staged_params_, device, rp.arena_size);
  if (adamw_.has_master()) st.master = view(adamw_.master(), staged_master_);
  st.moments[0] = view(adamw_.first_moment(), staged_moments_[0]);
  st.moments[1] = view(adamw_.second_moment(), staged_moments_[1]);
  return st;
}

void Trainer::gather_full_model(const SlabSink& sink) {
  grad_sync_.wait_all_params();
  const RankPlan& rp = model_->plan();
  Device& device = model_->device();
  // The fp32 values the pieces come from, on the host: the arena itself where it lives there, else a
  // staged copy. Nothing else of the state is needed.
  RankState st;
  st.plan = &rp;
  const bool master = adamw_.has_master();
  if (master) {
    st.master = device.is_host() ? adamw_.master().as<float>() : staging(staged_master_, device, rp.optimizer_elements());
    if (!device.is_host()) device.copy(st.master, adamw_.master().data(), adamw_.master().bytes());
  }
  // The parameters, where no master weights hold them: all of them, or the frozen tensors (which have
  // none; a rank whose tensors are all frozen has no master weights at all).
  const bool reads_params = !master || rp.has_frozen();
  if (reads_params) {
    if (sharded_) sharded_->owned_to_device();  // parameter offload: back to host memory below
    if (device.is_host() && rp.precision == Precision::fp32) {
      st.params = model_->params().as<float>();
    } else {
      st.params = staging(staged_params_, device, rp.arena_size);
      const std::vector<ArenaRange> ranges = master ? std::vector<ArenaRange>{{rp.grad_arena_size, rp.arena_size}} : rp.param_ranges();
      for (const ArenaRange& r : ranges) model_->get_parameters(r, st.params + r.begin);  // ZeRO-3: the slices
    }
  }
  // The gradients are not needed between steps: their arena is the slab buffer. Discarded first, so
  // that under ZeRO-2/3 (whose buckets were given back) the slabs take pages the owned slices free.
  Arena& grads = model_->grads();
  if (device.is_host()) grads.discard(0, grads.bytes()), grads.commit(0, grads.bytes());
  float* scratch = device.is_host() ? grads.as<float>() : nullptr;
  gather_global_tensors(ps_.world_comm(), st, whole_model_plan(cfg_, 1).table, sink, scratch, rp.grad_arena_size, ps_.watchdog());
  if (sharded_ && reads_params) sharded_->owned_to_host();
  // Given back again, zero: a ZeRO-2/3 step fills its buckets from pages it gave back, so the slabs
  // must not outlive the gather (training may go on after it); the owned slices stay backed.
  if (device.is_host()) grads.discard(0, grads.bytes()), grad_sync_.commit_owned();
}

void Trainer::gather_full_model(float* whole) {
  gather_full_model([whole](const TensorSpec& t, std::size_t begin, std::size_t count, const float* values) {
    std::copy_n(values, count, whole + t.offset + begin);
  });
}

RankState Trainer::state_to_save() {
  if (!pending_.empty()) fatal("internal error: a checkpoint of steps whose loss was not read back (Trainer::settle first)");
  RankState st = host_state();
  if (st.params != model_->params().data()) {
    if (sharded_) sharded_->owned_to_device();  // parameter offload: the slices, for this copy only
    for (const ArenaRange& r : model_->plan().param_ranges()) model_->get_parameters(r, st.params + r.begin);
    if (sharded_) sharded_->owned_to_host();
  }
  Device& device = model_->device();
  if (!device.is_host()) {
    if (st.master) device.copy(st.master, adamw_.master().data(), adamw_.master().bytes());
    device.copy(st.moments[0], adamw_.first_moment().data(), adamw_.first_moment().bytes());
    device.copy(st.moments[1], adamw_.second_moment().data(), adamw_.second_moment().bytes());
  }
  return st;
}

RankState Trainer::state_to_load() { return host_state(); }

void Trainer::load_state(const RankState& st) {
  if (st.params != model_->params().data())
    write_kept_parameters([&](const ArenaRange& r) { model_->set_parameters(r, st.params + r.begin); });
  Device& device = model_->device();
  if (!device.is_host()) {
    if (st.master) device.copy(adamw_.master().data(), st.master, adamw_.master().bytes());
    if (st.moments[0]) device.copy(adamw_.first_moment().data(), st.moments[0], adamw_.first_moment().bytes());
    if (st.moments[1]) device.copy(adamw_.second_moment().data(), st.moments[1], adamw_.second_moment().bytes());
  }
}

}  // namespace dtrain
