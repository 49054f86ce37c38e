// h5::File's attributes: integers, doubles and strings on the root or a dataset.
#include <string>
#include <vector>

#include "ckpt/h5_file.hpp"
#include "ckpt/h5_scope.hpp"
#include "ckpt/io_phases.hpp"

namespace dtrain::h5 {

void File::set_attr(const std::string& name, std::int64_t v, const std::string& object) {
  set_attr(name, std::vector<std::int64_t>{v}, object);
}

void File::write_attr(const std::string& name, const std::string& object, hid_t stored, hid_t memory, const void* values, hsize_t n) {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  Handle space{H5Screate_simple(1, &n, nullptr), H5Sclose};
  Handle attr{H5Acreate_by_name(id_, object.c_str(), name.c_str(), stored, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0 || H5Awrite(attr.id, memory, values) < 0) fail("writing attribute " + name, __LINE__);
  check_written("writing attribute " + name, __LINE__);
}

template <typename T>
std::vector<T> File::read_attr(const std::string& name, const std::string& object, hid_t memory) const {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  Handle attr{H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0) fail("no attribute '" + name + "' on " + object + " (not a dtrain checkpoint shard?)", __LINE__);
  Handle space{H5Aget_space(attr.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  std::vector<T> v(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n < 0 || H5Aread(attr.id, memory, v.data()) < 0) fail("reading attribute " + name, __LINE__);
  return v;
}

void File::set_attr(const std::string& name, const std::vector<std::int64_t>& v, const std::string& object) {
  write_attr(name, object, H5T_STD_I64LE, H5T_NATIVE_INT64, v.data(), v.size());
}

void File::set_attr(const std::string& name, const std::string& v, const std::string& object) {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, v.empty() ? 1 : v.size());
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate_by_name(id_, object.c_str(), name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose};
  const std::string padded = v.empty() ? std::string(1, '\0') : v;
  if (attr.id < 0 || H5Awrite(attr.id, type.id, padded.data()) < 0) fail("writing attribute " + name, __LINE__);
  check_written("writing attribute " + name, __LINE__);
}

std::vector<std::int64_t> File::attr_ints(const std::string& name, const std::string& object) const {
  return read_attr<std::int64_t>(name, object, H5T_NATIVE_INT64);
}

void File::set_attr_double(const std::string& name, double v, const std::string& object) {
  write_attr(name, object, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, 1);
}

double File::attr_double(const std::string& name, const std::string& object) const {
  const auto v = read_attr<double>(name, object, H5T_NATIVE_DOUBLE);
  if (v.size() != 1) fail("attribute " + name + " is not a single number", __LINE__, false);
  return v[0];
}

bool File::has_attr(const std::string& name, const std::string& object) const {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  const htri_t exists = H5Aexists_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT);
  if (exists < 0) fail("looking for attribute " + name + " on " + object, __LINE__);
  return exists > 0;
}

std::int64_t File::attr_int(const std::string& name, const std::string& object) const {
  const auto v = attr_ints(name, object);
  if (v.size() != 1) fail("attribute " + name + " is not a single integer", __LINE__, false);
  return v[0];
}

std::string File::attr_string(const std::string& name, const std::string& object) const {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  Handle attr{H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0) fail("no attribute '" + name + "' on " + object + " (not a dtrain checkpoint shard?)", __LINE__);
  Handle type{H5Aget_type(attr.id), H5Tclose};
  const std::size_t size = H5Tget_size(type.id);
  std::string s(size, '\0');
  if (H5Aread(attr.id, type.id, s.data()) < 0) fail("reading attribute " + name, __LINE__);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace dtrain::h5
