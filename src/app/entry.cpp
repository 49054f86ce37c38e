// dtrain_main: the order of start-up. Every rank parses the same INI bytes (rank 0 reads the file and
// broadcasts it), so a configuration error is found by all ranks at once: rank 0 prints it, all exit 2.
#include "app/entry.hpp"

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "app/dry_run.hpp"
#include "app/train_command.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "dtrain_config.hpp"
#include "parallel/training_plan.hpp"
#include "runtime/launch_env.hpp"

namespace dtrain {
namespace {

const char* kUsage =
    "usage: dtrain [--dry-run] INPUT.ini [--section.key=value ...]\n"
    "       dtrain generate INPUT.ini --checkpoint DIR [--prompt TEXT] [--tokens N] [--temperature T]\n"
    "       dtrain --help | --version\n"
    "Launch with srun (srun --mpi=pmix dtrain input.ini) or mpirun (mpirun -np 4 dtrain input.ini).\n"
    "Any input.ini key can be overridden on the command line as --section.key=value.\n";

// Rank 0 reads the input file and broadcasts its text (or the reason it could not) to every rank.
std::string broadcast_input(const std::string& path, MPI_Comm world) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  std::string text;
  int ok = 1;
  if (rank == 0) {
    std::ifstream in(path);
    if (!in) {
      ok = 0;
      text = "cannot read input file '" + path + "' (" + std::strerror(errno) + "); give the path of an input.ini";
    } else {
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
  }
  long len = static_cast<long>(text.size());
  MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, world));
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG, 0, world));
  text.resize(static_cast<std::size_t>(len));
  MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, 0, world));
  if (!ok) throw UserError(text);
  return text;
}

int run(int argc, char** argv, MPI_Comm world) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const CommandLine cl = parse_command_line(argc, argv);
  if (cl.help) {
    if (rank == 0) {
      Config defaults;
      OptionTable table(defaults);
      std::printf("dtrain %s: MPI-native transformer trainer\n\n%s%s", DTRAIN_VERSION, kUsage, options_help(table).c_str());
    }
    return 0;
  }
  if (cl.version) {
    if (rank == 0) std::printf("dtrain %s (CUDA backend: %s)\n", DTRAIN_VERSION, DTRAIN_HAS_CUDA ? "built" : "not built");
    return 0;
  }
  if (cl.input.empty()) throw UserError(std::string("no input file given\n") + kUsage);

  const LaunchEnv env = detect_launch_env(world);
  const std::string ini = broadcast_input(cl.input, world);
  Config cfg = load_config(ini, cl.input, cl.overrides);
  OptionTable table(cfg);  // views the loaded values, for reports and checkpoints
  validate_config(cfg, size);
  const TrainingPlan plan = make_plan(cfg, size);
  cfg.model.micro_batch = plan.micro_batch;

  if (cl.dry_run) {
    print_dry_run(world, table, cfg, plan, env);
    return 0;
  }
  if (cl.command == "generate") return run_generate(world, cfg, env, cl.extra);
  return run_train(world, table, cfg, plan, env);
}

}  // namespace

int dtrain_main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      code = run(argc, argv, MPI_COMM_WORLD);
    } catch (const UserError& e) {
      // Raised identically on every rank: print once, exit everywhere.
      if (rank == 0) {
        std::istringstream lines(e.what());
        for (std::string line; std::getline(lines, line);) std::fprintf(stderr, "dtrain: error: %s\n", line.c_str());
      }
      code = kUserErrorExit;
    } catch (const std::exception& e) {
      fatal(std::string("unexpected failure: ") + e.what());
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
  return code;
}

}  // namespace dtrain
