// GPU selection for device=cuda: one device per local rank (local rank modulo visible devices), with
// clear errors for no GPU and for more local ranks than GPUs. Returns -1 in builds without CUDA.
#pragma once
#include "runtime/launch_env.hpp"

namespace dtrain {

// Selects and returns this rank's device; fatal() with an explanation when impossible.
int select_cuda_device(const LaunchEnv& env, bool allow_shared_gpu);

}  // namespace dtrain
