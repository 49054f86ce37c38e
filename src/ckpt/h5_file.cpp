// h5::File: create/open, float datasets whole or in hyperslabs, listing; errors as UserError naming
// the file; the count of dataset bytes read. Attributes are in h5_attributes.cpp.
#include "ckpt/h5_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ckpt/checksum.hpp"
#include "ckpt/h5_scope.hpp"
#include "ckpt/io_phases.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "common/round16.hpp"

namespace dtrain::h5 {
namespace {

// The innermost error's description, on one line: for a failed system call HDF5 writes a long
// record ("file write failed: time = ..., errno = 28, error message = 'No space left on device', ...");
// keep its first words and the system's message.
herr_t innermost(unsigned n, const H5E_error2_t* err, void* out) {
  if (n != 0 || !err->desc || !*err->desc) return 0;
  std::string desc = err->desc;
  const std::string marker = "error message = '";
  const auto at = desc.find(marker);
  std::string detail;
  if (at != std::string::npos) {
    const auto begin = at + marker.size(), end = desc.find('\'', begin);
    detail = desc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  desc = desc.substr(0, std::min(desc.find(':'), desc.find('\n')));
  *static_cast<std::string*>(out) = detail.empty() ? desc : desc + ": " + detail;
  return 0;
}

// The cause HDF5 recorded for the last failed call (its innermost error), e.g. "file write failed".
std::string innermost_error() {
  std::string cause = "no further detail";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &cause);
  return cause;
}

herr_t collect(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

std::atomic<std::uint64_t> bytes_read{0};

// A box of a dataspace: its first element and its size per dimension.
struct Box {
  std::vector<hsize_t> start, size;
};

// The flat row-major elements [a, b) of a dataspace of `dims` as boxes (at most 2 per dimension):
// from each position, the coarsest dimension whose whole sub-blocks start there.
void flat_boxes(const std::vector<hsize_t>& dims, hsize_t a, hsize_t b, std::vector<Box>& out) {
  const std::size_t n = dims.size();  // 0: a scalar, whose one element is selected already
  std::vector<hsize_t> stride(n, 1);
  for (std::size_t d = n; d-- > 1;) stride[d - 1] = stride[d] * dims[d];
  while (n > 0 && a < b)
    for (std::size_t d = 0; d < n; ++d) {
      const hsize_t take = a % stride[d] != 0 ? 0 : std::min(dims[d] - a / stride[d] % dims[d], (b - a) / stride[d]);
      if (take == 0) continue;  // not aligned to dimension d, or less than one of its sub-blocks left
      Box box{std::vector<hsize_t>(n), std::vector<hsize_t>(n, 1)};
      for (std::size_t e = 0; e < n; ++e) box.start[e] = a / stride[e] % dims[e];
      box.size[d] = take;
      for (std::size_t e = d + 1; e < n; ++e) box.size[e] = dims[e];
      out.push_back(std::move(box));
      a += take * stride[d];
      break;
    }
}

// Selects boxes (in increasing order, disjoint) of `space`. Boxes of one size repeating at a constant
// step along one dimension are one strided hyperslab: the rows of a column-split slice are one call.
bool select_boxes(hid_t space, const std::vector<Box>& boxes) {
  for (std::size_t i = 0; i < boxes.size();) {
    const Box& b = boxes[i];
    std::vector<hsize_t> stride = b.size, count(b.start.size(), 1);
    std::size_t j = i + 1, dim = 0, differ = 0;
    if (j < boxes.size() && boxes[j].size == b.size)
      for (std::size_t d = 0; d < b.start.size(); ++d)
        if (boxes[j].start[d] != b.start[d]) ++differ, dim = d;
    if (differ == 1 && boxes[j].start[dim] >= b.start[dim] + b.size[dim]) {
      const hsize_t step = boxes[j].start[dim] - b.start[dim];
      std::vector<hsize_t> next = b.start;
      for (next[dim] += step; j < boxes.size() && boxes[j].size == b.size && boxes[j].start == next; next[dim] += step) ++j;
      stride[dim] = step;
      count[dim] = j - i;
    }
    if (H5Sselect_hyperslab(space, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, b.start.data(), stride.data(), count.data(),
                            b.size.data()) < 0)
      return false;
    i = j;
  }
  return true;
}

}  // namespace

std::uint64_t dataset_bytes_read() { return bytes_read.load(); }

File File::create(const std::string& path) {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  auto record = std::make_unique<IoRecord>();
  // Closing the file closes whatever of it is still open, so one close releases it entirely.
  Handle fapl{checked_driver_fapl(record.get()), H5Pclose};
  if (fapl.id >= 0) H5Pset_fclose_degree(fapl.id, H5F_CLOSE_STRONG);
  const hid_t id = fapl.id < 0 ? -1 : H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id);
  if (id < 0)
    throw UserError("cannot create '" + path + "' (" +
                    (record->open_err ? std::string(std::strerror(record->open_err)) : "HDF5: " + innermost_error()) +
                    "); check that its directory exists, is writable and has space");
  File f(id, path, /*writable=*/true, {}, std::move(record));
  f.check_written("creating it", __LINE__);
  return f;
}

File File::create_parallel(const std::string& path, HostComm comm) {
  Quiet q;
  Handle fapl{H5Pcreate(H5P_FILE_ACCESS), H5Pclose};
  H5Pset_fapl_mpio(fapl.id, comm.mpi(), MPI_INFO_NULL);
  H5Pset_fclose_degree(fapl.id, H5F_CLOSE_STRONG);
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id);
  if (id < 0) throw UserError("cannot create '" + path + "' (directory missing, not writable, or disk full; HDF5: " + innermost_error() + ")");
  return File(id, path, /*writable=*/true, comm);
}

