// parse_dtrain_command_line: Boost.ProgramOptions descriptions of dtrain and dtrain generate.
#include "app/command_line.hpp"

#include <sstream>

#include "common/error.hpp"
#include "config/cli.hpp"

namespace po = boost::program_options;

namespace dtrain {
namespace {

po::options_description common_options(CommandLine& cl) {
  po::options_description d("Options");
  d.add_options()("help,h", po::bool_switch(&cl.help), "print this help and exit")(
      "version", po::bool_switch(&cl.version), "print the version and whether the CUDA backend is built");
  return d;
}

po::options_description train_options(CommandLine& cl) {
  po::options_description d = common_options(cl);
  d.add_options()("dry-run", po::bool_switch(&cl.dry_run),
                  "print the resolved configuration, the rank layout, the schedule's bubble and the memory per rank, "
                  "then exit without training");
  return d;
}

// --seed: digits only, so that "-1" is not read as 2^64-1 (Boost reads an unsigned value by strtoull).
std::uint64_t parse_seed(const std::string& text) {
  std::uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 20;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9' && v <= (UINT64_MAX - static_cast<std::uint64_t>(c - '0')) / 10;
    if (ok) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (!ok) throw UserError("dtrain generate: --seed '" + text + "' is not a whole number from 0 to 18446744073709551615");
  return v;
}

po::options_description generate_options(CommandLine& cl) {
  po::options_description d = common_options(cl);
  GenerateOptions& g = cl.generate;
  d.add_options()("weights", po::value(&g.weights)->value_name("FILE"),
                  "weights file (model-final.h5 or ckpt-consolidate --out); default checkpoint.dir/model-final.h5")(
      "prompt", po::value<std::string>()->value_name("TEXT")->notifier([&g](const std::string& t) { g.prompt = t, g.prompt_given = true; }),
      "text to continue (default: a newline)")(
      "prompts", po::value(&g.prompts_file)->value_name("FILE"),
      "a file of prompts, one a line (\\n in a line is a newline): a batch generated together, each continuation printed "
      "after a line '=== prompt K'")(
      "tokens", po::value(&g.tokens)->value_name("N")->default_value(g.tokens), "tokens to generate")(
      "temperature", po::value(&g.temperature)->value_name("T")->default_value(g.temperature, "0.8"), "sampling temperature; 0 = greedy")(
      "top-k", po::value(&g.top_k)->value_name("K")->default_value(0), "sample among the K most probable tokens only (0: all)")(
      "top-p", po::value(&g.top_p)->value_name("P")->default_value(1.0, "1"),
      "nucleus sampling: among the fewest most probable tokens whose probabilities sum to P (1: all)")(
      "no-cache", po::bool_switch(&g.no_cache),
      "no key/value cache: every token a forward pass over the whole context (slower; the cache's reference)")(
      "seed", po::value<std::string>()->value_name("N")->notifier([&g](const std::string& s) { g.seed = parse_seed(s); }),
      "sampling seed, 0 to 2^64-1 (default: training.seed)");
  return d;
}

po::options_description plan_options(CommandLine& cl) {
  po::options_description d = common_options(cl);
  PlanOptions& p = cl.plan;
  d.add_options()("cluster", po::value(&p.cluster)->value_name("FILE"), "cluster description ([cluster] keys; see inputs/clusters/)")(
      "nodes",
      po::value<int>()->value_name("N")->notifier([&p](int n) {
        if (n < 1 || n > (1 << 20)) throw UserError("dtrain plan: --nodes must be between 1 and 2^20, not " + std::to_string(n));
        p.nodes = n;
      }),
      "plan for N nodes instead of the description's")(
      "top", po::value(&p.top)->value_name("K")->default_value(p.top), "print the K fastest layouts that fit")(
      "scaling", po::value(&p.scaling)->value_name("D1,D2,..."),
      "also print the predicted strong scaling (the input's global batch) and weak scaling (its batch per device) at "
      "these device counts")("plot", po::bool_switch(&p.plot), "with --scaling: draw the curves with gnuplot in the terminal")(
      "layout", po::value(&p.layout)->value_name("K=V,..."),
      "cost this one layout instead of searching: tp, pp, dp, cp, ep, v, mb, recompute (none|selective|full), zero "
      "(0 = no distributed optimizer, 1-3), sp (0|1), first, last (blocks of the first / last stage), zb (0|1: the zero-bubble "
      "schedule, zb-h1, or zbv with v=2); keys left out keep INPUT.ini's values (dp: 1). The world is "
      "tp x cp x pp x dp devices of the description (--nodes must agree). Prints its step time and breakdown");
  return d;
}

po::options_description calibrate_options(CommandLine& cl) {
  po::options_description d = common_options(cl);
  CalibrateOptions& c = cl.calibrate;
  d.add_options()("out", po::value(&c.out)->value_name("FILE"), "the cluster description to write (required)")(
      "name", po::value(&c.name)->value_name("TEXT"), "its cluster.name (default: the host name and rank count)")(
      "quick", po::bool_switch(&c.quick), "fewer sizes and shorter timings (a rougher description, in seconds)")(
      "device", po::value(&c.device)->value_name("cpu|cuda"),
      "what the training will compute on: cpu (default), or cuda (a GPU per rank, selected as training selects it; "
      "GEMMs through cuBLAS in fp32 and bf16, collectives through NCCL where no two ranks share a GPU)");
  return d;
}

// Splits the arguments into input-key overrides ("--section.key=value" or "--section.key value",
// kept as "--section.key=value"; an empty value is allowed) and the rest, for Boost.ProgramOptions.
std::vector<std::string> split_overrides(int argc, const char* const* argv, int first, std::vector<std::string>& overrides) {
  std::vector<std::string> rest;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    const auto dot = a.find('.'), eq = a.find('=');
    const bool key = a.rfind("--", 0) == 0 && dot != std::string::npos && dot < eq;
    if (!key) {
      rest.push_back(a);
    } else if (eq != std::string::npos) {
      overrides.push_back(a);
    } else {
      if (i + 1 >= argc) throw UserError("option '" + a.substr(2) + "' needs a value: write " + a + "=VALUE");
      overrides.push_back(a + "=" + argv[++i]);
    }
  }
  return rest;
}

// The subcommands: the word after `dtrain`, and the options each takes.
struct Subcommand {
  const char* word;
  CommandLine::Command command;
  po::options_description (*options)(CommandLine&);
};
const Subcommand kSubcommands[] = {{"generate", CommandLine::Command::generate, generate_options},
                                   {"plan", CommandLine::Command::plan, plan_options},
                                   {"calibrate", CommandLine::Command::calibrate, calibrate_options}};

}  // namespace

