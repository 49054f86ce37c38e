// Every entry of the Hugging Face family table (src/hf/hf_families.cpp) holds together, so that a new
// family is checked as soon as it is added: a config.json made of the family's own keys reads back as a
// model of that family; writing that model's config.json and reading it again gives the same [model]
// keys; its tensor list names each HF tensor once and covers every element of every dtrain tensor
// exactly once (the parts of a tensor tile it); a model no family describes is refused naming them all.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "ckpt/compatibility.hpp"
#include "hf/hf_model.hpp"
#include "plan/rank_plan.hpp"

using namespace dtrain;

namespace {

// A small model in the family's own config.json keys: each required size from a fixed list (sizes that
// divide as a model needs; a context of 4096, the longest default window: Mistral's), every optional key
// left to its default.
HfJson small_config(const HfFamily& f) {
  HfJson j;
  j["model_type"] = f.model_type;
  j["architectures"] = {f.architecture};
  const std::pair<int ModelConfig::*, int> sizes[] = {{&ModelConfig::num_layers, 2},          {&ModelConfig::hidden_size, 32},
                                                      {&ModelConfig::num_attention_heads, 4}, {&ModelConfig::ffn_hidden_size, 48},
                                                      {&ModelConfig::seq_length, 4096},       {&ModelConfig::vocab_size, 64},
                                                      {&ModelConfig::moe_ffn_hidden_size, 24},  {&ModelConfig::num_experts, 4},
                                                      {&ModelConfig::moe_router_topk, 2}};
  for (const HfKey& k : f.keys) {
    if (!k.required) continue;
    const auto* field = std::get_if<int ModelConfig::*>(&k.field);
    REQUIRE(field);  // a required key that is not a size: give it a value here
    bool given = false;
    for (const auto& [member, size] : sizes)
      if (member == *field) j[k.name] = size, given = true;
    REQUIRE(given);  // a size with no value here: add it to `sizes`
  }
  return j;
}

}  // namespace

TEST_CASE("every Hugging Face family reads, writes and maps its own models", "[hf]") {
  REQUIRE(hf_families().size() >= 2);
  std::set<std::string> architectures, types;
  for (const HfFamily& f : hf_families()) {
    INFO(f.architecture);
    CHECK(architectures.insert(f.architecture).second);
    CHECK(types.insert(f.model_type).second);
    const HfModelConfig read = config_from_hf(small_config(f).dump(), "config.json");
    CHECK(f.describes(read.cfg));
    CHECK(&hf_family(read.cfg) == &f);

    const HfJson written = HfJson::parse(hf_config_json(read.cfg, "float32", "byte"));
    CHECK(written["architectures"] == HfJson::array({f.architecture}));
    CHECK(written["model_type"] == f.model_type);
    for (const HfKey& k : f.keys) CHECK(written.contains(k.name));
    const HfModelConfig again = config_from_hf(written.dump(), "config.json");
    CHECK(model_key_values(again.cfg) == model_key_values(read.cfg));
    CHECK(again.tokenizer == "byte");

    for (const bool untied : {false, true}) {
      Config cfg = read.cfg;
      cfg.model.untie_embeddings_and_output_weights = untied;
      const std::vector<HfTensor> tensors = hf_tensors(cfg);
      std::set<std::string> names;
      std::map<std::string, std::vector<int>> parts;  // dtrain tensor -> how often each part is mapped
      std::map<std::string, std::int64_t> covered;
      for (const HfTensor& t : tensors) {
        CHECK(names.insert(t.name).second);
        auto& seen = parts[t.source];
        seen.resize(static_cast<std::size_t>(t.parts), 0);
        REQUIRE(t.part < t.parts);
        ++seen[static_cast<std::size_t>(t.part)];
        std::int64_t numel = 1;
        for (std::int64_t d : t.shape) numel *= d;
        covered[t.source] += numel;
      }
      const RankPlan whole = whole_model_plan(cfg, 1);
      for (const auto& spec : whole.table.tensors()) {
        INFO(spec.name);
        REQUIRE(parts.count(spec.name));
        for (int n : parts[spec.name]) CHECK(n == 1);
        CHECK(covered[spec.name] == static_cast<std::int64_t>(spec.numel));
      }
      CHECK(parts.size() == whole.table.tensors().size());
      CHECK(names.count("lm_head.weight") == (untied ? 1u : 0u));
    }
  }
}

TEST_CASE("a model no family describes is refused naming every family", "[hf]") {
  Config cfg;
  cfg.model.normalization = Normalization::rmsnorm;  // GPT-2's block with RMSNorm: no family
  try {
    (void)hf_family(cfg);
    FAIL("no refusal");
  } catch (const UserError& e) {
    const std::string what = e.what();
    for (const HfFamily& f : hf_families()) CHECK_THAT(what, Catch::Contains(std::string(f.architecture) + " (" + f.design + ")"));
  }
  HfJson j = small_config(hf_families().front());
  j["model_type"] = "mamba";
  CHECK_THROWS_WITH(config_from_hf(j.dump(), "config.json"), Catch::Contains("model_type \"mamba\" is not one dtrain reads (gpt2, llama, mistral, qwen2, qwen3, mixtral, qwen3_moe)"));
}
