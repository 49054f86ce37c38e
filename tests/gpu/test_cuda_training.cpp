// The whole model and whole runs on the GPU against the host and against one GPU rank:
//   - one training step (forward, backward, AdamW) of the whole model on cuda vs host (also with MoE
//     blocks in fp32): fp32 on both sides, summation order only, in sums of at most 256 terms (the
//     MLP's inputs; 128 tokens, 64 keys, 64 vocabulary entries): the loss within reorder_tolerance(256,
//     0) = 3.1e-5 and the weights, against the step's update, within reorder_tolerance(256, 1), with
//     Adam's eps above the noise. bf16 within 5 x 2^-8 = 2e-2: the CUDA attention rounds its scores
//     and its probabilities to bf16 where the host keeps them in fp32 (2 roundings of 2^-8 in each of
//     the 2 layers) and the logits' bf16 rounding differs (1);
//   - 2 and 4 ranks sharing this GPU through the MPI backend (device buffers staged through pinned
//     memory) at tp=2, pp=2, dp=2 + ZeRO-1 match one GPU rank within reorder_tolerance(256, 10) (the
//     8 x 32 tokens of a step, the MLP's 256 inputs), the first step within reorder_tolerance(256, 0);
//   - the bf16 loss curve of 10 steps stays within 2% of the fp32 curve on the GPU: a bf16 model's loss
//     is the fp32 one's to within the bf16 roundings on a logit's path that do not average out (the
//     weights' bf16 copies and the residual stream entering each of the 4 blocks and the head: 5 x 2^-8).
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "config/load.hpp"
#include "model/gpt.hpp"
#include "mpi/training_fixture.hpp"
#include "optim/adamw.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

namespace {

Config small_model(const std::string& precision, const std::vector<std::string>& overrides = {}) {
  return load_config("[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nseq_length=64\nvocab_size=64\n"
"global_batch_size=2\nmicro_batch_size=2\n[system]\nprecision=" + precision +
                         "\n[optimizer]\neps=1e-4\n",  // see reorder_tolerance
                     "gpu step test", overrides);
}

struct OneStep {
  double loss;
  std::vector<float> initial, weights;  // fp32 values before and after the AdamW step
};

OneStep one_step(const Config& cfg, kernels::Backend backend) {
  const RankPlan plan = whole_model_plan(cfg, 2);
  const auto model = make_gpt_model(plan, nullptr, backend);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 5, w.data());
  model->set_parameters(w.data());
  AdamW adamw(model->plan(), cfg.optimizer, backend);
  adamw.set_master(w.data());
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> tok(0, 63);
  std::vector<int> batch(2 * static_cast<std::size_t>(model->dims().N()));
  for (auto& t : batch) t = tok(gen);
  Device& device = model->device();
  Arena on_device(device, device.is_host() ? 0 : batch.size() * sizeof(int));
  const int* tokens = batch.data();
  if (!device.is_host()) {
    device.copy(on_device.data(), batch.data(), batch.size() * sizeof(int));
    tokens = on_device.as<int>();
  }
  Arena loss_sum(device, sizeof(double));  // zero-filled, where the model's forward adds the loss
  const MicroBatch mb{tokens, tokens + model->dims().N(), loss_sum.as<double>()};
  model->grads().zero();
  OneStep r;
  r.initial = w;
  model->forward(0, 0, mb);
  device.copy(&r.loss, loss_sum.data(), sizeof r.loss);
  r.loss /= static_cast<double>(model->dims().N());
  model->backward(0, 0, mb, 1.0f / static_cast<float>(model->dims().N()), nullptr, nullptr);
  adamw.step(model->params(), model->grads(), 1e-3, 1);
  r.weights.resize(plan.arena_size);
  model->get_parameters(r.weights.data());
  return r;
}

// zero: 0 = no distributed optimizer, else the ZeRO stage; offload: the optimizer and (ZeRO-3) the parameters.
Config layout_config(const std::string& data, int tp, int pp, int zero, const std::string& precision, bool offload = false) {
  return load_config("[model]\nnum_layers=4\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=64\n"
                     "global_batch_size=8\nmicro_batch_size=2\n[training]\ntrain_iters=10\neval_iters=1\n"
                     "[optimizer]\nlr=3e-3\nwarmup_iters=2\neps=1e-4\n",  // eps: see reorder_tolerance
                     "gpu layout test",
                     {"--data.path=" + data, "--system.device=cuda", "--system.comm_backend=mpi", "--system.precision=" + precision,
                      "--system.tensor_model_parallel_size=" + std::to_string(tp),
                      "--system.pipeline_model_parallel_size=" + std::to_string(pp),
                      "--system.use_distributed_optimizer=" + std::string(zero > 0 ? "true" : "false"),
                      "--system.zero_stage=" + std::to_string(zero > 0 ? zero : 1),
                      "--system.offload_optimizer=" + std::string(offload ? "true" : "false"),
                      "--system.offload_params=" + std::string(offload && zero == 3 ? "true" : "false")});
}

}  // namespace

