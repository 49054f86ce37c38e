// The MFU FLOP convention (plan/model_flops.hpp), computed by hand for a small attention-heavy model.
#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "plan/model_flops.hpp"

using namespace dtrain;

TEST_CASE("model FLOPs per token count matrix multiplies and the causal half of attention", "[plan]") {
  const Config c = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=1\nseq_length=2048\nvocab_size=256\n",
                               "flops", {});
  // Matmul parameters: 2 x (3*32^2 + 32^2 + 2*32*128) + 256*32 = 2 x 12288 + 8192 = 32768; x 6 = 196608.
  // Attention, causal half: 6 x 2 layers x 2048 x 32 = 786432 (a full count would be twice that).
  CHECK(model_flops_per_token(c) == 196608.0 + 786432.0);
}

TEST_CASE("model FLOPs of a Llama block count grouped keys/values and the SwiGLU gate", "[plan][llama]") {
  const Config c = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=4\nseq_length=2048\nvocab_size=256\n"
                               "group_query_attention=true\nnum_query_groups=2\nswiglu=true\nffn_hidden_size=64\n",
                               "flops", {});
  // Per layer: queries 32^2 = 1024, keys + values 2 x 32 x (2 groups x 8 dims) = 1024, projection 1024,
  // SwiGLU 3 x 32 x 64 = 6144: 9216; x 2 layers + 256*32 = 26624; x 6 = 159744. Attention as above: 786432.
  CHECK(model_flops_per_token(c) == 159744.0 + 786432.0);
}

TEST_CASE("model FLOPs of a MoE model count the router and the top-k experts of MoE blocks", "[plan][moe]") {
  const Config c = load_config("[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=1\nseq_length=2048\nvocab_size=256\n"
                               "num_experts=8\nmoe_router_topk=2\nmoe_ffn_hidden_size=64\nmoe_layer_freq=2\n",
                               "flops", {});
  // Block 0 (MoE): attention 4*32^2 = 4096, router 8*32 = 256, two experts 2 x 2*32*64 = 8192: 12544;
  // block 1 (dense, F = 128): 4096 + 2*32*128 = 12288; + 256*32 = 8192: 33024; x 6 = 198144; attention 786432.
  CHECK(model_flops_per_token(c) == 198144.0 + 786432.0);
}

TEST_CASE("model FLOPs of sliding-window attention count each block's visible keys", "[plan][window]") {
  const std::string base = "[model]\nnum_layers=2\nhidden_size=32\nnum_attention_heads=1\nseq_length=2048\nvocab_size=256\n";
  // A window of 512 keys at T = 2048: a row sees (T^2 - (T-W)^2) / 2T = (2048^2 - 1536^2) / 4096 = 448
  // keys on average (causal: 1024). Attention, the convention's 12 x layers x keys x H x D:
  // 12 x 2 x 448 x 32 = 344064.
  const Config windowed = load_config(base + "window_size=512\n", "flops", {});
  CHECK(model_flops_per_token(windowed) == 196608.0 + 344064.0);
  // Megatron's window_attn_skip_freq = 2: block 2 (counting from 1) sees every key, block 1 the window:
  // 12 x 32 x (448 + 1024) = 565248.
  const Config local_global = load_config(base + "window_size=512\nwindow_attn_skip_freq=2\n", "flops", {});
  CHECK(model_flops_per_token(local_global) == 196608.0 + 565248.0);
}
