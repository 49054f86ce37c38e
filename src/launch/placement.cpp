// place_ranks: select the GPU, then agree on the communication backend.
#include "launch/placement.hpp"

#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "dtrain_config.hpp"
#include "runtime/cuda_arch.hpp"
#include "runtime/cuda_device.hpp"

namespace dtrain {

Placement place_ranks(HostComm world, ComputeDevice device, CommBackend comm, Precision precision, const LaunchEnv& env) {
  Placement p;
  if (device != ComputeDevice::cuda) {
    p.description = "cpu + mpi";
    return p;
  }
  p.backend = kernels::Backend::cuda;
  const CudaSelection gpu = select_cuda_device(env.local_rank, env.local_size, env.node_name, /*allow_shared_gpu=*/comm != CommBackend::nccl);
  const int shared = all_reduce(world, gpu.shared ? 1 : 0, HostOp::max);
  p.nccl = comm == CommBackend::nccl || (comm == CommBackend::automatic && !shared);
  const int ranks_on_gpu = (env.local_size + gpu.count - 1) / gpu.count;
  p.gpu_memory_share = static_cast<double>(gpu_memory_bytes()) / ranks_on_gpu;
  p.gpu = gpu.device;
  p.compute_capability = all_reduce(world, gpu_compute_capability(), HostOp::min);
  const int highest = all_reduce(world, gpu_compute_capability(), HostOp::max);
  for (const int cc : {p.compute_capability, highest})
    if (const std::string refusal = cuda_build_refusal(cc, DTRAIN_CUDA_ARCHITECTURES); !refusal.empty()) throw UserError(refusal);
  if (precision == Precision::bf16 && p.compute_capability < 80)
    throw UserError("system.precision=bf16 needs GPUs of compute capability 8.0 or later (A100, H100), but this job has one "
                    "of " + std::to_string(p.compute_capability / 10) + "." + std::to_string(p.compute_capability % 10) +
                    " (no bf16 tensor cores); use system.precision=fp16 (with its loss scaling) or fp32");
  if (precision == Precision::fp8 && p.compute_capability < 89)
    throw UserError("system.precision=fp8 needs GPUs of compute capability 8.9 or later (L40S, H100), but this job has one "
                    "of " + std::to_string(p.compute_capability / 10) + "." + std::to_string(p.compute_capability % 10) +
                    " (no fp8 tensor cores); use system.precision=bf16");
  p.description = std::string("cuda") + (shared ? " (ranks share GPUs)" : "") + (p.nccl ? " + nccl" : " + mpi (staged through pinned memory)");
  return p;
}

}  // namespace dtrain
