// Layout equivalence: every (tp, pp, dp) layout with tp in {1,2,4}, pp in {1,2,4}, dp in {1,2} that
// uses exactly the job's ranks, with and without sequence parallelism, with and without the
// distributed optimizer (and overlapped reductions), under 1F1B, interleaved 1F1B and AFAB, trains
// 10 steps with per-step losses within 1e-4 relative of one rank and final global weights within 1e-4
// relative (L2) of one rank's; each run is bit-identical when repeated.
// Tolerance: layouts differ only in float32 summation order (~1e-7 per operation); a real bug (a wrong
// slice, a missing reduction) shows as 1e-2 or worse.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "config/load.hpp"
#include "mpi/training_fixture.hpp"

using namespace dtrain;

namespace {

struct Variant {
  int tp, pp, dp;
  bool sp = false, distributed = false;
  std::string schedule = "1f1b";
  bool overlap = true;  // with the distributed optimizer: overlapped reductions and gathers
  std::string name() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "tp=%d pp=%d dp=%d %s%s%s", tp, pp, dp, schedule.c_str(), sp ? " +sp" : "",
                  distributed ? (overlap ? " +distopt+overlap" : " +distopt") : "");
    return buf;
  }
};

std::vector<Variant> variants_for(int world) {
  std::vector<Variant> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      for (int dp : {1, 2}) {
        if (tp * pp * dp != world) continue;
        out.push_back({tp, pp, dp});
        if (tp > 1) out.push_back({tp, pp, dp, true});
        if (dp > 1) {
          out.push_back({tp, pp, dp, false, true});
          out.push_back({tp, pp, dp, false, true, "1f1b", false});
        }
        if (pp > 1) {
          out.push_back({tp, pp, dp, false, false, "interleaved"});
          out.push_back({tp, pp, dp, false, false, "afab"});
          if (tp > 1 || dp > 1) out.push_back({tp, pp, dp, tp > 1, dp > 1, "interleaved"});
        }
      }
  return out;
}

Config config_of(const Variant& v, const std::string& data) {
  std::vector<std::string> o = {"--data.path=" + data,
                                "--system.tensor_model_parallel_size=" + std::to_string(v.tp),
                                "--system.pipeline_model_parallel_size=" + std::to_string(v.pp),
                                "--system.sequence_parallel=" + std::string(v.sp ? "true" : "false"),
                                "--system.use_distributed_optimizer=" + std::string(v.distributed ? "true" : "false"),
                                "--system.overlap_grad_reduce=" + std::string(v.distributed && v.overlap ? "true" : "false"),
                                "--system.overlap_param_gather=" + std::string(v.distributed && v.overlap ? "true" : "false"),
                                "--system.pipeline_schedule=" + v.schedule,
                                "--system.virtual_pipeline_model_parallel_size=" + std::string(v.schedule == "interleaved" ? "2" : "1")};
  return load_config("[model]\nnum_layers=8\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                     "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=10\neval_iters=1\n"
                     "[optimizer]\nlr=3e-3\nwarmup_iters=2\n", "layout test", o);
}

// Squared L2 norms (difference, reference) over the global weights, each element counted once.
std::pair<double, double> weight_distance(Trainer& t, GptModel& ref) {
  double diff = 0.0, norm = 0.0;
  GptModel& m = t.model();
  const auto& tensors = m.table().tensors();
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const TensorSpec& ts = tensors[k];
    if (!t.rank_plan().writes_params(k)) continue;
    const TensorSpec& full = ref.table().get(ts.name);
    for (std::size_t i = 0; i < ts.numel; ++i) {
      const double r = ref.params().data()[full.offset + global_index(ts, static_cast<long>(i))];
      const double w = m.params().data()[ts.offset + i];
      diff += (w - r) * (w - r);
      norm += r * r;
    }
  }
  return {diff, norm};
}

}  // namespace

TEST_CASE("every layout matches one rank", "[mpi][layouts]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const auto variants = variants_for(world);
  if (variants.empty()) {
    testing::remove_test_data(MPI_COMM_WORLD, data);
    return;
  }
  // The one-rank reference, computed by every rank on its own (identical everywhere).
  Config ref_cfg = config_of({1, 1, 1}, data);
  std::unique_ptr<GptModel> ref_model;
  const auto reference = testing::train(MPI_COMM_SELF, ref_cfg, [&](Trainer& t) {
    ref_model = std::make_unique<GptModel>(whole_model_plan(ref_cfg, 1), nullptr, kernels::kernel_table(kernels::Backend::host));
    std::copy(t.model().params().data(), t.model().params().data() + t.model().params().size(), ref_model->params().data());
  });
  double worst_loss = 0.0, worst_weights = 0.0;
  for (const auto& v : variants) {
    const Config cfg = config_of(v, data);
    double rel_weights = 0.0;
    const auto run = testing::train(MPI_COMM_WORLD, cfg, [&](Trainer& t) {
      auto [diff, norm] = weight_distance(t, *ref_model);
      double local[2] = {diff, norm}, total[2] = {0, 0};
      MPI_Allreduce(local, total, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      rel_weights = std::sqrt(total[0] / total[1]);
    });
    const auto again = testing::train(MPI_COMM_WORLD, cfg).losses;
    INFO(v.name());
    REQUIRE(run.losses.size() == reference.losses.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < run.losses.size(); ++i) {
      const double rel = std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]);
      worst = std::max(worst, rel);
      INFO("step " << i << ": " << run.losses[i] << " vs one rank " << reference.losses[i]);
      CHECK(rel <= 1e-4);
      CHECK(run.losses[i] == again[i]);  // bit-identical rerun
    }
    CHECK(rel_weights <= 1e-4);
    worst_loss = std::max(worst_loss, worst);
    worst_weights = std::max(worst_weights, rel_weights);
    if (rank == 0) std::printf("layout %-44s max loss deviation %.2e, weights deviation %.2e\n", v.name().c_str(), worst, rel_weights);
  }
  if (rank == 0) std::printf("np=%d: largest loss deviation %.2e, largest weights deviation %.2e\n", world, worst_loss, worst_weights);
  testing::remove_test_data(MPI_COMM_WORLD, data);
}
