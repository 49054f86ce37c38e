// A library whose constructor takes 0.3 s. startup_signal.sh at_launch preloads it into the ranks, where
// it stands for the time a cold node takes to load dtrain's libraries (CUDA, MPI, HDF5: up to a second):
// the window in which the dtrain launcher has the stop signals blocked and no handler is installed yet,
// too short on a warm machine for the test to see and signal each rank inside it.
#include <time.h>

__attribute__((constructor)) static void slow_start(void) {
  struct timespec pause = {0, 300000000};
  nanosleep(&pause, 0);
}
