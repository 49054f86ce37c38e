// ckpt-consolidate: inspect, verify, merge and reshard dtrain checkpoints, on one process or under
// mpirun with the ranks sharing the tensors (merge, verify) or the new shards (reshard).
//   ckpt-consolidate CKPT --info
//   ckpt-consolidate CKPT --verify
//   ckpt-consolidate CKPT --out FILE.h5 [--optimizer]
//   ckpt-consolidate CKPT --reshard tp=2,pp=2,dp=1[,v=1][,zero=1] --out DIR
// CKPT is a step directory (with manifest.txt) or a checkpoint directory (its `latest` is used).
#include <hdf5.h>
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/convert.hpp"
#include "common/collective_check.hpp"
#include "common/error.hpp"
#include "config/cli.hpp"
#include "config/validate.hpp"

using namespace dtrain;

namespace {

const char* kUsage =
    "usage: ckpt-consolidate CKPT --info | --verify | --out FILE.h5 [--optimizer] [--dtype fp32|bf16]\n"
    "       ckpt-consolidate CKPT --reshard tp=N,pp=N,dp=N[,v=N][,zero=0|1] --out DIR\n"
    "CKPT: a checkpoint step directory (step_XXXXXXXX) or a checkpoint directory (its 'latest' is used).\n"
    "Run under mpirun to share the work between ranks.\n\n";

ReshardLayout parse_layout(const std::string& spec) {
  ReshardLayout l;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), text = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE || value < 0 || value > kMaxRanks)
      throw UserError("--reshard: '" + item + "' is not key=N with 0 <= N <= " + std::to_string(kMaxRanks));
    if (key == "tp") l.tp = static_cast<int>(value);
    else if (key == "pp") l.pp = static_cast<int>(value);
    else if (key == "dp") l.dp = static_cast<int>(value);
    else if (key == "v") l.v = static_cast<int>(value);
    else if (key == "zero") l.distributed_optimizer = value != 0;
    else throw UserError("--reshard: unknown key '" + key + "' (tp, pp, dp, v, zero)");
  }
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.v < 1) throw UserError("--reshard: sizes must be at least 1");
  if (static_cast<long>(l.tp) * l.pp * l.dp > kMaxRanks)
    throw UserError("--reshard: tp x pp x dp is more than " + std::to_string(kMaxRanks) + " ranks");
  return l;
}

int run(int argc, char** argv, MPI_Comm comm, int rank) {
  namespace po = boost::program_options;
  std::string ckpt, out, reshard_spec, dtype = "fp32";
  bool help = false, info = false, do_verify = false, optimizer = false;
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "print this help and exit")(
      "info", po::bool_switch(&info), "layout, step, sizes and the tensor list")(
      "verify", po::bool_switch(&do_verify), "every shard against the manifest, every dataset against its checksum; first problem wins")(
      "out", po::value(&out)->value_name("FILE|DIR"),
      "one HDF5 file of global tensors (root datasets named like the model's tensors); with --reshard, the new checkpoint directory")(
      "optimizer", po::bool_switch(&optimizer), "with --out FILE: also optimizer/exp_avg/<name> and optimizer/exp_avg_sq/<name>")(
      "dtype", po::value(&dtype)->value_name("fp32|bf16")->default_value(dtype),
      "with --out FILE: store the weights as fp32 (the checkpoint's values) or rounded to bfloat16 (an HDF5 float type "
      "of 2 bytes; h5py: ds.astype('f4')); optimizer state stays fp32")(
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
  if (ckpt.empty() || (!info && !do_verify && out.empty()))
    throw UserError("nothing to do: give a checkpoint and --info, --verify, --out or --reshard; see 'ckpt-consolidate --help'");
  if (!reshard_spec.empty() && out.empty()) throw UserError("--reshard needs --out DIR");
  if (dtype != "fp32" && dtype != "bf16") throw UserError("--dtype '" + dtype + "' is not accepted; use fp32 or bf16");
  if (dtype != "fp32" && (out.empty() || !reshard_spec.empty()))
    throw UserError("--dtype applies to --out FILE (a consolidated file); checkpoints keep fp32");
  // Rank 0 resolves `latest` once, so every rank reads the same checkpoint.
  std::string dir;
  collective_check(comm, [&] {
    if (rank == 0) dir = resolve_checkpoint(ckpt);
  });
  broadcast_string(comm, dir);
  std::unique_ptr<CheckpointReader> reader;
  collective_check(comm, [&] { reader = std::make_unique<CheckpointReader>(dir, /*verify_files=*/rank == 0 && do_verify); });
  const CheckpointMeta& m = reader->meta();
  const Progress progress = [&](int done, int total, const std::string& what) {
    if (rank == 0) std::printf("  [%d/%d] %s\n", done, total, what.c_str()), std::fflush(stdout);
  };
  if (info && rank == 0) {
    std::printf("checkpoint %s\n  step %lld, consumed samples %lld, checkpoint id %016llx, written by dtrain %s\n", dir.c_str(),
                static_cast<long long>(m.step), static_cast<long long>(m.consumed_samples),
                static_cast<unsigned long long>(m.checkpoint_id), m.version.c_str());
    std::printf("  layout tp=%lld cp=%lld pp=%lld dp=%lld v=%lld order %s, distributed optimizer %s\n",
                static_cast<long long>(m.tp), static_cast<long long>(m.cp), static_cast<long long>(m.pp),
                static_cast<long long>(m.dp), static_cast<long long>(m.v), m.order.c_str(), m.distributed_optimizer ? "on" : "off");
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
    consolidate(comm, *reader, out, optimizer, dtype == "bf16" ? h5::Stored::bf16 : h5::Stored::f32, progress);
    if (rank == 0) std::printf("consolidate: wrote %s\n", out.c_str());
  }
  if (!reshard_spec.empty()) {
    const ReshardLayout layout = parse_layout(reshard_spec);
    reshard(comm, *reader, layout, out, progress);
    if (rank == 0)
      std::printf("reshard: wrote %s/latest -> tp=%d pp=%d dp=%d v=%d%s\n", out.c_str(), layout.tp, layout.pp, layout.dp, layout.v,
                  layout.distributed_optimizer ? " (distributed optimizer)" : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5 failures are reported by our messages, not its stack
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
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
