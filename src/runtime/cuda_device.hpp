// GPU selection for device=cuda: one device per local rank (local rank modulo visible devices), with
// clear errors for no GPU and for more local ranks than GPUs when they may not share.
#pragma once
#include <cstddef>
#include <string>

#include "config/choices.hpp"

namespace dtrain {

struct CudaSelection {
  int device = -1;      // the GPU this rank uses
  int count = 0;        // GPUs visible on its node
  bool shared = false;  // other ranks of the node use the same GPU
};

// GPU for a local rank: local_rank modulo the number of visible devices (-1 without one).
inline int device_for_local_rank(int local_rank, int visible_devices) {
  return visible_devices <= 0 ? -1 : local_rank % visible_devices;
}

// Selects the device of local rank `local_rank` of the `local_size` ranks on node `node_name`; fatal()
// with an explanation when impossible (no GPU; more ranks than GPUs on a node unless allow_shared_gpu).
// Fatal in builds without CUDA.
CudaSelection select_cuda_device(int local_rank, int local_size, const std::string& node_name, bool allow_shared_gpu);
// Total memory of the selected GPU, in bytes.
std::size_t gpu_memory_bytes();
// The selected GPU's compute capability as major x 10 + minor (75 Turing, 80 A100, 90 H100).
int gpu_compute_capability();
// GFLOP/s of the best of repeated 8192^3 cuBLAS GEMMs on random operands (gemm_operand.hpp) on the
// selected GPU over about `seconds`, in the run's precision: bf16 or fp16 (fp32
// accumulation) or fp32 (no TF32): the ceiling MFU is
// measured against.
double gpu_gemm_peak_gflops(Precision precision, double seconds);

}  // namespace dtrain
