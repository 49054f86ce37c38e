// The CUDA device of a rank (memory, pinned staging, copies) and select_cuda_device: count devices,
// pick local_rank % count.
#include "runtime/cuda_device.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "runtime/cuda_vmm.hpp"
#include "runtime/device.hpp"
#include "runtime/gemm_operand.hpp"
#include "runtime/on_demand_region.hpp"

namespace dtrain {
namespace {

// Device memory from cudaMalloc (zero-filled), pinned host memory from cudaMallocHost, copies with
// cudaMemcpy (unified addressing tells the direction). Allocations happen at start-up; on-demand
// memory (CudaVmm) maps and unmaps chunks during the step. The peak is what this process held at once:
// its allocations and the chunks mapped.
class CudaDevice final : public Device {
 public:
  kernels::Backend backend() const override { return kernels::Backend::cuda; }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (rc != cudaSuccess) {
      std::size_t free_bytes = 0, total = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free_bytes, &total);
      fatal("out of GPU memory allocating " + std::to_string(bytes >> 20) + " MiB (" + std::to_string(in_use_ >> 20) +
            " MiB allocated by this rank, " + std::to_string(free_bytes >> 20) + " of " + std::to_string(total >> 20) +
            " MiB free on the GPU): " + cudaGetErrorString(rc) +
            "; use system.precision=bf16, more tensor or pipeline parallelism, a smaller micro_batch_size, or "
            "system.use_distributed_optimizer=true");
    }
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    add_in_use(bytes);
    sizes_[p] = bytes;
    return p;
  }
  void* reserve(std::size_t bytes) override {
    const std::size_t unit = vmm_.granularity();
    char* p = vmm_.reserve((bytes + unit - 1) / unit * unit);
    regions_.emplace(p, OnDemandRegion(bytes, unit));
    return p;
  }
  void commit(void* p, std::size_t bytes) override {
    const auto found = region_of(p);
    if (!found) return;
    auto& [base, region] = *found;
    for (const auto& run : region.commit(static_cast<char*>(p) - base, bytes)) {
      char* first = base + run.first * region.unit();
      const std::size_t n = run.count * region.unit();
      vmm_.map(first, n);
      CUDA_CHECK(cudaMemsetAsync(first, 0, n, 0));
      add_in_use(n);
    }
  }
  void release(void* p) noexcept override {
    if (const auto found = region_of(p); found && found->first == p) {
      vmm_.free(found->first, (found->second.bytes() + found->second.unit() - 1) / found->second.unit() * found->second.unit());
      in_use_ -= found->second.backed_bytes();
      regions_.erase(found->first);
      return;
    }
    auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      in_use_ -= it->second;
      sizes_.erase(it);
    }
    cudaFree(p);
  }
  void* allocate_pinned(std::size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
  }
  void release_pinned(void* p) noexcept override { cudaFreeHost(p); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    count_host_wait();
    if (dst != src && bytes > 0) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }
  void upload_queued(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, 0));
  }
  // After the compute stream's queued work (an event it records), on the copy stream; done at its event.
  CopyInFlight copy_async(void* dst, const void* src, std::size_t bytes) override {
    if (dst == src || bytes == 0) return {};
    if (!copy_stream_) CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    struct Copy final : CopyInFlight::Impl {
      explicit Copy(std::atomic<std::uint64_t>& c) : waits(c) {}
      std::atomic<std::uint64_t>& waits;
      cudaEvent_t done = nullptr;
      void wait() override {
        waits.fetch_add(1, std::memory_order_relaxed);
        CUDA_CHECK(cudaEventSynchronize(done));
        cudaEventDestroy(done);
      }
    };
    cudaEvent_t queued = nullptr;
    auto c = std::make_unique<Copy>(host_wait_counter());
    CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(queued, 0));
    CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, queued, 0));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy_stream_));
    CUDA_CHECK(cudaEventRecord(c->done, copy_stream_));
    cudaEventDestroy(queued);  // released once recorded and waited on
    return CopyInFlight(std::move(c));
  }
  void zero(void* p, std::size_t bytes) override {
    if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0));
  }
  void discard(void* p, std::size_t bytes) override {
    const auto found = region_of(p);
    if (!found) return zero(p, bytes);  // cudaMalloc'd: zeroed, kept
    auto& [base, region] = *found;
    const OnDemandRegion::Discard d = region.discard(static_cast<char*>(p) - base, bytes);
    for (const auto& span : d.zero) zero(base + span.offset, span.bytes);
    if (d.unback.empty()) return;
    // Unmapping memory the GPU may still use is undefined: the queued work (on every stream: NCCL's
    // collectives on the range were waited for by the caller) finishes first.
    count_host_wait();
    CUDA_CHECK(cudaDeviceSynchronize());
    for (const auto& run : d.unback) {
      vmm_.unmap(base + run.first * region.unit(), run.count * region.unit());
      in_use_ -= run.count * region.unit();
    }
  }
  void synchronize() override {
    count_host_wait();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::size_t held_bytes() const override { return in_use_; }
  std::size_t peak_bytes() const override { return peak_; }
  void reset_peak() override { peak_ = in_use_; }

 private:
  void add_in_use(std::size_t bytes) {
    in_use_ += bytes;
    peak_ = in_use_ > peak_ ? in_use_ : peak_;
  }
  // The on-demand region holding p (and its base), or null.
  std::pair<char* const, OnDemandRegion>* region_of(void* p) {
    auto it = regions_.upper_bound(static_cast<char*>(p));
    if (it == regions_.begin()) return nullptr;
    --it;
    return static_cast<char*>(p) < it->first + it->second.bytes() ? &*it : nullptr;
  }
  std::size_t in_use_ = 0, peak_ = 0;
  std::map<void*, std::size_t> sizes_;
  CudaVmm vmm_;
  cudaStream_t copy_stream_ = nullptr;  // copy_async's, made on first use
  std::map<char*, OnDemandRegion> regions_;  // on-demand memory, by base
};

}  // namespace

