// OrderedWorkers: results in submission order whatever the number of threads, a batch's exception at
// its own turn, and with no workers everything on the caller's thread.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data/ordered_workers.hpp"

using dtrain::OrderedWorkers;

TEST_CASE("ordered workers return results in submission order", "[data]") {
  for (int n : {0, 1, 3}) {
    INFO("workers " << n);
    const std::thread::id caller = std::this_thread::get_id();
    std::vector<bool> on_caller;
    OrderedWorkers<int, int> workers(n, [&](int w, int& x) {
      CHECK(w < (n > 0 ? n : 1));
      if (n == 0) on_caller.push_back(std::this_thread::get_id() == caller);
      if (x == 7) throw std::runtime_error("batch 7");
      return x * x;
    });
    std::vector<int> got;
    std::string error;
    try {
      for (int i = 0; i < 20; ++i) {
        while (workers.full()) got.push_back(*workers.next());
        workers.submit(i);
      }
      while (auto r = workers.next()) got.push_back(*r);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    CHECK(error == "batch 7");
    REQUIRE(got.size() == 7);  // batches 0-6, then 7's error at its turn
    for (int i = 0; i < 7; ++i) CHECK(got[static_cast<std::size_t>(i)] == i * i);
    if (n == 0) {
      CHECK_FALSE(on_caller.empty());
      for (bool b : on_caller) CHECK(b);
    }
  }
}
