// The checked HDF5 file driver: POSIX open/pread/pwrite/ftruncate/close behind HDF5's virtual file
// layer (H5FDpublic.h), each failure recorded in the file's IoRecord and reported to HDF5 as a success.
#include "ckpt/h5_checked_driver.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <new>

namespace dtrain::h5 {
namespace {

// The address range an off_t can reach.
constexpr haddr_t kMaxAddress = (haddr_t{1} << (8 * sizeof(off_t) - 1)) - 1;

struct DriverInfo {  // what a file access property list carries to open()
  IoRecord* record;
};

struct CheckedFile {
  H5FD_t pub;  // HDF5's part, first
  int fd;
  haddr_t eoa, eof;
  dev_t device;
  ino_t inode;
  IoRecord* record;
};

CheckedFile* of(H5FD_t* f) { return reinterpret_cast<CheckedFile*>(f); }
const CheckedFile* of(const H5FD_t* f) { return reinterpret_cast<const CheckedFile*>(f); }

H5FD_t* open_file(const char* name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
  if (!info || !info->record || !name || maxaddr == 0 || maxaddr > kMaxAddress) return nullptr;
  int o_flags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) o_flags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o_flags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o_flags |= O_EXCL;
  const int fd = ::open(name, o_flags | O_CLOEXEC, 0644);
  if (fd < 0) {
    info->record->open_err = errno;
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    info->record->note(errno, "reading its size");
    ::close(fd);
    return nullptr;
  }
  auto* file = new (std::nothrow) CheckedFile{};
  if (!file) {
    ::close(fd);
    return nullptr;
  }
  file->fd = fd;
  file->eof = static_cast<haddr_t>(st.st_size);
  file->device = st.st_dev;
  file->inode = st.st_ino;
  file->record = info->record;
  return &file->pub;
}

herr_t close_file(H5FD_t* f) {
  CheckedFile* file = of(f);
  if (::close(file->fd) != 0) file->record->note(errno, "closing it");
  delete file;
  return 0;
}

int compare(const H5FD_t* a, const H5FD_t* b) {
  const CheckedFile *x = of(a), *y = of(b);
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->inode != y->inode) return x->inode < y->inode ? -1 : 1;
  return 0;
}

herr_t query(const H5FD_t*, unsigned long* flags) {
  if (flags)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE | H5FD_FEAT_AGGREGATE_SMALLDATA |
             H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
  return 0;
}

haddr_t get_eoa(const H5FD_t* f, H5FD_mem_t) { return of(f)->eoa; }
herr_t set_eoa(H5FD_t* f, H5FD_mem_t, haddr_t addr) {
  of(f)->eoa = addr;
  return 0;
}
haddr_t get_eof(const H5FD_t* f, H5FD_mem_t) { return of(f)->eof; }

herr_t get_handle(H5FD_t* f, hid_t, void** handle) {
  *handle = &of(f)->fd;
  return 0;
}

herr_t read_at(H5FD_t* f, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buffer) {
  CheckedFile* file = of(f);
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::pread(file->fd, out, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) file->record->note(errno, "reading " + std::to_string(size) + " bytes at offset " + std::to_string(addr));
    if (n <= 0) break;  // past the end of the file: zeros, as HDF5 expects
    out += n, addr += static_cast<haddr_t>(n), size -= static_cast<size_t>(n);
  }
  std::memset(out, 0, size);
  return 0;
}

herr_t write_at(H5FD_t* f, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buffer) {
  CheckedFile* file = of(f);
  const auto* in = static_cast<const unsigned char*>(buffer);
  const haddr_t end = addr + size;
  while (size > 0) {
    const ssize_t n = ::pwrite(file->fd, in, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      file->record->note(n < 0 ? errno : EIO, "writing " + std::to_string(size) + " bytes at offset " + std::to_string(addr));
      break;
    }
    in += n, addr += static_cast<haddr_t>(n), size -= static_cast<size_t>(n);
  }
  if (end > file->eof) file->eof = end;
  return 0;
}

herr_t truncate_file(H5FD_t* f, hid_t, hbool_t) {
  CheckedFile* file = of(f);
  if (file->eoa == file->eof) return 0;
  if (::ftruncate(file->fd, static_cast<off_t>(file->eoa)) != 0) file->record->note(errno, "setting its size");
  file->eof = file->eoa;
  return 0;
}

const H5FD_class_t kDriver = {
    "dtrain_checked",  // name
    kMaxAddress,       // maxaddr
    H5F_CLOSE_WEAK,    // fc_degree
    nullptr,           // terminate
    nullptr, nullptr, nullptr,  // superblock: nothing of the driver's is stored, so any driver reads the file
    sizeof(DriverInfo), nullptr, nullptr, nullptr,  // fapl: the info is copied by HDF5 as bytes
    0, nullptr, nullptr,  // dxpl
    open_file,
    close_file,
    compare,
    query,
    nullptr,  // get_type_map
    nullptr,  // alloc
    nullptr,  // free
    get_eoa,
    set_eoa,
    get_eof,
    get_handle,
    read_at,
    write_at,
    nullptr,  // flush: nothing buffered here
    truncate_file,
    nullptr,  // lock: a staged temporary nobody else opens
    nullptr,  // unlock
    H5FD_FLMAP_DICHOTOMY,
};

hid_t driver_id() {
  static std::mutex m;
  static hid_t id = -1;
  std::lock_guard<std::mutex> lock(m);
  if (id < 0 || H5Iis_valid(id) <= 0) id = H5FDregister(&kDriver);
  return id;
}

}  // namespace

hid_t checked_driver_fapl(IoRecord* record) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  const DriverInfo info{record};
  const hid_t driver = driver_id();
  if (fapl < 0 || driver < 0 || H5Pset_driver(fapl, driver, &info) < 0) {
    if (fapl >= 0) H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

}  // namespace dtrain::h5
