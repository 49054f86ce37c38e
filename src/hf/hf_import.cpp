// import_hf: a Hugging Face directory of safetensors files -> a dtrain weights file.
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "hf/hf_convert.hpp"
#include "hf/hf_model.hpp"
#include "ckpt/weights_file.hpp"
#include "common/error.hpp"
#include "config/options.hpp"
#include "plan/rank_plan.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The safetensors files of an import: one model.safetensors, or those of the index, opened on demand.
class HfFiles {
 public:
  explicit HfFiles(const std::string& dir) : dir_(dir) {
    const std::string index = dir + "/model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(index, ec)) {
      located_ = safetensors::read_index(read_text_file(index), index, dir);
      index_ = index;
    } else if (!fs::exists(dir + "/model.safetensors", ec)) {
      throw UserError("'" + dir + "' has neither model.safetensors nor model.safetensors.index.json");
    }
  }
  // The file and header entry of tensor `name`; null info when absent (with the file that should hold it).
  std::pair<const safetensors::Reader*, const safetensors::TensorInfo*> find(const std::string& name) {
    std::string file = "model.safetensors";
    if (!index_.empty()) {
      auto it = located_.find(name);
      if (it == located_.end()) return {nullptr, nullptr};
      file = it->second;
    }
    const safetensors::Reader& r = open(file);
    return {&r, r.find(name)};
  }
  // Every file an import must look through (all the index names, or the one file).
  std::vector<const safetensors::Reader*> all() {
    std::set<std::string> files;
    for (const auto& [name, file] : located_) files.insert(file);
    if (index_.empty()) files.insert("model.safetensors");
    std::vector<const safetensors::Reader*> out;
    for (const auto& f : files) out.push_back(&open(f));
    return out;
  }
  const std::string& index() const { return index_; }
  const std::map<std::string, std::string>& located() const { return located_; }

 private:
  const safetensors::Reader& open(const std::string& file) {
    auto& r = readers_[file];
    if (!r) r = std::make_unique<safetensors::Reader>(dir_ + "/" + file);
    return *r;
  }
  std::string dir_, index_;
  std::map<std::string, std::string> located_;
  std::map<std::string, std::unique_ptr<safetensors::Reader>> readers_;
};

