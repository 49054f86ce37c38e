// h5::File: create/open, attributes, float datasets, listing; errors as UserError naming the file.
#include "ckpt/h5_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.hpp"

namespace dtrain::h5 {
namespace {

// Turns off HDF5's automatic error printing for this scope; errors are reported by our messages.
struct Quiet {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  Quiet() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Quiet() { H5Eset_auto2(H5E_DEFAULT, func, data); }
};

struct Handle {  // closes any hid_t with the matching close function
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

herr_t collect(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

}  // namespace

namespace {
inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;
}  // namespace

void Hasher::block(const unsigned char* p) {
  for (int i = 0; i < 4; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    lanes_[i] = rotl(lanes_[i] + w * kPrime2, 31) * kPrime1;
  }
}

void Hasher::update(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (tail_len_ > 0) {
    const std::size_t take = std::min(bytes, 32 - tail_len_);
    std::memcpy(tail_ + tail_len_, p, take);
    tail_len_ += take, p += take, bytes -= take;
    if (tail_len_ < 32) return;
    block(tail_);
    tail_len_ = 0;
  }
  for (; bytes >= 32; p += 32, bytes -= 32) block(p);
  std::memcpy(tail_, p, bytes);
  tail_len_ = bytes;
}

std::uint64_t Hasher::digest() const {
  std::uint64_t h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18) + total_;
  for (std::size_t i = 0; i < tail_len_; ++i) h = rotl(h ^ (tail_[i] * kPrime1), 11) * kPrime2;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

bool all_finite(const float* data, std::size_t n) {
  // An exponent of all ones is NaN or infinity; the branch-free loop vectorises.
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, data + i, 4);
    bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

std::uint64_t hash64(const void* data, std::size_t bytes) {
  Hasher h;
  h.update(data, bytes);
  return h.digest();
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(const std::string& text, std::uint64_t& v) {
  if (text.size() != 16) return false;
  std::uint64_t x = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    x = x << 4 | static_cast<std::uint64_t>(d);
  }
  v = x;
  return true;
}

std::uint64_t file_hash(const std::string& path, std::uint64_t* size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "' (missing?)");
  Hasher h;
  std::uint64_t n = 0;
  std::vector<char> buf(1 << 22);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    h.update(buf.data(), got);
    n += got;
  }
  if (size) *size = n;
  return h.digest();
}

File File::create(const std::string& path) {
  Quiet q;
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw UserError("cannot create '" + path + "' (directory missing, not writable, or disk full)");
  return File(id, path);
}

File File::open_read(const std::string& path) {
  Quiet q;
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw UserError("cannot open '" + path + "' as HDF5 (missing, truncated or corrupt)");
  return File(id, path);
}

File::File(File&& o) noexcept : id_(o.id_), path_(std::move(o.path_)) { o.id_ = -1; }

File::~File() {
  if (id_ >= 0) {
    Quiet q;
    H5Fclose(id_);
  }
}

void File::close() {
  Quiet q;
  if (id_ >= 0 && (H5Fflush(id_, H5F_SCOPE_GLOBAL) < 0 || H5Fclose(id_) < 0)) {
    id_ = -1;
    fail("closing (disk full?)");
  }
  id_ = -1;
}

void File::fail(const std::string& what) const { throw UserError("HDF5 file '" + path_ + "': " + what); }

void File::set_attr(const std::string& name, std::int64_t v, const std::string& object) {
  set_attr(name, std::vector<std::int64_t>{v}, object);
}

void File::set_attr(const std::string& name, const std::vector<std::int64_t>& v, const std::string& object) {
  Quiet q;
  const hsize_t n = v.size();
  Handle space{H5Screate_simple(1, &n, nullptr), H5Sclose};
  Handle attr{H5Acreate_by_name(id_, object.c_str(), name.c_str(), H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose};
  if (attr.id < 0 || H5Awrite(attr.id, H5T_NATIVE_INT64, v.data()) < 0) fail("writing attribute " + name);
}

void File::set_attr(const std::string& name, const std::string& v, const std::string& object) {
  Quiet q;
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, v.empty() ? 1 : v.size());
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate_by_name(id_, object.c_str(), name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose};
  const std::string padded = v.empty() ? std::string(1, '\0') : v;
  if (attr.id < 0 || H5Awrite(attr.id, type.id, padded.data()) < 0) fail("writing attribute " + name);
}

std::vector<std::int64_t> File::attr_ints(const std::string& name, const std::string& object) const {
  Quiet q;
  Handle attr{H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0) fail("no attribute '" + name + "' on " + object + " (not a dtrain checkpoint shard?)");
  Handle space{H5Aget_space(attr.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n < 0 || H5Aread(attr.id, H5T_NATIVE_INT64, v.data()) < 0) fail("reading attribute " + name);
  return v;
}

std::int64_t File::attr_int(const std::string& name, const std::string& object) const {
  const auto v = attr_ints(name, object);
  if (v.size() != 1) fail("attribute " + name + " is not a single integer");
  return v[0];
}

std::string File::attr_string(const std::string& name, const std::string& object) const {
  Quiet q;
  Handle attr{H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0) fail("no attribute '" + name + "' on " + object + " (not a dtrain checkpoint shard?)");
  Handle type{H5Aget_type(attr.id), H5Tclose};
  const std::size_t size = H5Tget_size(type.id);
  std::string s(size, '\0');
  if (H5Aread(attr.id, type.id, s.data()) < 0) fail("reading attribute " + name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

void File::write_floats(const std::string& name, const float* data, const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  if (!all_finite(data, n)) fail("dataset " + name + " holds non-finite values (NaN or infinity); they are never published");
  Quiet q;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle lcpl{H5Pcreate(H5P_LINK_CREATE), H5Pclose};
  H5Pset_create_intermediate_group(lcpl.id, 1);
  Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Handle ds{H5Dcreate2(id_, name.c_str(), H5T_IEEE_F32LE, space.id, lcpl.id, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
  if (ds.id < 0 || H5Dwrite(ds.id, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail("writing dataset " + name + " (disk full?)");
}

std::vector<float> File::read_floats(const std::string& name, std::vector<std::int64_t>* shape) const {
  Quiet q;
  Handle ds{H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("no dataset '" + name + "'");
  Handle space{H5Dget_space(ds.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  std::size_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::vector<float> v(n);
  if (rank < 0 || H5Dread(ds.id, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    fail("reading dataset " + name + " (corrupt?)");
  if (shape) shape->assign(dims.begin(), dims.end());
  return v;
}

std::vector<std::string> File::list_datasets(const std::string& group) const {
  Quiet q;
  std::vector<std::string> names;
  if (H5Ovisit2(id_, H5_INDEX_NAME, H5_ITER_INC, collect, &names, H5O_INFO_BASIC) < 0) fail("listing datasets");
  if (group == "/") return names;
  std::vector<std::string> under;
  const std::string prefix = group.front() == '/' ? group.substr(1) : group;
  for (auto& n : names)
    if (n.rfind(prefix + "/", 0) == 0) under.push_back(n);
  return under;
}

}  // namespace dtrain::h5
