// dtrain_main: the order of start-up. Stop signals are recorded from the first instruction on. Every
// rank parses the same INI bytes (rank 0 reads the file and broadcasts it), so a configuration error
// is found by all ranks at once: rank 0 prints it, all exit 2.
#include "app/entry.hpp"

#include <hdf5.h>
#include <mpi.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "app/auto_layout.hpp"
#include "app/calibrate_command.hpp"
#include "app/command_line.hpp"
#include "app/dry_run.hpp"
#include "app/generate_command.hpp"
#include "app/hf_model_keys.hpp"
#include "app/plan_command.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "dtrain_config.hpp"
#include "kernels/host_runtime.hpp"
#include "launch/launch_env.hpp"
#include "launch/placement.hpp"
#include "plan/training_plan.hpp"
#include "runtime/machine.hpp"
#include "runtime/stop_signal.hpp"
#include "train/training_loop.hpp"

namespace dtrain {
namespace {

// The input file's text, or why it cannot be an input file (a directory, an empty file, a device).
std::string read_input_file(const std::string& path, bool& ok) {
  ok = false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "cannot read input file '" + path + "' (" + std::strerror(errno) + "); give the path of an input.ini";
  if (!S_ISREG(st.st_mode)) return "input file '" + path + "' is not a regular file; give the path of an input.ini";
  std::ifstream in(path);
  if (!in) return "cannot read input file '" + path + "' (" + std::strerror(errno) + "); give the path of an input.ini";
  std::ostringstream ss;
  ss << in.rdbuf();
  ok = true;
  return ss.str();
}

// Rank 0 reads the input file and broadcasts its text (or the reason it could not) to every rank.
std::string broadcast_input(const std::string& path, HostComm world) {
  const int rank = world.rank();
  std::string text;
  int ok = 1;
  if (rank == 0) {
    bool readable = false;
    text = read_input_file(path, readable);
    ok = readable ? 1 : 0;
  }
  broadcast(world, &ok, 1, 0);
  broadcast_string(world, text);
  if (!ok) throw UserError(text);
  return text;
}

// The host memory one rank may use: the node's memory shared by the ranks on it, and how it was found.
std::pair<double, std::string> node_share(const LaunchEnv& env) {
  const double node = static_cast<double>(node_memory_bytes());
  char source[160];
  std::snprintf(source, sizeof source, "%.1f GB of memory on node %s shared by %d rank(s)", node / 1e9, env.node_name.c_str(),
                env.local_size);
  return {node / std::max(1, env.local_size), source};
}

// Collective: the smallest of every rank's `bytes`, with the source of the rank that has it.
void lowest_of(HostComm world, double& bytes, std::string& source) {
  const auto [lowest_bytes, lowest] = all_reduce_loc(world, bytes, HostOp::min);
  broadcast_string(world, source, lowest);
  bytes = lowest_bytes;
}

// Collective: the smallest memory a rank of the job may use, so every rank plans with the same limit;
// on GPUs also the host memory a rank may use (for an offloaded optimizer).
MemoryLimit memory_limit(HostComm world, const Config& cfg, const LaunchEnv& env, const Placement& placement) {
  MemoryLimit limit;
  const bool gpu = placement.backend == kernels::Backend::cuda;
  if (gpu) {
    std::tie(limit.host_bytes, limit.host_source) = node_share(env);
    lowest_of(world, limit.host_bytes, limit.host_source);
  }
  if (cfg.system.memory_budget_gb > 0) {
    limit.bytes = cfg.system.memory_budget_gb * 1e9;
    limit.source = "system.memory_budget_gb=" + std::to_string(cfg.system.memory_budget_gb);
    return limit;
  }
  if (gpu) {
    char source[160];
    std::snprintf(source, sizeof source, "%.1f GB of GPU memory per rank on node %s", placement.gpu_memory_share / 1e9,
                  env.node_name.c_str());
    limit.bytes = placement.gpu_memory_share;
    limit.source = source;
  } else {
    std::tie(limit.bytes, limit.source) = node_share(env);
  }
  limit.source += "; set system.memory_budget_gb to override";
  lowest_of(world, limit.bytes, limit.source);
  return limit;
}

int run(int argc, char** argv, HostComm world, StartupStop& startup) {
  const int rank = world.rank(), size = world.size();
  CommandLine cl = parse_dtrain_command_line(argc, argv);  // init_from=hf: adds overrides (below)
  if (cl.help) {
    if (rank == 0) {
      Config defaults;
      OptionTable table(defaults);
      std::printf("dtrain %s: MPI-native transformer trainer\n\n%s", DTRAIN_VERSION, command_usage(cl.command).c_str());
      if (cl.command == CommandLine::Command::train) std::printf("\nInput keys ([section] key = value in INPUT.ini):\n%s", options_help(table).c_str());
    }
    return 0;
  }
  if (cl.version) {
    if (rank == 0) std::printf("dtrain %s (CUDA backend: %s)\n", DTRAIN_VERSION, DTRAIN_HAS_CUDA ? "built" : "not built");
    return 0;
  }
  if (cl.command == CommandLine::Command::calibrate) return run_calibrate(world, cl.calibrate);
  if (cl.input.empty()) throw UserError("no input file given\n" + command_usage(cl.command));

  const LaunchEnv env = detect_launch_env(world);
  const std::string ini = broadcast_input(cl.input, world);
  std::vector<std::string> given;
  Config cfg = load_config(ini, cl.input, cl.overrides, &given);
  // checkpoint.init_from=hf:DIR: the model keys the input leaves out come from DIR/config.json, as
  // overrides (so that every later reading of the input, the layout search's, has them too).
  if (const auto taken = hf_model_overrides(world, cfg, given); !taken.empty()) {
    cl.overrides.insert(cl.overrides.begin(), taken.begin(), taken.end());
    cfg = load_config(ini, cl.input, cl.overrides);
  }
  validate_config(cfg);
  if (cfg.system.layout == LayoutChoice::automatic && cl.command == CommandLine::Command::train)
    cfg = choose_layout(world, env, ini, cl, cfg);
  if (cl.command == CommandLine::Command::plan) {
    int code = 0;  // rank 0 plans (pure, nothing to share); its error ends every rank
    collective_check(world, [&] { code = rank == 0 ? run_plan(cfg, cl.input, cl.plan) : 0; });
    return code;
  }
  OptionTable table(cfg);  // views the loaded values, for reports and checkpoints
  // A dry run plans on any machine (a login node has no GPU): it does not select devices.
  const Placement placement = cl.dry_run ? Placement{} : place_ranks(world, cfg.system.device, cfg.system.comm_backend, cfg.system.precision, env);
  if (cl.command == CommandLine::Command::generate) return run_generate(cfg, env, cl.generate, placement.backend, startup);
  const TrainingPlan plan = make_plan(cfg, size, memory_limit(world, cfg, env, placement));
  if (cl.dry_run) {
    print_dry_run(world, table, cfg, plan, env);
    return 0;
  }
  return run_training(world, cfg, plan, env, placement, config_as_ini(table), startup);
}

}  // namespace

int dtrain_main(int argc, char** argv) {
  install_stop_signal_handlers();  // a SIGUSR1/SIGTERM from here on stops the run cleanly (exit 3)
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5 failures are reported by our messages, not its stack
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  {
    // A stop signal before any step ends the job within seconds (plan, calibrate, a long start-up).
    StartupStop startup;
    kernels::HostRuntime host_kernels;
    try {
      code = run(argc, argv, MPI_COMM_WORLD, startup);
    } catch (const UserError& e) {
      // Raised identically on every rank: print once, exit everywhere.
      if (rank == 0) {
        std::istringstream lines(e.what());
        for (std::string line; std::getline(lines, line);) std::fprintf(stderr, "dtrain: error: %s\n", line.c_str());
      }
      code = dynamic_cast<const NonFiniteStep*>(&e) ? kNonFiniteExit : kUserErrorExit;
    } catch (const std::exception& e) {
      fatal(std::string("unexpected failure: ") + e.what());
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
  return code;
}

}  // namespace dtrain
