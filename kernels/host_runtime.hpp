// The host kernels' runtime (Kokkos), initialised once per process with fixed settings: Kokkos never
// sees the command line, so no program's options are taken (or rejected) by it.
#pragma once

namespace dtrain::kernels {

class HostRuntime {
 public:
  HostRuntime();   // Kokkos::initialize with default arguments (unless already initialised)
  ~HostRuntime();  // Kokkos::finalize, if this object initialised it
  HostRuntime(const HostRuntime&) = delete;
  HostRuntime& operator=(const HostRuntime&) = delete;

 private:
  bool owner_ = false;
};

}  // namespace dtrain::kernels