File File::open_read(const std::string& path) {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw UserError("cannot open '" + path + "' as HDF5 (missing, truncated or corrupt; HDF5: " + innermost_error() + ")");
  return File(id, path, /*writable=*/false);
}

File::File(File&& o) noexcept
    : id_(o.id_), path_(std::move(o.path_)), writable_(o.writable_), comm_(o.comm_), record_(std::move(o.record_)), failed_(o.failed_) {
  o.id_ = -1;
}

File::~File() {
  if (id_ < 0) return;
  if (writable_ && failed_) {
    discard();
    return;
  }
  Quiet q;
  H5Fclose(id_);
}

void File::discard() {
  Quiet q;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(id_, H5P_DEFAULT, &handle) >= 0 && handle) {
    if (!comm_.null())
      truncate_mpi_file(handle);  // the MPI-IO driver's file (collective)
    else if (::ftruncate(*static_cast<int*>(handle), 0) != 0) {
      // the sec2 driver's descriptor; nothing more can be freed, HDF5 closes as well as it can
    }
  }
  H5Fclose(id_);
  id_ = -1;
}

// A parallel file's ranks agree on every outcome: if any failed, all did.
bool File::agreed(bool ok) const {
  return !comm_.null() ? all_reduce(comm_, ok ? 1 : 0, HostOp::min) == 1 : ok;
}

void File::close() {
  IoPhaseTimer t(IoPhase::close);
  if (id_ < 0) return;
  Quiet q;
  if (!agreed(H5Fflush(id_, H5F_SCOPE_GLOBAL) >= 0)) fail("closing (disk full?)", __LINE__);  // the destructor discards it
  check_written("closing", __LINE__);
  const bool closed = agreed(H5Fclose(id_) >= 0);
  id_ = -1;
  if (!closed) fail("closing (disk full?)", __LINE__);
  if (record_ && record_->failed()) {
    if (::truncate(path_.c_str(), 0) != 0) {
      // nothing more can be freed; the caller removes the file
    }
    check_written("closing", __LINE__);
  }
}

void File::check_written(const std::string& what, int line) const {
  if (!record_ || !record_->failed()) return;
  fail(what + ": " + record_->step + " failed (" + std::strerror(record_->err) + ")", line, false);
}

