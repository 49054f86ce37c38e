// dtrain: a statically linked launcher that blocks SIGUSR1 and SIGTERM at its first instruction, then
// executes dtrain-main from its own directory in the same process (the same pid, argv and
// environment). The trainer links CUDA, MPI and HDF5; loading them can take a second on a cold node,
// and a stop signal in that second used to kill the ranks it reached (exit 138/143) and leave the
// others running. A blocked signal stays pending across exec, and dtrain-main unblocks it once its
// handler is installed (runtime/stop_signal.cpp), so a signal at any moment stops every rank cleanly.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

int main(int, char** argv) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGUSR1);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    std::fprintf(stderr, "dtrain: error: cannot find this executable (/proc/self/exe): %s\n", std::strerror(errno));
    return 1;
  }
  self[n] = '\0';
  char* slash = std::strrchr(self, '/');
  char main_path[PATH_MAX + 16];
  std::snprintf(main_path, sizeof main_path, "%.*s/dtrain-main", static_cast<int>(slash - self), self);
  execv(main_path, argv);
  std::fprintf(stderr, "dtrain: error: cannot run %s (%s); it is built and installed beside dtrain\n", main_path, std::strerror(errno));
  return 1;
}
