// Fuzz target: a Hugging Face config.json, as ckpt-consolidate --import-hf and init_from=hf:DIR read it
// (config_from_hf), then the model's Hugging Face tensors listed from it, as the import lists them.
#include "fuzz/fuzz_target.hpp"
#include "hf/hf_model.hpp"

DTRAIN_FUZZ_TARGET(hf_config) {
  const dtrain::HfModelConfig hc =
      dtrain::config_from_hf(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  (void)dtrain::hf_family(hc.cfg);
  (void)dtrain::hf_tensors(hc.cfg);
  (void)dtrain::model_keys_text(hc.cfg);
}
