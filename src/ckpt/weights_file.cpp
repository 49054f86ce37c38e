// write_weights / read_weights / load_rank_weights through h5::File: every handle closed on every path,
// failures as UserError, no temporary left behind.
#include "ckpt/weights_file.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.hpp"

namespace dtrain {
namespace {

// The file holds tensor t with the model's global shape.
void check_tensor(const h5::File& f, const std::vector<std::string>& present, const TensorSpec& t) {
  if (std::find(present.begin(), present.end(), t.name) == present.end())
    throw UserError("weights file '" + f.path() + "' has no tensor '" + t.name + "'; was it written for another model?");
  const std::vector<std::int64_t> shape = f.shape(t.name);
  if (std::vector<long>(shape.begin(), shape.end()) != t.global_shape)
    throw UserError("weights file '" + f.path() + "': tensor '" + t.name + "' has another shape than the model in the input file");
}

}  // namespace

void write_weights(const std::string& path, const TensorTable& table, const float* values, const WeightsMeta& meta,
                   h5::Stored stored) {
  const std::string tmp = path + ".tmp";
  try {
    h5::File f = h5::File::create(tmp);
    f.set_attr("tokenizer", meta.tokenizer);
    if (!meta.config_text.empty()) f.set_attr("config", meta.config_text);
    for (const auto& t : table.tensors()) {
      if (t.split_dim >= 0) fatal("write_weights needs an unsharded table; '" + t.name + "' is split");
      f.create_dataset(t.name, std::vector<std::int64_t>(t.global_shape.begin(), t.global_shape.end()), stored)
          .write(values + t.offset);
    }
    f.close();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UserError("cannot rename '" + tmp + "' to '" + path + "'");
  } catch (const UserError& e) {
    std::remove(tmp.c_str());
    throw UserError("the weights file '" + path + "' was not written: " + std::string(e.what()));
  }
}

WeightsMeta weights_meta(const std::string& path) {
  const h5::File f = h5::File::open_read(path);
  WeightsMeta m;
  if (f.has_attr("tokenizer")) m.tokenizer = f.attr_string("tokenizer");
  if (f.has_attr("config")) m.config_text = f.attr_string("config");
  return m;
}

h5::Stored weights_stored(const std::string& path) {
  const h5::File f = h5::File::open_read(path);
  std::vector<std::string> weights;  // the root datasets; optimizer/... (fp32 always) are not weights
  for (const auto& n : f.list_datasets())
    if (n.find('/') == std::string::npos) weights.push_back(n);
  const bool bf16 = !weights.empty() && std::all_of(weights.begin(), weights.end(), [&](const std::string& n) {
    return f.stored(n) == h5::Stored::bf16;
  });
  return bf16 ? h5::Stored::bf16 : h5::Stored::f32;
}

void read_weights(const std::string& path, const TensorTable& table, float* values) {
  const h5::File f = h5::File::open_read(path);
  const auto present = f.list_datasets();
  for (const auto& t : table.tensors()) {
    check_tensor(f, present, t);
    const std::vector<float> data = f.read_floats(t.name);
    std::copy(data.begin(), data.end(), values + t.offset);
  }
}

void load_rank_weights(const std::string& path, RankState& st) {
  const h5::File f = h5::File::open_read(path);
  const auto present = f.list_datasets();
  for (const auto& t : st.plan->table.tensors()) check_tensor(f, present, t);
  if (st.moments[0] || st.moments[1]) fatal("load_rank_weights: a weights file holds no optimizer state");
  load_slices(st, [&](int, const TensorSpec& t, std::size_t begin, std::size_t count, float* out) {
    std::vector<h5::Span> spans;  // the slice's runs, as runs of the global tensor's elements
    for_each_run(t, static_cast<long>(begin), static_cast<long>(count), [&](long li, long gi, long len) {
      const std::int64_t to = li - static_cast<long>(begin);
      if (!spans.empty() && spans.back().at + spans.back().count == gi && spans.back().to + spans.back().count == to)
        spans.back().count += len;
      else
        spans.push_back({gi, len, to});
    });
    f.read_spans(t.name, spans, out);
  });
}

}  // namespace dtrain