std::string command_usage(CommandLine::Command command) {
  CommandLine cl;
  std::ostringstream os;
  if (command == CommandLine::Command::plan) {
    os << "usage: dtrain plan INPUT.ini --cluster FILE [--nodes N] [--top K] [--scaling D1,D2,...] [--plot] [--layout K=V,...]\n"
          "Searches every layout of INPUT.ini's model on the cluster (tensor, context, pipeline, virtual, expert and data\n"
          "parallel sizes, micro-batch size, recomputation, distributed optimizer and ZeRO stage), keeps those dtrain\n"
          "accepts whose memory per rank (the dry run's estimate) fits a device, and ranks them by the step time a cost\n"
          "model predicts from the description's peak FLOP/s, GEMM efficiency, memory bandwidth and links. Prints the\n"
          "fastest with tokens/s, MFU, memory per rank, bubble, the step's breakdown and the overrides that run them.\n"
          "The model, global batch, sequence length, precision and overlap flags come from INPUT.ini. Runs on one rank.\n\n"
       << plan_options(cl);
  } else if (command == CommandLine::Command::calibrate) {
    os << "usage: mpirun -np N dtrain calibrate --out FILE [--name TEXT] [--quick] [--device cpu|cuda]\n"
          "Measures this machine as the job's N ranks see it (all ranks at once, the median of 5 rounds) on the device\n"
          "the training will use (--device cpu|cuda), through the layers a training step uses, and writes a cluster\n"
          "description for dtrain plan: the kernel table's GEMM rates over transformer-like shapes on cold operands\n"
          "(fp32; bf16 too on a GPU: the peaks and the efficiency table), memory bandwidth (a copy in the device's\n"
          "memory), one block's elementwise kernels, memory released and written again (ZeRO-2/3), and all-reduce,\n"
          "reduce-scatter, all-gather, send/recv and all-to-all times through the communication layer (MPI, or NCCL\n"
          "on GPUs) over message sizes at every group size dividing N, fitted to the planner's\n"
          "ring formulas (bandwidth and latency; all-reduce and reduce-scatter get bandwidths of their own). One node\n"
          "measures only the intra-node link: the inter-node link is written equal to it. Run it with the ranks per\n"
          "node and BLAS threads (system.threads_per_rank's default) the training will use.\n\n"
       << calibrate_options(cl);
  } else if (command == CommandLine::Command::generate) {
    os << "usage: dtrain generate INPUT.ini [--weights FILE] [--prompt TEXT | --prompts FILE] [--tokens N] [--temperature T]\n"
          "                       [--top-k K] [--top-p P] [--seed N] [--no-cache]\n"
          "Samples text from trained weights on one rank (no mpirun needed). INPUT.ini gives the model. A key/value\n"
          "cache keeps every layer's keys and values, so each new token costs one token's forward pass.\n\n"
       << generate_options(cl);
  } else {
    os << "usage: dtrain [--dry-run] INPUT.ini [--section.key=value ...]\n"
          "       dtrain generate INPUT.ini [--weights FILE] [--prompt TEXT | --prompts FILE] [--tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
          "       dtrain plan INPUT.ini --cluster FILE [--nodes N] [--top K] [--scaling D1,D2,...] [--plot] [--layout K=V,...]\n"
          "       dtrain calibrate --out FILE [--quick]\n"
          "       dtrain --help | --version\n"
          "Launch with srun (srun --mpi=pmix dtrain input.ini) or mpirun (mpirun -np 4 dtrain input.ini).\n"
          "Any input key can be overridden on the command line as --section.key=value.\n\n"
       << train_options(cl)
       << "\nThe step line's MFU: model FLOPs per token (6 x the parameters in matrix multiplies, plus the causal\n"
          "half of attention, 6 x num_layers x seq_length x hidden_size) times tokens/s, over the job's peak: single-\n"
          "precision GEMM measured once at start-up on all the cores each node gives the job, summed over nodes; on\n"
          "GPUs, the best cuBLAS GEMM of each GPU in the run's precision, summed.\n"
          "\nEnvironment (GPU runs; both slow training down, they find faults and costs):\n"
          "  DTRAIN_SYNC_LAUNCH=1         wait for every kernel launch, so that a kernel that faults is named at its\n"
          "                               own launch instead of at a later synchronisation\n"
          "  DTRAIN_KERNEL_PROFILE=FILE   also time every launch and write each kernel's device time (seconds, share,\n"
          "                               calls) and the host time before its launches to FILE (FILE.rank<R> with\n"
          "                               several ranks) when the process ends\n";
  }
  return os.str();
}

