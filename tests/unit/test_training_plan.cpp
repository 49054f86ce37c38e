// Micro-batching, bubble formulas and memory estimates of the plan.
// Tolerances: bubble fractions are ratios of small integers (Approx()'s 1.2e-5 absorbs the decimal
// literals); the distributed optimizer's state is the unsharded state over dp plus the padding of
// each layer group to 16 x dp floats (6 groups x 64 floats x 12 bytes = 4.6 KB of ~12 MB here): 1e-3.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "config/load.hpp"
#include "plan/pipeline_schedule.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

TEST_CASE("bubble formulas", "[plan]") {
  CHECK(predicted_bubble(PipelineSchedule::one_f_one_b, 1, 8, 1) == 0.0);
  CHECK(predicted_bubble(PipelineSchedule::one_f_one_b, 4, 8, 1) == Approx(3.0 / 11.0));
  CHECK(predicted_bubble(PipelineSchedule::afab, 2, 2, 1) == Approx(1.0 / 3.0));
  CHECK(predicted_bubble(PipelineSchedule::interleaved, 4, 8, 2) == Approx(3.0 / 19.0));
}

TEST_CASE("plan resolves gradient accumulation and warns on few micro-batches", "[plan]") {
  Config c = load_config("[model]\nglobal_batch_size=16\nmicro_batch_size=2\n[system]\npipeline_model_parallel_size=2\n", "t", {});
  const TrainingPlan p = make_plan(c, 4);  // dp = 2
  CHECK(p.sizes.dp == 2);
  CHECK(p.num_micro_batches == 4);
  CHECK(p.bubble == Approx(1.0 / 5.0));
  CHECK(p.warnings.size() == 1);  // m = 4 < 4p = 8
  CHECK(p.stage_memory.size() == 2);
  CHECK(p.stage_memory[0].params > 0);
}

TEST_CASE("micro_batch_size=auto picks the largest micro-batch within the bubble limit", "[plan]") {
  Config c = load_config("[model]\nglobal_batch_size=32\nmicro_batch_size=auto\n[system]\npipeline_model_parallel_size=4\n"
                         "max_bubble_fraction=0.2\n", "t", {});
  // dp = 1, p = 4: bubble 3/(m+3) <= 0.2 needs m >= 12 -> micro 2 (m = 16); micro 4 gives m = 8, bubble 0.27.
  const TrainingPlan p = make_plan(c, 4);
  CHECK(p.micro_batch == 2);
  CHECK(p.num_micro_batches == 16);
  CHECK_THROWS_AS(make_plan(c, 4, MemoryLimit{1000.0, "a tiny limit"}), UserError);
}

TEST_CASE("interleaved schedule needs m >= p and says which micro-batches work", "[plan]") {
  Config c = load_config("[model]\nnum_layers=8\nglobal_batch_size=12\nmicro_batch_size=4\n[system]\n"
                         "pipeline_model_parallel_size=4\nvirtual_pipeline_model_parallel_size=2\npipeline_schedule=interleaved\n",
                         "t", {});
  try {
    make_plan(c, 4);
    FAIL("accepted m = 3 with p = 4");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("micro_batch_size in {1, 2, 3}") != std::string::npos);
  }
  c.model.micro_batch_size.value = 2;  // m = 6: not a multiple of p, accepted
  CHECK(make_plan(c, 4).num_micro_batches == 6);
}

TEST_CASE("activation memory grows with the micro-batch; distributed optimizer shards state", "[plan]") {
  Config c = load_config("[model]\nglobal_batch_size=16\nmicro_batch_size=1\n", "t", {});
  const auto a = make_plan(c, 4).stage_memory[0];
  c.model.micro_batch_size.value = 2;
  const auto b = make_plan(c, 4).stage_memory[0];
  CHECK(b.activations > a.activations);
  c.system.use_distributed_optimizer = true;
  const auto z = make_plan(c, 4).stage_memory[0];
  CHECK(static_cast<double>(z.optimizer) * 4 == Approx(static_cast<double>(a.optimizer)).epsilon(1e-3));
}

TEST_CASE("a plan that does not fit the rank's memory is refused, naming the estimate and its biggest term", "[plan]") {
  Config c = load_config("[model]\nnum_layers=4\nhidden_size=512\nnum_attention_heads=8\nseq_length=512\n"
                         "global_batch_size=32\nmicro_batch_size=32\n", "t", {});
  const MemoryLimit limit{1e9, "a test limit"};
  try {
    make_plan(c, 1, limit);
    FAIL("accepted a plan above the limit");
  } catch (const UserError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("the plan needs") != std::string::npos);
    CHECK(what.find("(the biggest term: activations") != std::string::npos);
    CHECK(what.find("more than the 1.000 GB a rank can use (a test limit)") != std::string::npos);
  }
  c.model.micro_batch_size.value = 1;
  CHECK(make_plan(c, 1, limit).peak_memory() < 1e9);
}

TEST_CASE("an offloaded optimizer must fit the host memory a GPU rank may use", "[plan][offload]") {
  // GPT-2 124M on a GPU, bf16, offloaded: 124M x (12 + 6) bytes = 2.24 GB of host memory per rank
  // (the dry run's 2136.77 MiB). A 2 GB host share refuses it, naming the host memory; 3 GB takes it,
  // and the distributed optimizer over 2 ranks halves what each keeps.
  Config c = load_config("[model]\nnum_layers=12\nhidden_size=768\nnum_attention_heads=12\nseq_length=1024\nvocab_size=50304\n"
                         "global_batch_size=8\nmicro_batch_size=4\n[system]\ndevice=cuda\nprecision=bf16\noffload_optimizer=true\n",
                         "t", {});
  MemoryLimit limit{80e9, "the GPU"};
  limit.host_bytes = 2e9;
  limit.host_source = "a host share";
  try {
    make_plan(c, 1, limit);
    FAIL("accepted an offloaded optimizer above the host memory");
  } catch (const UserError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("offloaded to host memory (system.offload_optimizer, system.offload_params) needs 2.24") != std::string::npos);
    CHECK(what.find("more than the 2.000 GB of host memory a rank can use (a host share)") != std::string::npos);
  }
  limit.host_bytes = 3e9;
  CHECK(make_plan(c, 1, limit).stage_memory[0].offloaded > 2e9);
  limit.host_bytes = 2e9;
  c.system.use_distributed_optimizer = true;
  CHECK(make_plan(c, 2, limit).stage_memory[0].offloaded < 1.2e9);
}
