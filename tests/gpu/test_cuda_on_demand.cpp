// On-demand GPU memory (Device::reserve, CUDA's virtual-memory API): what commit backs reads as zero
// and keeps what is written; discard zeroes the partial chunks at its edges and unmaps the whole
// chunks inside (the device's count of held bytes shows it); chunks unmapped are reused by the next
// commit rather than allocated again (the driver's free memory does not move); the arena's address
// never moves. Values are bytes compared exactly. Chunks are at most 2 MiB (the allocation granularity
// of every current NVIDIA GPU).
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/cuda_check.hpp"
#include "runtime/arena.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

namespace {

std::vector<std::uint8_t> read(Device& d, const char* p, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  d.copy(v.data(), p, n);
  return v;
}

bool all_equal(const std::vector<std::uint8_t>& v, std::uint8_t x) {
  for (std::uint8_t b : v)
    if (b != x) return false;
  return true;
}

std::size_t free_bytes() {
  std::size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

}  // namespace

TEST_CASE("on-demand GPU memory is backed by commit and given back by discard", "[gpu][on_demand]") {
  Device& d = cuda_device();
  constexpr std::size_t kMiB = std::size_t{1} << 20, kBytes = 64 * kMiB;
  const std::size_t held_before = d.held_bytes();
  Arena a(d, kBytes, /*on_demand=*/true);
  char* base = a.as<char>();
  CHECK(d.held_bytes() == held_before);  // nothing mapped yet
  a.commit(0, 16 * kMiB);
  CHECK(d.held_bytes() == held_before + 16 * kMiB);
  CHECK(all_equal(read(d, base, 16 * kMiB), 0));
  CUDA_CHECK(cudaMemset(base, 0x5a, 16 * kMiB));
  // A discard of 3 MiB .. 13 MiB - 1 byte: whole chunks inside unmapped (at most 2 MiB chunks: 4 MiB ..
  // 12 MiB at least), the edges zeroed, the rest kept.
  const std::size_t free_mapped = free_bytes();
  a.discard(3 * kMiB, 13 * kMiB - 1);
  CHECK(d.held_bytes() <= held_before + 8 * kMiB);  // [4, 12) MiB at least went back
  CHECK(all_equal(read(d, base, 3 * kMiB), 0x5a));
  CHECK(all_equal(read(d, base + 13 * kMiB - 1, 3 * kMiB + 1), 0x5a));
  a.commit(3 * kMiB, 13 * kMiB - 1);
  CHECK(all_equal(read(d, base + 3 * kMiB, 10 * kMiB - 1), 0));
  CHECK(a.as<char>() == base);
  // The chunks given back went to the pool, and committing again took them from it: no new GPU memory
  // (the driver's free memory within a chunk of where it was while all 16 MiB were mapped).
  CHECK(free_bytes() + 2 * kMiB >= free_mapped);
  // Elsewhere in the range: the pooled chunks serve it; beyond them new ones are made.
  a.discard(0, 16 * kMiB);
  a.commit(32 * kMiB, 48 * kMiB);
  CHECK(all_equal(read(d, base + 32 * kMiB, 16 * kMiB), 0));
  CHECK(free_bytes() + 2 * kMiB >= free_mapped);
}
