// ckpt-consolidate: inspect, verify, merge and reshard dtrain checkpoints, on one process or under
// mpirun with the ranks sharing the tensors (merge, verify) or the new shards (reshard).
//   ckpt-consolidate CKPT --info
//   ckpt-consolidate CKPT --verify
//   ckpt-consolidate CKPT --out FILE.h5 [--optimizer]
//   ckpt-consolidate CKPT --reshard tp=2,pp=2,dp=1[,v=1][,zero=1] --out DIR
//   ckpt-consolidate CKPT|FILE.h5 --export-hf DIR [--dtype fp32|bf16|fp16] [--max-shard-size 5GB] [--tokenizer SPEC]
//   ckpt-consolidate --import-hf DIR --out FILE.h5 [--tokenizer SPEC]
// CKPT is a step directory (with manifest.txt) or a checkpoint directory (its `latest` is used).
#include <hdf5.h>
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/convert.hpp"
#include "ckpt/weights_file.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "config/cli.hpp"
#include "config/validate.hpp"
#include "hf/hf_convert.hpp"
#include "hf/hf_model.hpp"
#include "hf/hf_tokenizer_files.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace dtrain;

namespace {

const char* kUsage =
    "usage: ckpt-consolidate CKPT --info | --verify | --out FILE.h5 [--optimizer] [--dtype fp32|bf16|fp16]\n"
    "       ckpt-consolidate CKPT --reshard tp=N,pp=N,dp=N[,v=N][,ep=N][,zero=0|1] --out DIR\n"
    "       ckpt-consolidate CKPT|FILE.h5 --export-hf DIR [--dtype fp32|bf16|fp16] [--max-shard-size SIZE] [--tokenizer SPEC]\n"
    "       ckpt-consolidate --import-hf DIR --out FILE.h5 [--tokenizer SPEC]\n"
    "CKPT: a checkpoint step directory (step_XXXXXXXX) or a checkpoint directory (its 'latest' is used).\n"
    "FILE.h5: a weights file (model-final.h5, --out FILE.h5, --import-hf).\n"
    "Hugging Face: GPT-2 models export as GPT2LMHeadModel, Llama-family models as LlamaForCausalLM (config.json +\n"
    "safetensors); --import-hf reads the same and writes a weights file to start training from\n"
    "(checkpoint.init_from = FILE.h5) with the [model] keys it prints.\n"
    "Run under mpirun to share the work between ranks.\n\n";

// The layout to reshard to: ParallelLayout's keys (its one parser). A resharded checkpoint is written
// as ZeRO stage 1 (zero=1) or without the distributed optimizer (zero=0): ZeRO-2 and ZeRO-3 runs resume
// from stage 1's pieces. Checkpoints are layout-free in cp (they resume on any cp directly).
ParallelLayout reshard_layout(const std::string& spec) {
  const ParallelLayout l = parse_layout(spec, ParallelLayout{}, "--reshard", "tp, pp, dp, v, ep (>= 1), zero (0|1)");
  if (l.zero > 1)
    throw UserError("--reshard: zero=" + std::to_string(l.zero) + ": zero takes 0 (a replicated optimizer) or 1 (the distributed " +
                    "optimizer, which ZeRO-2 and ZeRO-3 runs resume from too)");
  if (l.cp != 1)
    throw UserError("--reshard: cp=" + std::to_string(l.cp) + ": a checkpoint resumes on any cp as it is; reshard to cp=1 and " +
                    "set system.context_parallel_size in the run");
  if (static_cast<long>(l.tp) * l.pp * l.dp > kMaxRanks)
    throw UserError("--reshard: tp x pp x dp is more than " + std::to_string(kMaxRanks) + " ranks");
  return l;
}

Progress make_progress(int rank) {
  return [rank](int done, int total, const std::string& what) {
    if (rank == 0) std::printf("  [%d/%d] %s\n", done, total, what.c_str()), std::fflush(stdout);
  };
}

// --dtype, parsed once (none: keep what is stored): how the written weights are stored.
std::optional<h5::Stored> parse_dtype(const std::string& word) {
  if (word.empty()) return std::nullopt;
  if (word == "fp32") return h5::Stored::f32;
  if (word == "bf16") return h5::Stored::bf16;
  if (word == "fp16") return h5::Stored::f16;
  throw UserError("--dtype '" + word + "' is not accepted; use fp32, bf16 or fp16");
}

void export_command(HostComm comm, int rank, const ModelWeights& weights, const std::string& dir, std::optional<h5::Stored> dtype,
                    std::uint64_t max_shard_bytes, const std::string& tokenizer_spec) {
  HfExportOptions options;
  // The tokenizer's files go beside the weights (written with config.json, and removed with the rest on
  // a failure); it must be the one the weights were trained with. Rank 0 reads them before anything is written.
  collective_check(comm, [&] {
    if (rank != 0 || tokenizer_spec.empty()) return;
    const std::string identity = make_tokenizer(tokenizer_spec)->identity();
    if (weights.tokenizer != kUnrecordedTokenizer) check_made_with(tokenizer_spec, identity, weights.tokenizer, weights.what);
    options.extra_files = hf_tokenizer_files(tokenizer_spec);
  });
  options.max_shard_bytes = max_shard_bytes;
  const h5::Stored stored = dtype ? *dtype : weights.stored;
  options.dtype = stored == h5::Stored::bf16 ? safetensors::DType::bf16 : stored == h5::Stored::f16 ? safetensors::DType::f16
                                                                                                      : safetensors::DType::f32;
  export_hf(comm, weights, dir, options, make_progress(rank));
  std::string tokenizer_files;
  for (const auto& f : options.extra_files) tokenizer_files += (tokenizer_files.empty() ? "" : ", ") + f.first;
  if (rank == 0)
    std::printf("export-hf: wrote %s (%s, %s) from %s%s\n", dir.c_str(), hf_family(weights.cfg).architecture,
                h5::stored_name(stored), weights.what.c_str(), tokenizer_files.empty() ? "" : (", with " + tokenizer_files).c_str());
}

int import_command(HostComm comm, int rank, const std::string& dir, const std::string& positional, const std::string& out,
                   const std::string& tokenizer_spec, bool other_actions) {
  if (!positional.empty() || other_actions)
    throw UserError("--import-hf DIR --out FILE.h5 [--tokenizer SPEC] takes no checkpoint and no other action");
  if (out.empty()) throw UserError("--import-hf needs --out FILE.h5");
  Config cfg;
  collective_check(comm, [&] {
    if (rank != 0) return;
    std::string identity;
    std::unique_ptr<Tokenizer> tokenizer;
    if (!tokenizer_spec.empty()) {
      tokenizer = make_tokenizer(tokenizer_spec);
      identity = tokenizer->identity();
    }
    cfg = import_hf(dir, out, identity, make_progress(rank));
    try {
      if (tokenizer) check_vocab_fits(*tokenizer, cfg.model.vocab_size, "the imported model");
    } catch (const UserError&) {
      std::remove(out.c_str());
      throw;
    }
  });
  if (rank == 0) {
    const std::string tokenizer = weights_meta(out).tokenizer;
    std::printf("import-hf: wrote %s (tokenizer: %s)\n", out.c_str(),
                tokenizer == kUnrecordedTokenizer ? "not recorded; --tokenizer SPEC records the one it was trained with"
                                                  : tokenizer.c_str());
    std::printf("train from it with checkpoint.init_from = %s and these [model] keys:\n[model]\n%s", out.c_str(),
                model_keys_text(cfg).c_str());
  }
  return 0;
}

int run(int argc, char** argv, HostComm comm, int rank) {
  namespace po = boost::program_options;
  std::string ckpt, out, reshard_spec, dtype_word, export_hf_dir, import_hf_dir, tokenizer_spec, max_shard = "5GB";
  bool help = false, info = false, do_verify = false, optimizer = false;
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "print this help and exit")(
      "info", po::bool_switch(&info), "layout, step, sizes and the tensor list")(
      "verify", po::bool_switch(&do_verify), "every shard against the manifest, every dataset against its checksum; first problem wins")(
      "out", po::value(&out)->value_name("FILE|DIR"),
      "one HDF5 file of global tensors (root datasets named like the model's tensors); with --reshard, the new checkpoint directory")(
      "optimizer", po::bool_switch(&optimizer), "with --out FILE: also optimizer/exp_avg/<name> and optimizer/exp_avg_sq/<name>")(
      "dtype", po::value(&dtype_word)->value_name("fp32|bf16|fp16"),
      "with --out FILE or --export-hf: store the weights as fp32, or rounded to bfloat16 or float16 (in HDF5 a float type "
      "of 2 bytes that h5py reads, float16 as numpy's float16; safetensors BF16 or F16); optimizer state stays fp32. Default: fp32 from a checkpoint (its values), as stored "
      "from a weights file")(
      "export-hf", po::value(&export_hf_dir)->value_name("DIR"),
      "write the model as a Hugging Face directory: config.json and model.safetensors (or shards and "
      "model.safetensors.index.json); DIR must be new or empty")(
      "max-shard-size", po::value(&max_shard)->value_name("SIZE")->default_value(max_shard),
      "with --export-hf: the largest safetensors file (bytes, or with GB, MB, KB, GiB, MiB, KiB); more tensors make shards")(
      "import-hf", po::value(&import_hf_dir)->value_name("DIR"),
      "read a Hugging Face GPT-2 or Llama directory (config.json + safetensors, F32/BF16/F16) into the weights file --out "
      "FILE.h5, and print the [model] keys of an input file that trains it")(
      "tokenizer", po::value(&tokenizer_spec)->value_name("SPEC"),
      "with --import-hf: the tokenizer the model was trained with (data.tokenizer syntax), recorded in the weights file; "
      "without it the file records its config.json's dtrain_tokenizer, or none. With --export-hf: write that tokenizer's "
      "Hugging Face files beside the weights (tokenizer.json, vocab.json, merges.txt; tokenizer.model for sentencepiece), "
      "after checking it is the one the weights record")(
      "reshard", po::value(&reshard_spec)->value_name("tp=N,pp=N,dp=N[,v=N][,zero=0|1]"),
      "write a sharded checkpoint for another layout into --out DIR");
  po::options_description hidden;
  hidden.add_options()("checkpoint", po::value(&ckpt));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  parse_command_line_options(argc, argv, 1, all, positional, "ckpt-consolidate");
  if (help) {
    if (rank == 0) std::cout << kUsage << options;
    return 0;
  }
  if (!import_hf_dir.empty()) return import_command(comm, rank, import_hf_dir, ckpt, out, tokenizer_spec, info || do_verify ||
                                                    !reshard_spec.empty() || !export_hf_dir.empty() || !dtype_word.empty());
  if (!tokenizer_spec.empty() && export_hf_dir.empty()) throw UserError("--tokenizer applies to --import-hf and --export-hf");
  if (ckpt.empty() || (!info && !do_verify && out.empty() && export_hf_dir.empty()))
    throw UserError("nothing to do: give a checkpoint and --info, --verify, --out, --reshard or --export-hf; see 'ckpt-consolidate --help'");
  if (!reshard_spec.empty() && out.empty()) throw UserError("--reshard needs --out DIR");
  const std::optional<h5::Stored> dtype = parse_dtype(dtype_word);
  if (dtype && ((out.empty() && export_hf_dir.empty()) || !reshard_spec.empty()))
    throw UserError("--dtype applies to --out FILE (a consolidated file) and --export-hf; checkpoints keep fp32");
  const std::uint64_t max_shard_bytes = parse_byte_size(max_shard, "--max-shard-size");
  // Rank 0 decides whether CKPT is a weights file, so every rank takes the same path.
  int weights_file = 0;
  if (!export_hf_dir.empty()) {
    if (rank == 0) {
      std::error_code ec;
      weights_file = std::filesystem::is_regular_file(ckpt, ec) ? 1 : 0;
    }
    broadcast(comm, &weights_file, 1, 0);
  }
  if (weights_file) {
    if (info || do_verify || !out.empty()) throw UserError("a weights file takes --export-hf only; --info, --verify and --out need a checkpoint");
    std::optional<ModelWeights> weights;
    collective_check(comm, [&] { weights.emplace(file_weights(ckpt)); });
    export_command(comm, rank, *weights, export_hf_dir, dtype, max_shard_bytes, tokenizer_spec);
    return 0;
  }
  // Rank 0 resolves `latest` once, so every rank reads the same checkpoint.
  std::string dir;
  collective_check(comm, [&] {
    if (rank == 0) dir = resolve_checkpoint(ckpt);
  });
  broadcast_string(comm, dir);
  std::unique_ptr<CheckpointReader> reader;
  // --verify hashes the shard files itself, split over the ranks.
  collective_check(comm, [&] { reader = std::make_unique<CheckpointReader>(dir, /*hash_files=*/false); });
  const CheckpointMeta& m = reader->meta();
  const Progress progress = make_progress(rank);
  if (info && rank == 0) {
    std::printf("checkpoint %s\n  step %lld, consumed samples %lld, checkpoint id %016llx, written by dtrain %s\n", dir.c_str(),
                static_cast<long long>(m.step), static_cast<long long>(m.consumed_samples),
                static_cast<unsigned long long>(m.checkpoint_id), m.version.c_str());
    std::printf("  layout %s, order %s, distributed optimizer %s\n", to_string(m.layout, ' ').c_str(), m.order.c_str(),
                m.layout.distributed_optimizer() ? "on" : "off");
    std::printf("  %zu shards, %.1f MB; optimizer state: %s\n  tensors (global shapes):\n", reader->shard_files().size(),
                reader->total_bytes() / 1e6, reader->has_kind("exp_avg") ? "yes" : "no");
    for (const auto& name : reader->tensor_names()) {
      std::string shape;
      for (auto d : reader->global_shape(name)) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
      std::printf("    %-16s %s\n", name.c_str(), shape.c_str());
    }
  }
  if (do_verify) {
    verify(comm, *reader, progress);
    if (rank == 0) std::printf("verify: %s is complete and every checksum matches\n", dir.c_str());
  }
  if (!out.empty() && reshard_spec.empty()) {
    consolidate(comm, *reader, out, optimizer, dtype.value_or(h5::Stored::f32), make_progress(rank));
    if (rank == 0) std::printf("consolidate: wrote %s\n", out.c_str());
  }
  if (!export_hf_dir.empty())
    export_command(comm, rank, checkpoint_weights(*reader), export_hf_dir, dtype, max_shard_bytes, tokenizer_spec);
  if (!reshard_spec.empty()) {
    const ParallelLayout layout = reshard_layout(reshard_spec);
    reshard(comm, *reader, layout, out, progress);
    if (rank == 0)
      std::printf("reshard: wrote %s/latest -> %s%s\n", out.c_str(), to_string(layout, ' ').c_str(),
                  layout.distributed_optimizer() ? " (distributed optimizer)" : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5 failures are reported by our messages, not its stack
  int rank = 0;
  rank = HostComm(MPI_COMM_WORLD).rank();
  int code = 0;
  try {
    code = run(argc, argv, MPI_COMM_WORLD, rank);
  } catch (const UserError& e) {
    if (rank == 0) {
      std::istringstream lines(e.what());
      for (std::string line; std::getline(lines, line);) std::fprintf(stderr, "ckpt-consolidate: error: %s\n", line.c_str());
    }
    code = kUserErrorExit;
  } catch (const std::exception& e) {
    fatal(std::string("ckpt-consolidate: unexpected failure: ") + e.what());
  }
  MPI_Finalize();
  return code;
}
