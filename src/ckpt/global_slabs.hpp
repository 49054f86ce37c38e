// The global tensors of a model whose slices are spread over ranks, assembled on one rank a bounded
// slab at a time: every rank offers the "param" pieces its state holds (for_each_piece: each global
// element on exactly one rank, ZeRO-3 ranges and bf16 master weights included), rank 0 of the group
// receives one slab of one global tensor after another and hands each to a sink (the final weights
// file, a buffer). No rank holds more than a slab or two beyond its own state.
#pragma once
#include <cstddef>
#include <functional>

#include "ckpt/checkpoint.hpp"
#include "comm/host_comm.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

// Elements [begin, begin + count) (flat, row-major) of the global tensor t (a tensor of the whole
// model's table), on rank 0 of the gathering group.
using SlabSink = std::function<void(const TensorSpec& t, std::size_t begin, std::size_t count, const float* values)>;

// Collective over comm, whose ranks are the layout `state`'s plan belongs to: every tensor of `whole`
// (the unsharded model's table, whole_model_plan) in table order, in slabs of consecutive elements of
// at most 2^22, handed to `sink` on rank 0. Each slab is one gather of what every rank holds of it
// (no reliance on MPI buffering; counts far below 2^31). scratch: host memory of scratch_floats this
// rank may overwrite for its buffers (rank 0 needs two slabs, the others one); without it, or where
// it is too small, buffers of that size are allocated. A UserError of the sink (a full disk) does not
// stop the gathering: it is thrown on every rank at the end. Each slab's gathering is one operation
// of `watchdog` (may be null), the sink's work is not.
void gather_global_tensors(HostComm comm, const RankState& state, const TensorTable& whole, const SlabSink& sink,
                           float* scratch = nullptr, std::size_t scratch_floats = 0, Watchdog* watchdog = nullptr);

}  // namespace dtrain