TEST_CASE("one training step of the whole model on cuda matches the host", "[gpu][model]") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // fp32, bf16, fp32 with MoE blocks (4 experts, top-2, load-balancing loss, capacity 1.0: the
  // router, the host routing between device copies, the grouped expert GEMMs and the combine), and the
  // optimizer offloaded (system.offload_optimizer: the GPU's gradients copied to host memory, the host's
  // AdamW, the weights copied back) in fp32 and bf16.
  // fp16 (no loss scale here: the summed loss's gradients are far above fp16's smallest normal) within
  // the bf16 bound, its roundings being finer (2^-11).
  for (const char* precision : {"fp32", "bf16", "fp16", "fp32 moe", "fp32 offload", "bf16 offload"}) {
    const std::string kind = precision;
    const bool moe = kind == "fp32 moe", offload = kind.find("offload") != std::string::npos;
    const std::string storage = kind.substr(0, 4);
    const Config cfg = moe       ? small_model("fp32", {"--model.num_experts=4", "--model.moe_aux_loss_coeff=1e-2", "--model.moe_capacity_factor=1"})
                       : offload ? small_model(storage, {"--system.offload_optimizer=true"})
                                 : small_model(precision);
    const OneStep host = one_step(cfg, kernels::Backend::host), gpu = one_step(cfg, kernels::Backend::cuda);
    const double loss_error = std::abs(gpu.loss - host.loss) / host.loss;
    const double weights_error = testing::update_deviation(gpu.weights, host.weights, host.initial, whole_model_plan(cfg, 2).table).relative;
    const bool fp32 = storage == "fp32";
    if (rank == 0)
      std::printf("one step %s: loss cuda %.7f host %.7f (relative %.2e), weights relative %.2e\n", precision, gpu.loss, host.loss,
                  loss_error, weights_error);
    INFO(precision);
    CHECK(loss_error <= (fp32 ? testing::reorder_tolerance(256, 0) : 5 * testing::kBf16Resolution));
    if (fp32) CHECK(weights_error <= testing::reorder_tolerance(256, 1));
  }
}

