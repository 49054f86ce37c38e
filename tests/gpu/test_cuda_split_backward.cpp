// The zero-bubble schedules' split backward on the GPU: B of two micro-batches in two slots, then
// their Ws, give the joined backward's parameter gradients on the same GPU bit for bit (the CUDA twin
// of tests/unit/test_split_backward.cpp), for GPT-2 and Llama blocks and MoE blocks, in fp32 and bf16.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "config/load.hpp"
#include "model/gpt.hpp"
#include "plan/training_plan.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

namespace {

std::vector<float> gradients(const Config& cfg, bool split) {
  const TrainingPlan tplan = make_plan(cfg, 1);
  const RankPlan plan = make_rank_plan(cfg, tplan, Coords{});
  REQUIRE(plan.activations.split_backward);
  const auto model = make_gpt_model(plan, nullptr, kernels::Backend::cuda);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 3, w.data());
  model->set_parameters(w.data());
  Device& device = model->device();
  const long N = model->dims().N();
  std::mt19937 gen(4);
  std::uniform_int_distribution<int> tok(0, 63);
  std::vector<int> host(4 * static_cast<std::size_t>(N));  // tokens and targets of two micro-batches
  for (auto& t : host) t = tok(gen);
  Arena tokens(device, host.size() * sizeof(int));
  device.copy(tokens.data(), host.data(), host.size() * sizeof(int));
  const auto batch = [&](int mb) { return MicroBatch{tokens.as<int>() + 2 * mb * N, tokens.as<int>() + (2 * mb + 1) * N}; };
  model->grads().zero();
  for (int mb = 0; mb < 2; ++mb) model->forward(mb, 0, batch(mb));
  for (int mb = 0; mb < 2; ++mb)
    if (split)
      model->backward_input(mb, 0, batch(mb), 0.25f, nullptr, nullptr);
    else
      model->backward(mb, 0, batch(mb), 0.25f, nullptr, nullptr);
  if (split)
    for (int mb = 0; mb < 2; ++mb) model->backward_weight(mb, 0);
  std::vector<float> g(plan.arena_size);
  device.copy(g.data(), model->grads().data(), g.size() * sizeof(float));
  return g;
}

}  // namespace

TEST_CASE("a split backward on the GPU equals the joined one bit for bit", "[gpu][zero-bubble]") {
  const std::vector<std::vector<std::string>> models = {
      {},
      {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope", "--model.swiglu=true", "--model.ffn_hidden_size=96",
       "--model.group_query_attention=true", "--model.num_query_groups=2", "--model.untie_embeddings_and_output_weights=true",
       "--model.add_bias_linear=false"},
      {"--model.num_experts=4", "--model.moe_router_topk=2"}};
  for (const auto& model : models)
    for (const char* precision : {"fp32", "bf16", "fp8"}) {  // fp8: cuBLASLt's fp8 GEMMs (every dimension a multiple of 16)
      std::vector<std::string> o = {"--system.pipeline_schedule=zb-h1", std::string("--system.precision=") + precision};
      o.insert(o.end(), model.begin(), model.end());
      const Config cfg = load_config("[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nseq_length=64\nvocab_size=64\n"
                                     "global_batch_size=4\nmicro_batch_size=2\n",
                                     "gpu split backward", o);
      const std::vector<float> joined = gradients(cfg, false), split = gradients(cfg, true);
      INFO(precision << " model " << (&model - models.data()));
      CHECK(std::memcmp(joined.data(), split.data(), joined.size() * sizeof(float)) == 0);
    }
}