CommandLine parse_dtrain_command_line(int argc, const char* const* argv) {
  CommandLine cl;
  int first = 1;
  std::string program = "dtrain";
  po::options_description (*options_of)(CommandLine&) = train_options;
  for (const auto& sub : kSubcommands)
    if (argc > 1 && std::string(argv[1]) == sub.word) {
      cl.command = sub.command, first = 2, program = std::string("dtrain ") + sub.word, options_of = sub.options;
    }
  const po::options_description options = options_of(cl);
  std::vector<std::string> inputs;
  po::options_description hidden;
  hidden.add_options()("input", po::value(&inputs));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);

  const std::vector<std::string> args = split_overrides(argc, argv, first, cl.overrides);
  std::vector<const char*> ptrs{argv[0]};
  for (const auto& a : args) ptrs.push_back(a.c_str());
  parse_command_line_options(static_cast<int>(ptrs.size()), ptrs.data(), 1, all, positional, program);
  if (inputs.size() > 1)
    throw UserError("more than one input file ('" + inputs[0] + "' and '" + inputs[1] +
                    "'); give one input.ini and override keys with --section.key=value");
  if (cl.command == CommandLine::Command::calibrate && !inputs.empty())
    throw UserError("dtrain calibrate takes no input file ('" + inputs[0] + "'); give --out FILE (see dtrain calibrate --help)");
  if (!inputs.empty()) cl.input = inputs.front();
  return cl;
}

}  // namespace dtrain
