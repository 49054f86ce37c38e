// TFRecord's masked CRC32C against the published CRC-32C check value.
#include <catch2/catch.hpp>

#include "train/tensorboard.hpp"

TEST_CASE("TFRecord's masked CRC32C of the standard check string", "[tensorboard]") {
  // CRC-32C("123456789") = 0xE3069283 (RFC 3720's Castagnoli polynomial; the check value of the CRC
  // catalogues); masked: ((c >> 15) | (c << 17)) + 0xa282ead8 = 0xc78ab0e5.
  CHECK(dtrain::tfrecord_masked_crc("123456789", 9) == 0xc78ab0e5u);
}