TEST_CASE("ranks sharing one GPU through the MPI backend match one GPU rank", "[gpu][layouts]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world != 2 && world != 4) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const auto reference = testing::train(MPI_COMM_SELF, layout_config(data, 1, 1, 0, "fp32"), {}, kernels::Backend::cuda).losses;
  struct Layout {
    int tp, pp, zero;  // zero: the ZeRO stage, 0 = no distributed optimizer
    bool offload = false;
  };
  // ZeRO-2/3 give their buckets back between uses (on-demand memory: chunks unmapped and mapped again);
  // with offload the optimizer and ZeRO-3's parameter slices live in pinned host memory.
  const std::vector<Layout> layouts =
      world == 2 ? std::vector<Layout>{{2, 1, 0}, {1, 2, 0}, {1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {1, 1, 3, true}}
                 : std::vector<Layout>{{2, 2, 0}, {2, 1, 1}, {1, 2, 1}, {2, 1, 2}, {1, 2, 3}, {2, 1, 3, true}};
  for (const Layout& l : layouts) {
    const auto run = testing::train(MPI_COMM_WORLD, layout_config(data, l.tp, l.pp, l.zero, "fp32", l.offload), {},
                                    kernels::Backend::cuda)
                         .losses;
    INFO("tp=" << l.tp << " pp=" << l.pp << " zero=" << l.zero << (l.offload ? " offload" : ""));
    double worst = 0.0;
    for (std::size_t i = 0; i < run.size(); ++i) {
      const double rel = std::abs(run[i] - reference[i]) / reference[i];
      worst = std::max(worst, rel);
      CHECK(rel <= testing::reorder_tolerance(256, i == 0 ? 0 : 10));
    }
    if (rank == 0)
      std::printf("%d ranks on one GPU, tp=%d pp=%d dp=%d ZeRO-%d%s: max loss deviation from one GPU rank %.2e\n", world, l.tp, l.pp,
                  world / (l.tp * l.pp), l.zero, l.offload ? " +offload" : "", worst);
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

TEST_CASE("bf16 loss curve stays within 2% of fp32 on the GPU", "[gpu][bf16]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world != 1) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const auto fp32 = testing::train(MPI_COMM_SELF, layout_config(data, 1, 1, 0, "fp32"), {}, kernels::Backend::cuda).losses;
  const auto bf16 = testing::train(MPI_COMM_SELF, layout_config(data, 1, 1, 0, "bf16"), {}, kernels::Backend::cuda).losses;
  double worst = 0.0;
  for (std::size_t i = 0; i < fp32.size(); ++i) {
    const double rel = std::abs(bf16[i] - fp32[i]) / fp32[i];
    worst = std::max(worst, rel);
    INFO("step " << i << ": bf16 " << bf16[i] << " fp32 " << fp32[i]);
    CHECK(rel <= 5 * testing::kBf16Resolution);
  }
  std::printf("bf16 vs fp32 on the GPU, 10 steps and validation: max loss deviation %.2e (final %.4f vs %.4f)\n", worst, bf16.back(),
              fp32.back());
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// ZeRO-3 with the optimizer and the parameter slices offloaded on one GPU, the 355M GPT of
// The host device's count of host waits (tests/mpi/test_host_waits.cpp) is what a GPU run waits at: on
// one GPU, bf16, 4 micro-batches a step, logged every 5 steps, the host waits once per 5 steps (the
// steps' losses and gradient norms, read back together).
TEST_CASE("training on the GPU waits for it once per log interval", "[gpu][host_waits]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  Config cfg = layout_config(data, 1, 1, 0, "bf16");
  cfg.logging.log_interval = 5;
  Device& device = cuda_device();
  std::uint64_t at_start = 0, through_validation = 0, validation = 0;
  testing::train(
      MPI_COMM_WORLD, cfg,
      [&](Trainer& t) {
        through_validation = device.host_waits() - at_start;
        const std::uint64_t before = device.host_waits();
        t.evaluate();
        validation = device.host_waits() - before;
      },
      kernels::Backend::cuda, [&](Trainer&) { at_start = device.host_waits(); });
  std::printf("one GPU, bf16: %llu host waits in %d steps, logged every %d\n", static_cast<unsigned long long>(through_validation - validation),
              cfg.training.train_iters, cfg.logging.log_interval);
  CHECK(through_validation - validation == static_cast<std::uint64_t>(cfg.training.train_iters / cfg.logging.log_interval));
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// tools/bench/memory (24 layers, d=1024, vocabulary 50304) in bf16: the GPU holds the gradients, the
// gathered buckets (two blocks, or the tied embedding) and the activations, far below the model state
// it would hold without ZeRO-3 and offload (2 + 4 + 12 bytes per parameter); the measured device peak
// (this process's allocations and mapped chunks) is within 15% of the rank plan's total.
TEST_CASE("parameter and optimizer offload keep the GPU's peak below the model state", "[gpu][memory]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const Config cfg = load_config(
      "[model]\nnum_layers=24\nhidden_size=1024\nnum_attention_heads=16\nseq_length=256\nvocab_size=50304\n"
      "global_batch_size=1\nmicro_batch_size=1\n[training]\ntrain_iters=2\neval_iters=1\n",
      "gpu memory test",
      {"--data.path=" + data, "--system.device=cuda", "--system.comm_backend=mpi", "--system.precision=bf16",
       "--system.use_distributed_optimizer=true", "--system.zero_stage=3", "--system.offload_optimizer=true",
       "--system.offload_params=true"});
  std::size_t peak = 0, predicted = 0, parameters = 0, held = 0;
  MemoryEstimate terms;
  const auto losses = testing::train(MPI_COMM_SELF, cfg, [&](Trainer& t) {
                        peak = t.model().device().peak_bytes();
                        held = t.model().device().held_bytes();
                        terms = t.rank_plan().memory();
                        predicted = terms.total();
                        parameters = t.rank_plan().table.total();
                      }, kernels::Backend::cuda).losses;
  const double state = 18.0 * static_cast<double>(parameters);
  constexpr double MiB = 1048576.0;
  std::printf("355M GPT, ZeRO-3 + optimizer and parameter offload on one GPU: device peak %.0f MiB (%.0f held at the end), "
              "predicted %.0f MiB (params %.0f, grads %.0f, optimizer %.0f, activations %.0f, buffers %.0f), model state %.0f MiB\n",
              peak / MiB, held / MiB, predicted / MiB, terms.params / MiB, terms.grads / MiB, terms.optimizer / MiB,
              terms.activations / MiB, terms.buffers / MiB, state / MiB);
  CHECK(std::isfinite(losses.front()));
  CHECK(static_cast<double>(peak) < state);
  CHECK(std::abs(static_cast<double>(peak) - static_cast<double>(predicted)) <= 0.15 * static_cast<double>(predicted));
  testing::remove_test_data(MPI_COMM_WORLD, data);
}