Device& cuda_device() {
  static CudaDevice device;
  return device;
}

int gpu_compute_capability() {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

std::size_t gpu_memory_bytes() {
  std::size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total;
}

CudaSelection select_cuda_device(int local_rank, int local_size, const std::string& node_name, bool allow_shared_gpu) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    fatal(std::string("system.device=cuda but no usable GPU on node ") + node_name + " (" +
          (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") + "); use system.device=cpu or run on a GPU node");
  if (local_size > count && !allow_shared_gpu)
    fatal(std::to_string(local_size) + " ranks on node " + node_name + " but only " + std::to_string(count) +
          " GPUs and NCCL cannot share a GPU between ranks; start at most one rank per GPU (srun --ntasks-per-node=" +
          std::to_string(count) + ") or set system.comm_backend=mpi");
  CudaSelection s;
  s.count = count;
  s.device = device_for_local_rank(local_rank, count);
  s.shared = local_size > count;
  CUDA_CHECK(cudaSetDevice(s.device));
  return s;
}

double gpu_gemm_peak_gflops(Precision precision, double seconds) {
  precision = storage_precision(precision);  // fp8's GEMMs are emulated in bf16
  const int n = 8192;
  const std::size_t count = static_cast<std::size_t>(n) * n, bytes = count * (is_16bit(precision) ? 2 : 4);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMalloc(&c, bytes));
  {  // random operands, as real data: zeros run faster and would overstate the peak
    std::vector<float> host(count);  // room for either element size
    for (const auto& [operand, seed] : {std::pair{a, 0x9e3779b97f4a7c15ull}, std::pair{b, 0x5851f42d4c957f2dull}}) {
      switch (precision) {
        case Precision::fp32: fill_gemm_operand(host.data(), count, seed); break;
        case Precision::fp8:  // storage_precision made it bf16
        case Precision::bf16: fill_gemm_operand(reinterpret_cast<bf16*>(host.data()), count, seed); break;
        case Precision::fp16: fill_gemm_operand(reinterpret_cast<fp16*>(host.data()), count, seed); break;
      }
      CUDA_CHECK(cudaMemcpy(operand, host.data(), bytes, cudaMemcpyHostToDevice));
    }
  }
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  const cudaDataType_t type = precision == Precision::bf16 ? CUDA_R_16BF : precision == Precision::fp16 ? CUDA_R_16F : CUDA_R_32F;
  const float one = 1.0f, zero = 0.0f;
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  double best = 0.0, spent = 0.0;
  for (int i = 0; i < 100 && spent < seconds; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, type, n,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    spent += ms / 1e3;
    if (i > 0) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / (ms / 1e3) / 1e9);  // the first call warms up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return best;
}

}  // namespace dtrain