// Tensors Hugging Face files may carry that are buffers, not weights (GPT-2's causal masks, old Llama
// rotary tables): skipped on import.
bool is_buffer(const std::string& name) {
  for (const char* suffix : {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"}) {
    const std::string s = suffix;
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

}  // namespace

HfModelConfig read_hf_model_config(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  std::error_code ec;
  if (!fs::exists(config_path, ec))
    throw UserError("'" + dir + "' has no config.json; a Hugging Face model directory holds config.json and "
                    "model.safetensors or model.safetensors.index.json");
  return config_from_hf(read_text_file(config_path), config_path);
}

Config import_hf(const std::string& dir, const std::string& out, const std::string& tokenizer, const Progress& progress) {
  const std::string config_path = dir + "/config.json";
  HfModelConfig hc = read_hf_model_config(dir);
  const HfFamily& family = hf_family(hc.cfg);
  const std::string prefix = family.bare_prefix;
  const std::vector<HfTensor> tensors = hf_tensors(hc.cfg);
  const RankPlan whole = whole_model_plan(hc.cfg, 1);
  HfFiles files(dir);
  // Some uploads name tensors without the family's bare prefix (GPT-2 saved from GPT2Model).
  auto locate = [&](const std::string& name) {
    auto found = files.find(name);
    if (!found.second && !prefix.empty() && name.rfind(prefix, 0) == 0) {
      auto bare = files.find(name.substr(prefix.size()));
      if (bare.second) return bare;
    }
    return found;
  };
  // Every HF tensor located and its shape checked against config.json before any data is read or
  // memory taken, so a wrong directory fails at once.
  std::vector<std::pair<const safetensors::Reader*, const safetensors::TensorInfo*>> found(tensors.size());
  std::set<std::pair<std::string, std::string>> used;  // (file, tensor)
  // Stored as the files store them when every tensor has the same 16-bit type (lossless), else fp32.
  bool all_bf16 = true, all_f16 = true;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const HfTensor& t = tensors[i];
    const auto [reader, info] = locate(t.name);
    if (!info) {
      if (reader) throw UserError("'" + reader->path() + "' has no tensor '" + t.name + "', which a " + family.architecture +
                                  " as config.json describes it needs");
      throw UserError("'" + (files.index().empty() ? dir + "/model.safetensors" : files.index()) + "' lists no tensor '" +
                      t.name + "', which a " + family.architecture + " as config.json describes it needs");
    }
    if (info->shape != t.shape)
      throw UserError("'" + reader->path() + "': tensor '" + t.name + "' has shape " + safetensors::shape_text(info->shape) +
                      ", but config.json's model needs " + safetensors::shape_text(t.shape));
    found[i] = {reader, info};
    used.insert({reader->path(), info->name});
    all_bf16 = all_bf16 && info->dtype == safetensors::DType::bf16;
    all_f16 = all_f16 && info->dtype == safetensors::DType::f16;
  }
  for (const auto& [name, file] : files.located())
    if (!files.find(name).second)
      throw UserError("'" + dir + "/" + file + "' has no tensor '" + name + "', which model.safetensors.index.json places there");
  // Whatever else the files hold must be something dtrain may leave out (a tied lm_head.weight is
  // compared with the embedding once that is read).
  const TensorSpec& wte = whole.table.get("wte");
  const std::vector<std::int64_t> wte_shape(wte.global_shape.begin(), wte.global_shape.end());
  std::vector<std::pair<const safetensors::Reader*, const safetensors::TensorInfo*>> tied_heads;
  for (const safetensors::Reader* r : files.all())
    for (const auto& info : r->tensors()) {
      if (used.count({r->path(), info.name}) || is_buffer(info.name)) continue;
      if (info.name == "lm_head.weight" && !hc.cfg.model.untie_embeddings_and_output_weights && info.shape == wte_shape) {
        tied_heads.emplace_back(r, &info);
        continue;
      }
      throw UserError("'" + r->path() + "': tensor '" + info.name + "' is not part of a " + family.architecture +
                      " as config.json describes it; dtrain would drop it");
    }
  std::vector<float> values;
  try {
    values.assign(whole.arena_size, 0.0f);
  } catch (const std::bad_alloc&) {
    throw UserError("--import-hf: the model of '" + config_path + "' needs " + std::to_string(whole.arena_size * 4 / 1000000) +
                    " MB of memory here to convert, more than this process can have");
  }
  std::size_t done = 0;
  for (const auto& spec : whole.table.tensors()) {
    std::vector<float> global(spec.numel);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].source != spec.name) continue;
      const std::vector<float> hf = found[i].first->read(*found[i].second);
      if (!std::all_of(hf.begin(), hf.end(), [](float v) { return std::isfinite(v); }))
        throw UserError("'" + found[i].first->path() + "': tensor '" + tensors[i].name +
                        "' holds non-finite values (NaN or infinity); a model cannot start from it");
      from_hf(tensors[i], hf, global, spec.global_shape.back());
    }
    std::copy(global.begin(), global.end(), values.begin() + static_cast<std::ptrdiff_t>(spec.offset));
    if (progress) progress(static_cast<int>(++done), static_cast<int>(whole.table.tensors().size()), spec.name);
  }
  for (const auto& [r, info] : tied_heads) {
    const std::vector<float> head = r->read(*info);
    if (!std::equal(head.begin(), head.end(), values.begin() + static_cast<std::ptrdiff_t>(wte.offset)))
      throw UserError("'" + r->path() + "': lm_head.weight differs from the token embedding, but config.json ties them "
                      "(tie_word_embeddings)");
  }
  WeightsMeta meta;
  if (!tokenizer.empty() && !hc.tokenizer.empty() && tokenizer != hc.tokenizer)
    throw UserError("--tokenizer is " + tokenizer + ", but '" + config_path + "' records dtrain_tokenizer " + hc.tokenizer +
                    "; give the tokenizer the model was trained with, or none");
  meta.tokenizer = !tokenizer.empty() ? tokenizer : !hc.tokenizer.empty() ? hc.tokenizer : kUnrecordedTokenizer;
  Config cfg = hc.cfg;
  meta.config_text = config_as_ini(OptionTable(cfg));
  write_weights(out, whole.table, values.data(), meta, all_bf16 ? h5::Stored::bf16 : all_f16 ? h5::Stored::f16 : h5::Stored::f32);
  return hc.cfg;
}

}  // namespace dtrain
