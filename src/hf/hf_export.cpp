// export_hf: dtrain's global tensors (a checkpoint or a weights file) -> a Hugging Face directory.
#include "hf/hf_convert.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckpt/weights_file.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "config/load.hpp"
#include "config/options.hpp"
#include "hf/hf_model.hpp"
#include "plan/rank_plan.hpp"

namespace fs = std::filesystem;

namespace dtrain {
namespace {

// Runs step with any library exception (nlohmann, std::filesystem, allocation) as a UserError, so a
// collective step fails on every rank alike instead of ending one rank.
void as_user_error(const std::function<void()>& step) {
  try {
    step();
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError(e.what());
  }
}

std::vector<long> as_long(const std::vector<std::int64_t>& v) { return {v.begin(), v.end()}; }

// The tensors of the weights against the whole-model table of their configuration.
const TensorTable& check_weights(const ModelWeights& w, const RankPlan& whole) {
  for (const auto& t : whole.table.tensors())
    if (as_long(w.shape(t.name)) != t.global_shape)
      throw UserError(w.what + ": tensor '" + t.name + "' has another shape than its stored configuration says");
  return whole.table;
}

// One output file: its name and its tensors (indices into the HF tensor list), in model order.
struct ShardPlan {
  std::string file;
  std::vector<std::size_t> tensors;
  std::uint64_t bytes = 0;
};

std::vector<ShardPlan> plan_shards(const std::vector<HfTensor>& tensors, std::size_t element_bytes, std::uint64_t limit) {
  std::vector<ShardPlan> shards(1);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::uint64_t bytes = element_bytes;
    for (auto d : tensors[i].shape) bytes *= static_cast<std::uint64_t>(d);
    if (!shards.back().tensors.empty() && shards.back().bytes + bytes > limit) shards.emplace_back();
    shards.back().tensors.push_back(i);
    shards.back().bytes += bytes;
  }
  const std::size_t n = shards.size();
  for (std::size_t k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
    shards[k].file = n == 1 ? "model.safetensors" : name;
  }
  return shards;
}

// The whole dtrain tensors an export reads, a few at a time (an HF tensor is one block of one of them,
// and the tensors of one file come sorted by name, so a layer's blocks arrive close together).
class SourceCache {
 public:
  explicit SourceCache(const ModelWeights& w) : w_(w) {}
  const std::vector<float>& get(const std::string& name) {
    for (const auto& [n, values] : entries_)
      if (n == name) return values;
    if (entries_.size() == 4) entries_.erase(entries_.begin());
    entries_.emplace_back(name, w_.tensor(name));
    return entries_.back().second;
  }

 private:
  const ModelWeights& w_;
  std::vector<std::pair<std::string, std::vector<float>>> entries_;
};

}  // namespace

ModelWeights checkpoint_weights(const CheckpointReader& reader) {
  ModelWeights w;
  w.cfg = checkpoint_config(reader);
  w.tokenizer = reader.meta().tokenizer;
  w.stored = h5::Stored::f32;
  w.what = "checkpoint '" + reader.dir() + "'";
  w.shape = [&reader](const std::string& name) { return reader.global_shape(name); };
  w.tensor = [&reader](const std::string& name) { return reader.global_tensor("param", name); };
  return w;
}

ModelWeights file_weights(const std::string& path) {
  const WeightsMeta meta = weights_meta(path);
  ModelWeights w;
  w.what = "weights file '" + path + "'";
  if (meta.config_text.empty())
    throw UserError(w.what + " holds no model configuration (written by an older dtrain); export from its checkpoint instead");
  w.cfg = load_config(meta.config_text, path + " (stored configuration)", {});
  w.tokenizer = meta.tokenizer;
  w.stored = weights_stored(path);
  auto file = std::make_shared<h5::File>(h5::File::open_read(path));
  const auto present = std::make_shared<std::vector<std::string>>(file->list_datasets());
  auto check = [present, what = w.what](const std::string& name) {
    if (std::find(present->begin(), present->end(), name) == present->end())
      throw UserError(what + " has no tensor '" + name + "'; was it written for another model?");
  };
  w.shape = [file, check](const std::string& name) {
    check(name);
    return file->shape(name);
  };
  w.tensor = [file, check](const std::string& name) {
    check(name);
    return file->read_floats(name);
  };
  return w;
}

