// `mpirun -np N dtrain calibrate --out FILE`: measures this machine as the job's N ranks see it and
// writes a cluster description (plan/cluster's format) for `dtrain plan`. plan/calibration fits the
// measured points; this file takes them (GEMMs, a stream copy, MPI collectives).
#pragma once
#include "app/command_line.hpp"
#include "comm/host_comm.hpp"

namespace dtrain {

// Collective over world; rank 0 writes the file and prints what it measured. Returns the exit code.
int run_calibrate(HostComm world, const CalibrateOptions& options);

}  // namespace dtrain
