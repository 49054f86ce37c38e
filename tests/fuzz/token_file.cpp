// Fuzz target: a dtrain token file and its loss mask file, opened and read as training opens them
// (TokenFile::open, attach_loss_mask, read). Input: the token file, then optionally
// "#dtrain-fuzz-next-file" and the mask file.
#include "data/token_file.hpp"
#include "fuzz/fuzz_target.hpp"

DTRAIN_FUZZ_TARGET(token_file) {
  const auto parts = dtrain::fuzz::split(data, size, "#dtrain-fuzz-next-file", 2);
  const std::string path = dtrain::fuzz::write_scratch("data.train.bin", parts[0]);
  auto tf = dtrain::TokenFile::open(path, 50304);
  if (!parts[1].empty()) tf.attach_loss_mask(dtrain::fuzz::write_scratch("data.train.lossmask.bin", parts[1]), path);
  dtrain::fuzz::read_every_token(tf);
}
