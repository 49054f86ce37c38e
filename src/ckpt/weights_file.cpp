// WeightsWriter / write_weights / read_weights / load_rank_weights through h5::File: every handle
// closed on every path, failures as UserError, no temporary left behind.
#include "ckpt/weights_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/error.hpp"
#include "common/staged_file.hpp"

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

WeightsWriter::WeightsWriter(const std::string& path, const WeightsMeta& meta, h5::Stored stored)
    : path_(path), tmp_(staged_name(path)), stored_(stored) {
  try {
    file_.emplace(h5::File::create(tmp_));
    file_->set_attr("tokenizer", meta.tokenizer);
    if (!meta.config_text.empty()) file_->set_attr("config", meta.config_text);
  } catch (const UserError& e) {
    failed(e.what());
  }
}

WeightsWriter::~WeightsWriter() {
  if (!file_) return;  // finished, or failed and cleaned up
  dataset_.reset();
  file_->mark_failed();  // discarded as a failed file is, then removed
  file_.reset();
  std::remove(tmp_.c_str());
}

void WeightsWriter::failed(const std::string& why) {
  dataset_.reset();
  if (file_) file_->mark_failed();
  file_.reset();
  std::remove(tmp_.c_str());
  throw UserError("the weights file '" + path_ + "' was not written: " + why);
}

void WeightsWriter::write(const std::string& name, const std::vector<long>& shape, std::size_t begin, std::size_t count,
                          const float* values) {
  if (!file_) fatal("WeightsWriter::write on a finished or failed file '" + path_ + "'");
  try {
    if (!dataset_ || name != tensor_) {
      if (dataset_) dataset_->close();
      dataset_.reset();
      dataset_.emplace(file_->create_dataset(name, std::vector<std::int64_t>(shape.begin(), shape.end()), stored_));
      tensor_ = name;
    }
    dataset_->write_range(begin, count, values);
  } catch (const UserError& e) {
    failed(e.what());
  }
}

void WeightsWriter::finish() {
  if (!file_) fatal("WeightsWriter::finish on a finished or failed file '" + path_ + "'");
  try {
    if (dataset_) dataset_->close();
    dataset_.reset();
    file_->close();
    file_.reset();
    publish_file(tmp_, path_, "weights file");
  } catch (const UserError& e) {
    failed(e.what());
  }
}

void write_weights(const std::string& path, const TensorTable& table, const float* values, const WeightsMeta& meta,
                   h5::Stored stored) {
  WeightsWriter out(path, meta, stored);
  for (const auto& t : table.tensors()) {
    if (t.split_dim >= 0) fatal("write_weights needs an unsharded table; '" + t.name + "' is split");
    out.write(t.name, t.global_shape, 0, t.numel, values + t.offset);
  }
  out.finish();
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
  if (weights.empty()) return h5::Stored::f32;
  const h5::Stored first = f.stored(weights.front());
  const bool same = std::all_of(weights.begin(), weights.end(), [&](const std::string& n) { return f.stored(n) == first; });
  return same ? first : h5::Stored::f32;
}

void read_weights(const std::string& path, const TensorTable& table, float* values) {
  const h5::File f = h5::File::open_read(path);
  const auto present = f.list_datasets();
  for (const auto& t : table.tensors()) {
    check_tensor(f, present, t);
    const std::vector<float> data = f.read_floats(t.name);
    if (!std::all_of(data.begin(), data.end(), [](float v) { return std::isfinite(v); }))
      throw UserError("weights file '" + path + "': tensor '" + t.name + "' holds non-finite values (NaN or infinity); a model "
                      "cannot start from it");
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
    // A NaN or infinity would train into a non-finite loss at the first step: refuse it here, by name.
    for (std::size_t i = 0; i < count; ++i)
      if (!std::isfinite(out[i]))
        throw UserError("weights file '" + path + "': tensor '" + t.name + "' holds non-finite values (NaN or infinity); " +
                        "a model cannot start from it");
  });
}

}  // namespace dtrain
