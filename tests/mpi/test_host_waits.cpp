// How often training makes the host wait for the device (Device::host_waits: copies, synchronisations,
// waits on asynchronous copies, on-demand memory given back). The host device counts the same calls a
// GPU waits at, so this runs without one. Steps keep their loss and gradient norm on the device (summed
// over the ranks there, the update's clipping factor computed there) and the host reads them back once
// per logging.log_interval steps, all together (Trainer::settle, as the step loop calls it), however
// many micro-batches a step has and with data or tensor parallelism, fp32 or bf16. fp16 reads back
// every step: its loss scaler needs each step's overflow. A loss read back per micro-batch or per step,
// a norm per run of gradients, or a token upload the host waits for would each add waits.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "mpi/training_fixture.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

TEST_CASE("training waits for the device once per log interval", "[mpi][training][host_waits]") {
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // 8 samples of micro-batch 1: 8 / dp micro-batches per rank and step.
  const std::string ini = "[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                          "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=8\neval_iters=2\n[logging]\nlog_interval=4\n";
  std::vector<std::vector<std::string>> layouts = {
      {}, {"--system.use_distributed_optimizer=true"}, {"--system.precision=bf16"}, {"--system.precision=fp16"}};
  if (world == 2 || world == 4) layouts.push_back({"--system.tensor_model_parallel_size=" + std::to_string(world)});
  Device& device = host_device();
  for (std::vector<std::string> layout : layouts) {
    const std::string name = layout.empty() ? "data parallel" : layout.front();
    layout.push_back("--data.path=" + data);
    const Config cfg = load_config(ini, "host waits test", layout);
    std::uint64_t at_start = 0, through_validation = 0, validation = 0;
    testing::train(
        MPI_COMM_WORLD, cfg,
        [&](Trainer& t) {  // after the steps and the fixture's validation: one more validation alone
          through_validation = device.host_waits() - at_start;
          const std::uint64_t before = device.host_waits();
          t.evaluate();
          validation = device.host_waits() - before;
        },
        kernels::Backend::host, [&](Trainer&) { at_start = device.host_waits(); });
    INFO(name << " on " << world << " rank(s): " << through_validation - validation << " waits in "
                   << cfg.training.train_iters << " steps, logged every " << cfg.logging.log_interval);
    const bool every_step = cfg.system.precision == Precision::fp16;
    CHECK(through_validation - validation ==
          static_cast<std::uint64_t>(every_step ? cfg.training.train_iters : cfg.training.train_iters / cfg.logging.log_interval));
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}