std::uint64_t parse_byte_size(const std::string& text, const std::string& option) {
  static const std::pair<const char*, std::uint64_t> kUnits[] = {{"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
                                                                 {"GB", 1000000000ull}, {"MB", 1000000ull}, {"KB", 1000ull},
                                                                 {"B", 1ull}};
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::uint64_t scale = used > 0 && unit.empty() ? 1 : 0;
  for (const auto& [name, factor] : kUnits)
    if (unit == name) scale = factor;
  if (used == 0 || scale == 0 || !(number * static_cast<double>(scale) >= 1) || number * static_cast<double>(scale) > 1e18)
    throw UserError(option + " '" + text + "' is not a size: give bytes or a number with GB, MB, KB, GiB, MiB or KiB (e.g. 5GB)");
  return static_cast<std::uint64_t>(number * static_cast<double>(scale));
}

void export_hf(HostComm comm, const ModelWeights& w, const std::string& dir, const HfExportOptions& options,
               const Progress& progress) {
  const int rank = comm.rank(), size = comm.size();
  const std::vector<HfTensor> tensors = hf_tensors(w.cfg);
  const RankPlan whole = whole_model_plan(w.cfg, 1);
  std::map<std::string, std::int64_t> cols;  // last dimension of each dtrain tensor
  collective_check(comm, [&] {
    for (const auto& t : check_weights(w, whole).tensors()) cols[t.name] = t.global_shape.back();
    if (rank != 0) return;
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
      throw UserError("--export-hf: '" + dir + "' is not empty; give a new or empty directory (old and new files together "
                      "would be a wrong model)");
    fs::create_directories(dir, ec);
    if (ec) throw UserError("--export-hf: cannot create '" + dir + "': " + ec.message());
  });
  const std::vector<ShardPlan> shards = plan_shards(tensors, safetensors::dtype_bytes(options.dtype), options.max_shard_bytes);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  try {
    collective_check(comm, [&] { as_user_error([&] {
      SourceCache cache(w);
      for (std::size_t k = static_cast<std::size_t>(rank); k < shards.size(); k += static_cast<std::size_t>(size)) {
        std::vector<std::size_t> order = shards[k].tensors;
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });
        std::vector<safetensors::PlannedTensor> planned;
        for (std::size_t i : order) planned.push_back({tensors[i].name, tensors[i].shape});
        safetensors::Writer writer(dir + "/" + shards[k].file, planned, options.dtype, metadata);
        for (std::size_t i : order) {
          const HfTensor& t = tensors[i];
          const std::vector<float> values = to_hf(t, cache.get(t.source), cols.at(t.source));
          writer.write(t.name, values.data(), values.size());
        }
        writer.finish();
        if (progress) progress(static_cast<int>(k + 1), static_cast<int>(shards.size()), shards[k].file);
      }
    }); });
    collective_check(comm, [&] { as_user_error([&] {
      if (rank != 0) return;
      if (shards.size() > 1) {
        nlohmann::json index;
        std::uint64_t total = 0;
        for (const auto& s : shards) {
          total += s.bytes;
          for (std::size_t i : s.tensors) index["weight_map"][tensors[i].name] = s.file;
        }
        index["metadata"]["total_size"] = total;
        write_file_atomically(dir + "/model.safetensors.index.json", index.dump(2) + "\n", "safetensors index");
      }
      const char* torch_dtype = options.dtype == safetensors::DType::bf16  ? "bfloat16"
                                : options.dtype == safetensors::DType::f16 ? "float16"
                                                                           : "float32";
      write_file_atomically(dir + "/config.json", hf_config_json(w.cfg, torch_dtype, w.tokenizer), "config.json");
      for (const auto& [name, contents] : options.extra_files) write_file_atomically(dir + "/" + name, contents, name);
    }); });
  } catch (const UserError&) {
    barrier(comm);  // every writer has closed (and removed) its temporary
    if (rank == 0) {
      for (const auto& s : shards) std::remove((dir + "/" + s.file).c_str());
      for (const char* f : {"/model.safetensors.index.json", "/config.json"}) std::remove((dir + f).c_str());
      for (const auto& extra : options.extra_files) std::remove((dir + "/" + extra.first).c_str());
    }
    throw;
  }
}

}  // namespace dtrain
