// write_weights / read_weights through h5::File: every handle closed on every path, failures as
// UserError, no temporary left behind.
#include "ckpt/weights_file.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ckpt/h5_file.hpp"
#include "common/error.hpp"

namespace dtrain {

void write_weights(const std::string& path, const TensorTable& table, const float* values, const std::string& tokenizer) {
  const std::string tmp = path + ".tmp";
  try {
    h5::File f = h5::File::create(tmp);
    f.set_attr("tokenizer", tokenizer);
    for (const auto& t : table.tensors()) {
      if (t.split_dim >= 0) fatal("write_weights needs an unsharded table; '" + t.name + "' is split");
      f.write_floats(t.name, values + t.offset, std::vector<std::int64_t>(t.global_shape.begin(), t.global_shape.end()));
    }
    f.close();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UserError("cannot rename '" + tmp + "' to '" + path + "'");
  } catch (const UserError& e) {
    std::remove(tmp.c_str());
    throw UserError("the final weights were not written: " + std::string(e.what()));
  }
}

std::string weights_tokenizer(const std::string& path) {
  const h5::File f = h5::File::open_read(path);
  return f.has_attr("tokenizer") ? f.attr_string("tokenizer") : "byte";
}

void read_weights(const std::string& path, const TensorTable& table, float* values) {
  const h5::File f = h5::File::open_read(path);
  const auto present = f.list_datasets();
  for (const auto& t : table.tensors()) {
    if (std::find(present.begin(), present.end(), t.name) == present.end())
      throw UserError("weights file '" + path + "' has no tensor '" + t.name + "'; was it written for another model?");
    std::vector<std::int64_t> shape;
    const std::vector<float> data = f.read_floats(t.name, &shape);
    if (std::vector<long>(shape.begin(), shape.end()) != t.global_shape)
      throw UserError("weights file '" + path + "': tensor '" + t.name + "' has another shape than the model in the input file");
    std::copy(data.begin(), data.end(), values + t.offset);
  }
}

}  // namespace dtrain
