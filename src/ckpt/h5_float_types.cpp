// The HDF5 float types of h5_float_types.hpp.
#include "ckpt/h5_float_types.hpp"

#include <cstddef>

namespace dtrain::h5 {
namespace {

// A two-byte IEEE-style float type: sign bit 15, `exponent_bits` with `bias` above the mantissa, the
// mantissa's 15 - exponent_bits bits at 0.
hid_t two_byte_float(std::size_t exponent_bits, std::size_t bias) {
  const std::size_t mantissa_bits = 15 - exponent_bits;
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, mantissa_bits, exponent_bits, 0, mantissa_bits);
  H5Tset_offset(t, 0);
  H5Tset_precision(t, 16);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, bias);
  return t;
}

}  // namespace

const char* stored_name(Stored s) {
  switch (s) {
    case Stored::bf16:
      return "bfloat16";
    case Stored::f16:
      return "float16";
    case Stored::f32:
      break;
  }
  return "float32";
}

hid_t file_type(Stored s) {
  static const hid_t bf16 = two_byte_float(8, 127), f16 = two_byte_float(5, 15);
  return s == Stored::bf16 ? bf16 : s == Stored::f16 ? f16 : H5T_IEEE_F32LE;
}

Stored stored_of(hid_t type) {
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2) return Stored::f32;
  std::size_t sign = 0, exponent_at = 0, exponent_bits = 0, mantissa_at = 0, mantissa_bits = 0;
  H5Tget_fields(type, &sign, &exponent_at, &exponent_bits, &mantissa_at, &mantissa_bits);
  return exponent_bits == 5 ? Stored::f16 : Stored::bf16;
}

}  // namespace dtrain::h5