void File::fail(const std::string& what, int line, bool library_error) const {
  failed_ = true;
  throw UserError("HDF5 file '" + path_ + "': " + what + (library_error ? " (HDF5: " + innermost_error() + ")" : std::string()) +
                  " [h5_file.cpp:" + std::to_string(line) + "]");
}

Dataset File::create_dataset(const std::string& name, const std::vector<std::int64_t>& shape, Stored stored) {
  IoPhaseTimer t(IoPhase::metadata);
  Quiet q;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  Handle lcpl{H5Pcreate(H5P_LINK_CREATE), H5Pclose};
  H5Pset_create_intermediate_group(lcpl.id, 1);
  Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  const hid_t id = H5Dcreate2(id_, name.c_str(), file_type(stored), space.id, lcpl.id, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) fail("creating dataset " + name + " (disk full?)", __LINE__);
  Dataset d(this, id, name, dims, n, stored);
  check_written("creating dataset " + name, __LINE__);
  return d;
}

Dataset::~Dataset() {
  if (id_ >= 0) {
    Quiet q;
    H5Dclose(id_);
  }
}

void Dataset::close() {
  if (id_ < 0) return;
  IoPhaseTimer t(IoPhase::data);  // what HDF5 still buffers of the dataset's data is written now
  Quiet q;
  const bool closed = file_->agreed(H5Dclose(id_) >= 0);
  id_ = -1;
  if (!closed) file_->fail("writing dataset " + name_ + " (disk full?)", __LINE__);
  file_->check_written("writing dataset " + name_, __LINE__);
}

void Dataset::write_range(std::size_t at, std::size_t count, const float* data) {
  bool finite;
  {
    IoPhaseTimer t(IoPhase::checks);
    finite = all_finite(data, count);
  }
  if (!finite)
    file_->fail("dataset " + name_ + " holds non-finite values (NaN or infinity); they are never published", __LINE__, false);
  if (count == 0) return;
  if (at + count > count_) fatal("Dataset::write_range past the end of " + name_);
  Quiet q;
  std::vector<Box> boxes;
  flat_boxes(dims_, at, at + count, boxes);
  const hsize_t n = count;
  Handle memory{H5Screate_simple(1, &n, nullptr), H5Sclose};
  Handle space{H5Dget_space(id_), H5Sclose};
  if (space.id < 0 || !select_boxes(space.id, boxes)) file_->fail("selecting part of dataset " + name_, __LINE__);
  IoPhaseTimer t(IoPhase::data);
  herr_t rc;
  if (stored_ == Stored::f32) {
    rc = H5Dwrite(id_, H5T_NATIVE_FLOAT, memory.id, space.id, H5P_DEFAULT, data);
  } else {
    // Rounded here (to nearest even, as the trainer rounds), then written as stored.
    const bool f16 = stored_ == Stored::f16;
    std::vector<std::uint16_t> rounded(count);
    const std::size_t bad = round_to_16(f16 ? Type16::fp16 : Type16::bf16, data, count, rounded.data());
    if (bad < count)
      file_->fail("dataset " + name_ + " holds " + std::to_string(data[bad]) + ", beyond " + stored_name(stored_) +
                      "'s range; write it with --dtype fp32" + (f16 ? " or bf16" : ""),
                  __LINE__, false);
    rc = H5Dwrite(id_, file_type(stored_), memory.id, space.id, H5P_DEFAULT, rounded.data());
  }
  if (rc < 0) file_->fail("writing dataset " + name_ + " (disk full?)", __LINE__);
  file_->check_written("writing dataset " + name_, __LINE__);
}

void File::write_floats(const std::string& name, const float* data, const std::vector<std::int64_t>& shape) {
  Dataset d = create_dataset(name, shape);
  d.write(data);
  d.close();
}

std::vector<float> File::read_floats(const std::string& name, std::vector<std::int64_t>* shape) const {
  const std::vector<std::int64_t> dims = this->shape(name);
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  read_spans(name, {Span{0, n, 0}}, v.data());
  if (shape) *shape = dims;
  return v;
}

