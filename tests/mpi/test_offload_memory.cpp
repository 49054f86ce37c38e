// Parameter offload keeps the owned parameter slices off the device, start-up included, measured by the
// device memory the host device counts as a GPU would (Device::peak_bytes: allocations and committed
// on-demand memory). ZeRO-3 on one rank owns every parameter; without offload they stay in the arena
// for the whole run, with offload a gather backs one bucket at a time (two with the prefetch), so the
// offloaded run's peak is lower by at least the parameters' bytes less two of the largest bucket, each
// with a partly used unit of on-demand memory at both ends (a page on the host). When
// start-up backed every owned slice to write the initial weights (as before write_owned), both runs
// peaked with all the parameters on the device.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "config/load.hpp"
#include "mpi/training_fixture.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

TEST_CASE("parameter offload keeps the owned slices off the device, start-up included", "[mpi][offload][memory]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const std::string ini = "[model]\nnum_layers=4\nhidden_size=128\nnum_attention_heads=4\nseq_length=32\nvocab_size=64\n"
                          "global_batch_size=2\nmicro_batch_size=2\n[training]\ntrain_iters=2\neval_iters=1\n";
  Device& device = host_device();
  auto peak_of = [&](bool offload_params, std::size_t& params, std::size_t& largest_bucket) {
    const Config cfg = load_config(ini, "offload memory test",
                                   {"--data.path=" + data, "--system.precision=bf16", "--system.use_distributed_optimizer=true",
                                    "--system.zero_stage=3", "--system.offload_optimizer=true",
                                    "--system.offload_params=" + std::string(offload_params ? "true" : "false")});
    device.reset_peak();
    testing::train(MPI_COMM_SELF, cfg, [&](Trainer& t) {
      const RankPlan& plan = t.rank_plan();
      params = plan.table.total() * plan.compute_type_bytes();
      largest_bucket = 0;
      for (const auto& b : plan.buckets) largest_bucket = std::max(largest_bucket, (b.range.end - b.range.begin) * plan.compute_type_bytes());
    });
    return device.peak_bytes();
  };
  std::size_t params = 0, largest_bucket = 0;
  const std::size_t offloaded = peak_of(true, params, largest_bucket);
  const std::size_t kept = peak_of(false, params, largest_bucket);
  std::printf("ZeRO-3 on one rank, bf16: device peak %zu bytes with parameter offload, %zu without; parameters %zu bytes, "
              "largest bucket %zu\n",
              offloaded, kept, params, largest_bucket);
  INFO("offload saved " << kept - offloaded << " bytes");
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), gathered = 2 * (largest_bucket + 2 * page);
  REQUIRE(params > gathered);
  CHECK(kept >= offloaded + (params - gathered));
  testing::remove_test_data(MPI_COMM_WORLD, data);
}
