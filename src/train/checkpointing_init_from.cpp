// Checkpointing's start from weights (checkpoint.init_from): a weights file, or a Hugging Face directory
// converted once by rank 0, read by every rank for its own slices (train/checkpointing.hpp).
#include <filesystem>

#include "ckpt/checkpoint.hpp"
#include "ckpt/compatibility.hpp"
#include "ckpt/weights_file.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "hf/hf_convert.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/checkpointing.hpp"

namespace dtrain {

void Checkpointing::init_from_weights(Trainer& trainer) {
  // hf:DIR: rank 0 converts the Hugging Face directory once into a weights file in checkpoint.dir
  // (every rank's file system), which every rank then reads its slices of, as of any weights file; it is
  // removed once loaded.
  const std::string hf_prefix = "hf:";
  if (cfg_.checkpoint.init_from.rfind(hf_prefix, 0) == 0) {
    const std::string dir = cfg_.checkpoint.init_from.substr(hf_prefix.size());
    std::string converted;
    collective_check(world_, [&] {
      if (cfg_.checkpoint.dir.empty())
        throw UserError("checkpoint.init_from=hf:" + dir + " converts the Hugging Face directory into a weights file in checkpoint.dir, "
                        "which every rank reads; set checkpoint.dir");
      if (rank_ != 0) return;
      std::error_code ec;
      std::filesystem::create_directories(cfg_.checkpoint.dir, ec);
      if (ec)
        throw UserError("checkpoint.init_from=hf:" + dir + " converts the Hugging Face directory into a weights file in checkpoint.dir, " +
                        "but checkpoint.dir '" + cfg_.checkpoint.dir + "' cannot be created (" + ec.message() +
                        "); give a writable directory");
      converted = cfg_.checkpoint.dir + "/.init_from-hf.h5";
      try {
        import_hf(dir, converted, "", {});
      } catch (const UserError& e) {
        throw UserError("checkpoint.init_from=hf:" + dir + ": " + e.what());
      }
    });
    broadcast_string(world_, converted);
    struct Remove {  // the converted file goes whatever happens next
      const std::string& path;
      bool mine;
      ~Remove() {
        std::error_code ec;
        if (mine) std::filesystem::remove(path, ec);
      }
    } remove{converted, rank_ == 0};
    load_init_weights(trainer, converted, "Hugging Face directory '" + dir + "'");
    return;
  }
  load_init_weights(trainer, cfg_.checkpoint.init_from, "");
}

void Checkpointing::load_init_weights(Trainer& trainer, const std::string& file, const std::string& source) {
  const std::string what = source.empty() ? "checkpoint.init_from: weights file '" + file + "'" : "checkpoint.init_from: " + source;
  WeightsMeta meta;
  collective_check(world_, [&] {
    try {
      meta = weights_meta(file);
    } catch (const UserError& e) {
      throw UserError("checkpoint.init_from: " + std::string(e.what()));
    }
    if (meta.config_text.empty())
      throw UserError(what + " holds no model configuration (written by an older dtrain); start from a checkpoint with "
                      "checkpoint.load, or re-make the file with ckpt-consolidate --out");
    check_same_model(load_config(meta.config_text, file + " (stored configuration)", {}), cfg_, what, "the weights file");
    if (meta.tokenizer != kUnrecordedTokenizer) check_made_with(cfg_.data.tokenizer, tokenizer_, meta.tokenizer, what);
  });
  const std::uint64_t read_before = h5::dataset_bytes_read();
  std::size_t state_bytes = 0;
  collective_check(world_, [&] {
    RankState st = trainer.state_to_load();
    st.moments[0] = st.moments[1] = nullptr;  // a fresh optimizer
    load_rank_weights(file, st);
    state_bytes = rank_state_bytes(st);
    trainer.load_state(st);
  });
  const ReadReport read = read_report(world_, h5::dataset_bytes_read() - read_before, state_bytes);
  if (meta.tokenizer == kUnrecordedTokenizer)
    log_.message("warning: " + what + " does not record its tokenizer (imported without --tokenizer); data.tokenizer=" +
                 cfg_.data.tokenizer + " must be the one the model was trained with");
  log_.message("checkpoint: initialised the model from " + (source.empty() ? file : source) + " (step 0, fresh optimizer); " + read.text());
}

}  // namespace dtrain