void File::read_spans(const std::string& name, const std::vector<Span>& spans, float* out) const {
  Quiet q;
  Handle ds{H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("no dataset '" + name + "'", __LINE__);
  const std::vector<std::int64_t> shape = this->shape(name);
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  std::int64_t total = 1, at = 0, to = 0, n = 0;
  for (auto d : shape) total *= d;
  std::vector<Box> in_file, in_memory;
  for (const Span& s : spans) {
    if (s.count <= 0) continue;
    if (s.at < at || s.to < to) fatal("File::read_spans: spans of " + name + " out of order");
    if (s.at + s.count > total)
      fail("dataset " + name + " has " + std::to_string(total) + " elements, fewer than its attributes say (corrupt)", __LINE__, false);
    flat_boxes(dims, static_cast<hsize_t>(s.at), static_cast<hsize_t>(s.at + s.count), in_file);
    in_memory.push_back(Box{{static_cast<hsize_t>(s.to)}, {static_cast<hsize_t>(s.count)}});
    at = s.at + s.count, to = s.to + s.count, n += s.count;
  }
  if (n == 0) return;
  const hsize_t extent = static_cast<hsize_t>(to);
  Handle memory{H5Screate_simple(1, &extent, nullptr), H5Sclose};
  Handle space{H5Dget_space(ds.id), H5Sclose};
  if (space.id < 0 || !select_boxes(space.id, in_file) || !select_boxes(memory.id, in_memory))
    fail("selecting parts of dataset " + name, __LINE__);
  IoPhaseTimer t(IoPhase::data);
  if (H5Dread(ds.id, H5T_NATIVE_FLOAT, memory.id, space.id, H5P_DEFAULT, out) < 0) fail("reading dataset " + name + " (corrupt?)", __LINE__);
  bytes_read += static_cast<std::uint64_t>(n) * (stored(name) == Stored::f32 ? 4 : 2);
}

std::vector<std::int64_t> File::shape(const std::string& name) const {
  Quiet q;
  Handle ds{H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("no dataset '" + name + "'", __LINE__);
  Handle space{H5Dget_space(ds.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  if (rank < 0 || H5Sget_simple_extent_dims(space.id, dims.data(), nullptr) < 0) fail("reading the shape of dataset " + name, __LINE__);
  // Every dataset dtrain writes is whole and contiguous: its stored bytes are its elements times their
  // size. One declaring other dimensions (never written, or a shape that no file holds) is refused here,
  // before its shape sizes any buffer.
  Handle type{H5Dget_type(ds.id), H5Tclose};
  const hsize_t width = type.id < 0 ? 0 : H5Tget_size(type.id);
  const hsize_t stored = H5Dget_storage_size(ds.id);
  hsize_t elements = 1;
  bool fits = width > 0;
  for (hsize_t d : dims) {
    fits = fits && (d == 0 || elements <= stored / d);
    elements = fits ? elements * d : 0;
  }
  if (!fits || elements * width != stored)
    fail("dataset " + name + " has a shape that disagrees with the bytes the file stores for it (corrupt)", __LINE__, false);
  return {dims.begin(), dims.end()};
}

Stored File::stored(const std::string& name) const {
  Quiet q;
  Handle ds{H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("no dataset '" + name + "'", __LINE__);
  Handle type{H5Dget_type(ds.id), H5Tclose};
  if (type.id < 0) fail("reading the type of dataset " + name, __LINE__);
  return stored_of(type.id);
}

std::vector<std::string> File::list_datasets(const std::string& group) const {
  Quiet q;
  std::vector<std::string> names;
  if (H5Ovisit2(id_, H5_INDEX_NAME, H5_ITER_INC, collect, &names, H5O_INFO_BASIC) < 0) fail("listing datasets", __LINE__);
  if (group == "/") return names;
  std::vector<std::string> under;
  const std::string prefix = group.front() == '/' ? group.substr(1) : group;
  for (auto& n : names)
    if (n.rfind(prefix + "/", 0) == 0) under.push_back(n);
  return under;
}

}  // namespace dtrain::h5
