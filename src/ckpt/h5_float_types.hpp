// How dtrain stores float datasets in HDF5: IEEE fp32, bfloat16 or IEEE binary16. HDF5 1.10 has no
// two-byte float built in; the two are HDF5 float types of two bytes that HDF5 converts to and from
// float exactly (h5py reads bfloat16 with ds.astype('f4') and binary16 as numpy's float16, laid out as
// h5py writes it).
#pragma once
#include <hdf5.h>

namespace dtrain::h5 {

enum class Stored { f32, bf16, f16 };
const char* stored_name(Stored s);  // "float32", "bfloat16", "float16"

hid_t file_type(Stored s);     // the HDF5 type a dataset of this storage is created with
Stored stored_of(hid_t type);  // a dataset's storage from its HDF5 type (a float of 2 bytes: by its exponent bits)

}  // namespace dtrain::h5
