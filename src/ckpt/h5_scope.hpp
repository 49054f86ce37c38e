// Scopes around HDF5 calls, shared by the h5::File sources (not a public header): Quiet turns HDF5's
// automatic error printing off (errors are reported by our messages), Handle closes any hid_t with its
// matching close function.
#pragma once
#include <hdf5.h>

namespace dtrain::h5 {

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

}  // namespace dtrain::h5
