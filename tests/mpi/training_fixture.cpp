// Test data and training runs for the MPI training tests.
#include "mpi/training_fixture.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "data/loss_mask_file.hpp"
#include "data/token_file.hpp"
#include "plan/training_plan.hpp"
#include "comm/parallel_state.hpp"

namespace dtrain::testing {

namespace {

// PREFIX for a test's data, named by rank 0's pid: concurrent tests do not collide.
std::string test_data_prefix(MPI_Comm comm) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, comm);
  return (std::filesystem::temp_directory_path() / ("dtrain_test_training." + std::to_string(pid)) / "data").string();
}

}  // namespace

std::string make_document_test_data(MPI_Comm comm, bool counted) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string prefix = test_data_prefix(comm);
  if (rank == 0) {
    std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
    for (const char* stream : {"train", "val"}) {
      std::vector<std::uint32_t> tokens;
      std::vector<std::uint8_t> mask;
      std::uint32_t x = stream[0] == 't' ? 777u : 4242u;
      while (tokens.size() < (stream[0] == 't' ? 20000u : 4000u)) {
        x = x * 1103515245u + 12345u;
        const std::uint32_t length = 3 + (x >> 16) % 38;
        for (std::uint32_t i = 0; i + 1 < length; ++i) {
          x = x * 1103515245u + 12345u;
          tokens.push_back(1 + (x >> 16) % 60 + (i % 2));  // ids 1..61
          mask.push_back(counted && 2 * i >= length ? 1 : 0);
        }
        tokens.push_back(kTestEod);
        mask.push_back(counted ? 1 : 0);
      }
      const std::string path = prefix + "." + stream + ".bin";
      write_loss_mask(loss_mask_path(path), mask, TokenFile::write(path, tokens, 64));
    }
  }
  MPI_Barrier(comm);
  return prefix;
}

std::string make_test_data(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string prefix = test_data_prefix(comm);
  if (rank == 0) {
    std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
    std::vector<std::uint32_t> tokens;
    const std::string words[] = {"the ", "whale ", "sea ", "ship ", "captain ", "white ", "and ", "of "};
    std::uint32_t x = 12345;
    while (tokens.size() < 20000) {
      x = x * 1103515245u + 12345u;
      for (char c : words[(x >> 16) % 8]) tokens.push_back(static_cast<unsigned char>(c) % 64);
    }
    TokenFile::write(prefix + ".train.bin", tokens, 64);
    TokenFile::write(prefix + ".val.bin", std::vector<std::uint32_t>(tokens.begin(), tokens.begin() + 4000), 64);
  }
  MPI_Barrier(comm);
  return prefix;
}

void remove_test_data(MPI_Comm comm, const std::string& prefix) {
  MPI_Barrier(comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) std::filesystem::remove_all(std::filesystem::path(prefix).parent_path());
}

RunResult train(MPI_Comm comm, const Config& base, const std::function<void(Trainer&)>& inspect, kernels::Backend backend,
                const std::function<void(Trainer&)>& before, std::optional<int> eod) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const Config& cfg = base;
  const TrainingPlan plan = make_plan(cfg, size);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // A deadlock or a stuck collective ends the job with a report instead of hanging the test.
  Watchdog watchdog(rank, cfg.system.collective_timeout_s, 0.0);
  CommOptions options;
  options.synchronous_sends = cfg.debug.synchronous_sends;
  options.device = &device_for(backend);
  const ParallelState ps(comm, RankLayout(plan.sizes, cfg.system.rank_order), options, &watchdog);
  Trainer trainer(cfg, plan, ps, backend, "byte", eod);
  if (before) before(trainer);
  RunResult r;
  // Read back as the step loop does: every logging.log_interval steps and at the end.
  for (int s = 0; s < cfg.training.train_iters; ++s) {
    trainer.train_step(s);
    if ((s + 1) % cfg.logging.log_interval == 0 || s + 1 == cfg.training.train_iters)
      for (const StepLoss& done : trainer.settle()) r.losses.push_back(done.loss);
  }
  r.losses.push_back(trainer.evaluate());
  if (inspect) inspect(trainer);
  return r;
}

RunResult train_alone_on_rank0(MPI_Comm comm, const Config& cfg, const std::function<void(Trainer&)>& inspect,
                               const std::function<void(Trainer&)>& before, std::optional<int> eod) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  RunResult r;
  std::string failure;  // rank 0's error: every rank throws it, none waits for losses that never come
  if (rank == 0) {
    try {
      r = train(MPI_COMM_SELF, cfg, inspect, kernels::Backend::host, before, eod);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  long n = failure.empty() ? static_cast<long>(r.losses.size()) : -1;
  // Waiting ranks poll with a sleep (a blocking call would spin on the cores rank 0 trains on).
  auto bcast = [&](void* data, int count, MPI_Datatype type) {
    MPI_Request request;
    MPI_Ibcast(data, count, type, 0, comm, &request);
    for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  bcast(&n, 1, MPI_LONG);
  if (n < 0) throw std::runtime_error("the one-rank reference run failed on rank 0" + (failure.empty() ? "" : ": " + failure));
  r.losses.resize(static_cast<std::size_t>(n));
  bcast(r.losses.data(), static_cast<int>(n), MPI_DOUBLE);
  return r;
}

UpdateDeviation update_deviation(const std::vector<float>& w, const std::vector<float>& ref, const std::vector<float>& init,
                                 const TensorTable& table) {
  UpdateDeviation worst;
  for (const TensorSpec& t : table.tensors()) {
    double diff = 0.0, update = 0.0;
    for (std::size_t i = t.offset; i < t.offset + t.numel; ++i) {
      diff += (static_cast<double>(w[i]) - ref[i]) * (static_cast<double>(w[i]) - ref[i]);
      update += (static_cast<double>(ref[i]) - init[i]) * (static_cast<double>(ref[i]) - init[i]);
    }
    const double relative = update > 0.0 ? std::sqrt(diff / update) : (diff > 0.0 ? INFINITY : 0.0);
    if (relative > worst.relative || worst.tensor.empty()) worst = {relative, t.name};
  }
  return worst;
}

}  // namespace dtrain::testing
