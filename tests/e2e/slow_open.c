// Opening a file whose path contains $SLOW_OPEN takes 30 s: startup_signal.sh slow_load preloads it into
// the ranks, where it stands for a start-up phase that takes long after the stop handler is installed
// (a checkpoint or a data set on a busy parallel filesystem, a large model's initial weights).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void maybe_wait(const char *path) {
  const char *pattern = getenv("SLOW_OPEN");
  if (!pattern || !*pattern || !path || !strstr(path, pattern)) return;
  struct timespec pause = {30, 0};
  nanosleep(&pause, 0);
}

FILE *fopen(const char *path, const char *mode) {
  static FILE *(*real)(const char *, const char *);
  if (!real) real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
  maybe_wait(path);
  return real(path, mode);
}

int open(const char *path, int flags, ...) {
  static int (*real)(const char *, int, ...);
  if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  va_list ap;
  va_start(ap, flags);
  const int mode = va_arg(ap, int);
  va_end(ap);
  maybe_wait(path);
  return real(path, flags, mode);
}
