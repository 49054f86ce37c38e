// The HDF5 file driver of the files dtrain writes (h5::File::create): POSIX I/O as HDF5's own sec2
// driver does it, with every failed system call recorded in the file's IoRecord (the first failure
// kept) and reported to HDF5 as a success. HDF5 1.10 loses some failures (a dataset's sieve buffer
// written when the dataset closes: a full disk left the last tensors of a file as zeros), and a file
// whose close failed stays half-open and crashes the process when HDF5 shuts down. With this driver
// HDF5 never fails, and h5::File reads the record after every call that writes and after the close,
// so a write that did not reach the disk is always an error and the file is always closed.
// The files are plain HDF5 files: any reader (h5py, the default driver) opens them.
#pragma once
#include <hdf5.h>

#include <cerrno>
#include <string>

namespace dtrain::h5 {

// What failed first in one file's I/O; errno 0 while nothing has. HDF5 tries to open a file before it
// creates it, so a failed open is only remembered (open_err, the last one), for the message of a create
// that fails.
struct IoRecord {
  int err = 0, open_err = 0;
  std::string step;  // "writing 4096 bytes at offset 53248", "truncating", "closing"
  bool failed() const { return err != 0; }
  void note(int e, std::string what) {
    if (err != 0) return;
    err = e != 0 ? e : EIO;
    step = std::move(what);
  }
};

// A file access property list that uses the checked driver for a file whose failures go to `record`
// (which must outlive the file's close). The caller closes the list.
hid_t checked_driver_fapl(IoRecord* record);

}  // namespace dtrain::h5
