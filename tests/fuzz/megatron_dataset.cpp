// Fuzz target: a Megatron indexed dataset (PREFIX.idx + PREFIX.bin) and its loss mask dataset, opened
// and read as training opens them (MegatronDataset::open, attach_loss_mask, check_tokens, read).
// Input: PREFIX.idx, "#dtrain-fuzz-next-file", PREFIX.bin, then optionally the same separator and the
// mask's .idx and .bin.
#include "data/megatron_dataset.hpp"
#include "fuzz/fuzz_target.hpp"

DTRAIN_FUZZ_TARGET(megatron_dataset) {
  const auto parts = dtrain::fuzz::split(data, size, "#dtrain-fuzz-next-file", 4);
  const std::string prefix = dtrain::fuzz::scratch_dir() + "/corpus";
  dtrain::fuzz::write_scratch("corpus.idx", parts[0]);
  dtrain::fuzz::write_scratch("corpus.bin", parts[1]);
  auto ds = dtrain::MegatronDataset::open(prefix);
  if (!parts[2].empty() || !parts[3].empty()) {
    dtrain::fuzz::write_scratch("corpus.lossmask.idx", parts[2]);
    dtrain::fuzz::write_scratch("corpus.lossmask.bin", parts[3]);
    ds.attach_loss_mask(prefix + ".lossmask");
  }
  const std::uint64_t docs = ds.num_documents();
  ds.keep_documents(docs / 2, docs);
  ds.check_tokens(50304, 0, ds.size());
  dtrain::fuzz::read_every_token(ds);
}
