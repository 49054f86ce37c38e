// Pipeline schedules that do not rely on MPI buffering: every schedule (AFAB, 1F1B, interleaved with
// v = 2 and 3, zero-bubble H1 and V) at p = the job's ranks (2, 3 or 4) and m in {p, 2p+1, 4p} trains with synchronous sends
// (MPI_Issend: a send completes only when its receive is posted, as if MPI had no eager buffer), and
// its losses match one rank's (one run per m, which every schedule of that m meets). A second set does the same with activation messages of 1 MiB, above
// every eager limit, at p = 3 (mpi_pipeline_np3): the message size is what it adds to the small set,
// which covers every p (at p = 4 on two cores it took 31 s of the suite). A deadlock is reported by the
// watchdog (collective timeout 60 s) and fails the job.
// Tolerance: pipelining changes only float32 summation order, at most of a step's tokens (the tied
// embedding's gradient adds its two stages' sums over them), so reorder_tolerance(tokens, steps) with
// Adam's eps above the noise: 9.2e-5 for the small shape at p = 4, m = 16; 7.3e-4 for the large at m = 3.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "config/load.hpp"
#include "mpi/training_fixture.hpp"

using namespace dtrain;

namespace {

struct Case {
  std::string schedule;
  int v, m;
};

std::vector<Case> cases_for(int p) {
  std::vector<Case> out;
  for (int m : {p, 2 * p + 1, 4 * p}) {
    out.push_back({"afab", 1, m});
    out.push_back({"1f1b", 1, m});
    out.push_back({"interleaved", 2, m});
    out.push_back({"interleaved", 3, m});
    out.push_back({"zb-h1", 1, m});
    out.push_back({"zbv", 2, m});
  }
  return out;
}

// shape: "small" (hidden 32, seq 16: 2 KiB messages) or "large" (micro-batch 4 x seq 256 x hidden 256:
// 1 MiB messages).
Config config_of(const Case& c, int pp, const std::string& shape, const std::string& data) {
  const bool large = shape == "large";
  const int layers = pp * 6;  // divisible by pp * v for v in {1, 2, 3}
  const int micro = large ? 4 : 1;
  char ini[512];
  std::snprintf(ini, sizeof ini,
                "[model]\nnum_layers=%d\nhidden_size=%d\nnum_attention_heads=4\nseq_length=%d\nvocab_size=64\n"
                "global_batch_size=%d\nmicro_batch_size=%d\n[training]\ntrain_iters=%d\neval_iters=1\n"
                "[optimizer]\nlr=3e-3\nwarmup_iters=1\n",
                large ? pp * 2 : layers, large ? 256 : 32, large ? 256 : 16, c.m * micro, micro, large ? 1 : 2);
  return load_config(ini, "pipeline test",
                     {"--data.path=" + data, "--system.pipeline_model_parallel_size=" + std::to_string(pp),
                      "--system.pipeline_schedule=" + c.schedule,
                      "--system.virtual_pipeline_model_parallel_size=" + std::to_string(c.v),
                      "--debug.synchronous_sends=true", "--system.collective_timeout_s=60",
                      "--optimizer.eps=1e-4"});  // see reorder_tolerance
}

void check_schedules(const std::string& shape) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world < 2 || world > 4) return;  // p = world in {2, 3, 4}
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  std::map<int, std::vector<double>> one_rank;  // by m: the schedules of one m share their one-rank run
  for (const Case& c : cases_for(world)) {
    if (shape == "large" && (c.m != world || c.v == 3)) continue;  // one m (= p) per schedule at 1 MiB
    const Config cfg = config_of(c, world, shape, data);
    const auto run = testing::train(MPI_COMM_WORLD, cfg).losses;
    if (!one_rank.count(c.m)) {
      Config one = cfg;
      one.system.pipeline_model_parallel_size = 1;
      one.system.virtual_pipeline_model_parallel_size = 1;
      one.system.pipeline_schedule = PipelineSchedule::one_f_one_b;
      one_rank[c.m] = testing::train_alone_on_rank0(MPI_COMM_WORLD, one).losses;
    }
    const std::vector<double>& reference = one_rank[c.m];
    INFO(shape << ": " << c.schedule << " p=" << world << " v=" << c.v << " m=" << c.m);
    REQUIRE(run.size() == reference.size());
    const long tokens = cfg.model.global_batch_size * cfg.model.seq_length;
    const double tolerance = testing::reorder_tolerance(tokens, cfg.training.train_iters);
    double worst = 0.0;
    for (std::size_t i = 0; i < run.size(); ++i) {
      const double rel = std::abs(run[i] - reference[i]) / std::abs(reference[i]);
      worst = std::max(worst, rel);
      INFO("loss " << i << ": " << run[i] << " vs one rank " << reference[i] << ", tolerance " << tolerance);
      CHECK(rel <= tolerance);
    }
    if (rank == 0)
      std::printf("%s p=%d %-11s v=%d m=%2d: synchronous sends ok, max loss deviation %.2e\n", shape.c_str(), world,
                  c.schedule.c_str(), c.v, c.m, worst);
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

}  // namespace

TEST_CASE("every schedule runs with synchronous sends and matches one rank", "[mpi][pipeline]") { check_schedules("small"); }

TEST_CASE("every schedule runs with synchronous sends of 1 MiB activations", "[mpi][pipeline][large]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 3) check_schedules("large");
}
