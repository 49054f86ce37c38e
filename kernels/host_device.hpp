// DTRAIN_HOST_DEVICE: functions that the CUDA kernels call on the device and the unit tests call on the
// host (index math, tile and fragment maps), so that GPU code is tested without a GPU.
#pragma once

#ifdef __CUDACC__
#define DTRAIN_HOST_DEVICE __host__ __device__
#else
#define DTRAIN_HOST_DEVICE
#endif
