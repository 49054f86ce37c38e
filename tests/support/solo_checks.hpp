// The checks of SoloCommunicator, the communication layer of a one-rank group, on a device's memory
// (the host in the unit tests, a GPU in the gpu tests): reductions, broadcasts and in-place collectives
// leave the values alone; all-gather, reduce-scatter, reduce, all-to-all-v and a ring step copy this
// rank's block from send to recv (and nothing around it); the counts exchange returns its input.
#pragma once
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "comm/solo_communicator.hpp"
#include "runtime/arena.hpp"

namespace dtrain::testing {

inline void check_solo_communicator(Device& device) {
  SoloCommunicator g("tp", 5, device);
  CHECK(g.size() == 1);
  CHECK(g.rank() == 0);
  CHECK(g.world_ranks() == std::vector<int>{5});
  const std::size_t n = 100;
  std::vector<float> values(n);
  std::iota(values.begin(), values.end(), 1.0f);
  Arena a(device, n * sizeof(float)), b(device, n * sizeof(float));
  auto get = [&](const Arena& x) {
    std::vector<float> v(n);
    device.copy(v.data(), x.data(), n * sizeof(float));
    return v;
  };
  auto fill_b = [&] {
    const std::vector<float> sentinel(n, -1.0f);
    device.copy(b.data(), sentinel.data(), n * sizeof(float));
  };
  // b holds a's first k values, then the sentinel.
  auto b_holds_first = [&](std::size_t k) {
    const std::vector<float> v = get(b);
    return std::equal(values.begin(), values.begin() + static_cast<long>(k), v.begin()) && v[k] == -1.0f;
  };
  device.copy(a.data(), values.data(), n * sizeof(float));
  for (Completion c : {Completion::now, Completion::later}) {
    CommRequest r = g.all_reduce(a.data(), n, DType::f32, ReduceOp::sum, {"test"}, c);
    CHECK(!r.pending());
    g.reduce_scatter_in_place(a.data(), n, DType::f32, {"test"}, c).wait();
    g.all_gather_in_place(a.data(), n, DType::f32, {"test"}, c).wait();
  }
  g.broadcast(a.data(), n, DType::f32, 0, {"test"});
  g.all_gather(a.data(), a.data(), n, DType::f32, {"test"});  // in the same place: nothing to move
  CHECK(get(a) == values);

  fill_b();
  g.all_gather(a.data(), b.data(), 40, DType::f32, {"test"});
  CHECK(b_holds_first(40));
  fill_b();
  g.reduce_scatter(a.data(), b.data(), 30, DType::f32, {"test"});
  CHECK(b_holds_first(30));
  fill_b();
  g.reduce(a.data(), b.data(), 20, DType::f32, 0, {"test"});
  CHECK(b_holds_first(20));
  fill_b();
  g.exchange(a.data(), b.data(), 10, DType::f32, 0, 0, 3, {"test"}, Completion::now);
  CHECK(b_holds_first(10));

  // All-to-all-v: the one block goes from its send displacement (30) to its receive displacement (5).
  fill_b();
  const Blocks send{{12}, {30}}, recv{{12}, {5}};
  g.all_to_all_v(a.data(), send, b.data(), recv, DType::f32, {"test"});
  const std::vector<float> got = get(b);
  bool moved = true;
  for (std::size_t i = 0; i < n; ++i) moved = moved && got[i] == (i >= 5 && i < 17 ? values[30 + i - 5] : -1.0f);
  CHECK(moved);
  const std::vector<std::size_t> counts{4, 9};
  CHECK(g.exchange_counts(counts, {"test"}) == counts);
  CHECK(g.max_tag() >= 32767);
}

}  // namespace dtrain::testing
