// Small RAII helpers over the HDF5 C API for checkpoint and weights files: every HDF5 call of the
// project goes through them. Every failure becomes a UserError that names the file, what was being
// done, HDF5's own cause and the call's line, so a bad or missing file or a full disk is reported,
// never a crash; HDF5's own stack printing is off. Datasets are read and written whole or in parts
// (hyperslabs of flat row-major element ranges), and every byte read from a dataset is counted.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/h5_checked_driver.hpp"
#include "ckpt/h5_float_types.hpp"
#include "comm/host_comm.hpp"

namespace dtrain::h5 {

class File;

// Elements [at, at + count) of a dataset (flat, row-major, whatever its shape) and where they go in a
// contiguous memory buffer: [to, to + count).
struct Span {
  std::int64_t at = 0, count = 0, to = 0;
};

// Bytes this process has read from datasets (as stored: 4 per fp32 element, 2 per bf16), since it started.
std::uint64_t dataset_bytes_read();

// One float dataset of a writable file, open until closed (close() checks that its data reached the
// file; the destructor of a dataset not closed, on an error's way out, only releases it).
class Dataset {
 public:
  Dataset(Dataset&& o) noexcept
      : file_(o.file_), id_(o.id_), name_(std::move(o.name_)), dims_(std::move(o.dims_)), count_(o.count_), stored_(o.stored_) {
    o.id_ = -1;
  }
  Dataset(const Dataset&) = delete;
  ~Dataset();
  // Writes the whole dataset (count values, rounded to bf16 when stored so); non-finite values are
  // refused. Independent I/O in a parallel file.
  void write(const float* data) { write_range(0, count_, data); }
  // Writes elements [at, at + count) (flat, row-major) of the dataset, the same way.
  void write_range(std::size_t at, std::size_t count, const float* data);
  // Closes the dataset, writing what HDF5 still buffers of it; throws when that failed. Collective
  // for a parallel file.
  void close();
  std::size_t size() const { return count_; }

 private:
  friend class File;
  Dataset(const File* file, hid_t id, std::string name, std::vector<hsize_t> dims, std::size_t count, Stored stored)
      : file_(file), id_(id), name_(std::move(name)), dims_(std::move(dims)), count_(count), stored_(stored) {}
  const File* file_;
  hid_t id_;
  std::string name_;
  std::vector<hsize_t> dims_;
  std::size_t count_;
  Stored stored_;
};

class File {
 public:
  // Truncates. Written through the checked driver (h5_checked_driver.hpp): every write that failed is
  // an error of the call that made it, or of close().
  static File create(const std::string& path);
  // Collective over comm: one file written by all its ranks (MPI-IO). Dataset creation, attributes
  // and close are collective; Dataset::write is not.
  static File create_parallel(const std::string& path, HostComm comm);
  static File open_read(const std::string& path);
  File(File&& o) noexcept;
  File& operator=(File&&) = delete;
  File(const File&) = delete;
  ~File();
  // Flushes and closes; throws on failure (a full disk shows here), having truncated the file to
  // nothing. Collective for a parallel file: if the flush failed on any rank, every rank discards the
  // file and throws.
  void close();
  // A file this process created and that failed to write (disk full, I/O error) is discarded when
  // destroyed: its space is freed before HDF5 closes it. A parallel file must be marked failed on
  // every rank (the discard is collective).
  void mark_failed() const { failed_ = true; }
  hid_t id() const { return id_; }
  const std::string& path() const { return path_; }

  // Root (or dataset) attributes.
  void set_attr(const std::string& name, std::int64_t v, const std::string& object = "/");
  void set_attr(const std::string& name, const std::string& v, const std::string& object = "/");
  void set_attr(const std::string& name, const std::vector<std::int64_t>& v, const std::string& object = "/");
  std::int64_t attr_int(const std::string& name, const std::string& object = "/") const;
  void set_attr_double(const std::string& name, double v, const std::string& object = "/");
  double attr_double(const std::string& name, const std::string& object = "/") const;
  std::string attr_string(const std::string& name, const std::string& object = "/") const;
  std::vector<std::int64_t> attr_ints(const std::string& name, const std::string& object = "/") const;
  bool has_attr(const std::string& name, const std::string& object = "/") const;

  // Float datasets of any shape (parent groups created as needed). Non-finite values are refused.
  // read_floats reads either storage.
  Dataset create_dataset(const std::string& name, const std::vector<std::int64_t>& shape, Stored stored = Stored::f32);
  void write_floats(const std::string& name, const float* data, const std::vector<std::int64_t>& shape);
  std::vector<float> read_floats(const std::string& name, std::vector<std::int64_t>* shape = nullptr) const;
  // Reads only the spans of a float dataset (sorted by `at` and by `to`, disjoint) into out: one read
  // of exactly those elements (hyperslabs), converted from either storage.
  void read_spans(const std::string& name, const std::vector<Span>& spans, float* out) const;
  // A dataset's dimensions (nothing read).
  std::vector<std::int64_t> shape(const std::string& name) const;
  // How a float dataset is stored (bf16: a 2-byte float type).
  Stored stored(const std::string& name) const;
  // Names of the datasets under a group, recursively ("param/wte/0", ...).
  std::vector<std::string> list_datasets(const std::string& group = "/") const;

 private:
  friend class Dataset;
  File(hid_t id, std::string path, bool writable, HostComm comm = {}, std::unique_ptr<IoRecord> record = nullptr)
      : id_(id), path_(std::move(path)), writable_(writable), comm_(comm), record_(std::move(record)) {}
  // Throws UserError naming the file, what failed, HDF5's own cause (when it is a library failure) and
  // the line of h5_file.cpp; marks the file failed.
  [[noreturn]] void fail(const std::string& what, int line, bool library_error = true) const;
  // Fails (as fail does) when the checked driver recorded a failed system call: `what` was being done.
  void check_written(const std::string& what, int line) const;
  void discard();  // truncates the (failed, writable) file to nothing, then closes it
  // Numeric attributes: n values of memory type `memory` stored as `stored`; all of an attribute's values.
  void write_attr(const std::string& name, const std::string& object, hid_t stored, hid_t memory, const void* values, hsize_t n);
  template <typename T>
  std::vector<T> read_attr(const std::string& name, const std::string& object, hid_t memory) const;
  bool agreed(bool ok) const;  // ok on every rank of a parallel file (collective); ok itself otherwise
  hid_t id_;
  std::string path_;
  bool writable_;
  HostComm comm_;  // null for a serial file
  std::unique_ptr<IoRecord> record_;  // a file written through the checked driver: its first failure
  mutable bool failed_ = false;
};

}  // namespace dtrain::h5
