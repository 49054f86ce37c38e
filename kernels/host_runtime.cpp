// HostRuntime: Kokkos start-up and shutdown without argc/argv.
#include "kernels/host_runtime.hpp"

#include <Kokkos_Core.hpp>

namespace dtrain::kernels {

HostRuntime::HostRuntime() {
  if (Kokkos::is_initialized()) return;
  Kokkos::initialize(Kokkos::InitArguments());
  owner_ = true;
}

HostRuntime::~HostRuntime() {
  if (owner_ && Kokkos::is_initialized()) Kokkos::finalize();
}

}  // namespace dtrain::kernels
