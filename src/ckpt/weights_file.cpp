// write_weights / read_weights with the HDF5 C API (default serial driver).
#include "ckpt/weights_file.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.hpp"

namespace dtrain {

void write_weights(const std::string& path, const TensorTable& table, const Arena& params) {
  const std::string tmp = path + ".tmp";
  const hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw UserError("cannot create weights file '" + tmp + "'; check that the directory exists and is writable");
  for (const auto& t : table.tensors()) {
    if (t.split_dim >= 0) fatal("write_weights needs an unsharded table; '" + t.name + "' is split");
    std::vector<hsize_t> dims(t.global_shape.begin(), t.global_shape.end());
    const hid_t space = H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    const hid_t ds = H5_CHECK(H5Dcreate2(file, t.name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, params.data() + t.offset));
    H5_CHECK(H5Dclose(ds));
    H5_CHECK(H5Sclose(space));
  }
  H5_CHECK(H5Fclose(file));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UserError("cannot rename '" + tmp + "' to '" + path + "'");
}

namespace {

// Reads every tensor; returns "" or what is wrong. HDF5's own error printing is off meanwhile.
std::string try_read(const std::string& path, const TensorTable& table, Arena& params) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return "cannot open weights file '" + path + "' (missing or not HDF5)";
  std::string problem;
  for (const auto& t : table.tensors()) {
    const hid_t ds = H5Dopen2(file, t.name.c_str(), H5P_DEFAULT);
    if (ds < 0) {
      problem = "weights file '" + path + "' has no tensor '" + t.name + "'; was it written for another model?";
      break;
    }
    const hid_t space = H5Dget_space(ds);
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    const std::vector<hsize_t> want(t.global_shape.begin(), t.global_shape.end());
    if (dims != want)
      problem = "weights file '" + path + "': tensor '" + t.name + "' has another shape than the model in the input file";
    else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, params.data() + t.offset) < 0)
      problem = "weights file '" + path + "': tensor '" + t.name + "' cannot be read (corrupt file?)";
    H5Sclose(space);
    H5Dclose(ds);
    if (!problem.empty()) break;
  }
  H5Fclose(file);
  return problem;
}

}  // namespace

void read_weights(const std::string& path, const TensorTable& table, Arena& params) {
  std::string problem;
  H5E_BEGIN_TRY { problem = try_read(path, table, params); }
  H5E_END_TRY;
  if (!problem.empty()) throw UserError(problem);
}

}  // namespace dtrain
