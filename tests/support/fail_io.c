/* A write-failure injector, preloaded into a test's processes (LD_PRELOAD): it makes chosen system
 * calls fail on chosen files, as a full disk or a failing device would, wherever a small filesystem
 * cannot be mounted or cannot fail at the wanted moment.
 *
 *   FAIL_IO=CALL:PATTERN[:N]
 *
 * CALL is the kind of call that fails:
 *   write    write, pwrite, pwrite64, writev, pwritev        (ENOSPC)
 *   write@0  pwrite and pwrite64 at offset 0: HDF5 writes its superblock there when it creates a file
 *            and again when it closes it, so N = 2 is the metadata written at the close   (ENOSPC)
 *   fsync    fsync, fdatasync                                  (EIO)
 *   close    close (the descriptor is closed, as Linux does)   (EIO)
 *   rename   rename, renameat2 (the source path is matched)    (EIO)
 * PATTERN must occur in the file's path (for a descriptor, its /proc/self/fd link). From the N-th matching
 * call on (default 1) every matching call fails: a disk that filled stays full. The variable is read at
 * every call, and the count starts again when it changes, so one process can try several cases.
 * Every failure is counted in FAIL_IO_COUNT's file when that variable names one (a test then knows the
 * injection happened). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char last_rule[1024];
static long seen;

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

static void record_failure(void) {
  const char *counter = getenv("FAIL_IO_COUNT");
  if (!counter || !*counter) return;
  int (*real_open)(const char *, int, ...) = (int (*)(const char *, int, ...))next("open");
  ssize_t (*real_write)(int, const void *, size_t) = (ssize_t(*)(int, const void *, size_t))next("write");
  int (*real_close)(int) = (int (*)(int))next("close");
  const int fd = real_open(counter, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (real_write(fd, "x", 1) != 1) { /* a test then sees no injection */ }
  real_close(fd);
}

/* Whether this call (of kind `call`, on `path`) fails. */
static int should_fail(const char *call, const char *path) {
  const char *rule = getenv("FAIL_IO");
  if (!rule || !*rule || !path) return 0;
  char kind[32], pattern[960];
  long n = 1;
  const char *colon = strchr(rule, ':');
  if (!colon || (size_t)(colon - rule) >= sizeof kind) return 0;
  memcpy(kind, rule, (size_t)(colon - rule));
  kind[colon - rule] = '\0';
  const char *rest = colon + 1, *second = strrchr(rest, ':');
  size_t len = second && second > rest ? (size_t)(second - rest) : strlen(rest);
  if (len >= sizeof pattern) return 0;
  memcpy(pattern, rest, len);
  pattern[len] = '\0';
  if (second && second > rest) n = atol(second + 1);
  if (strcmp(kind, call) != 0 || !strstr(path, pattern)) return 0;
  pthread_mutex_lock(&lock);
  if (strncmp(last_rule, rule, sizeof last_rule - 1) != 0) {
    strncpy(last_rule, rule, sizeof last_rule - 1);
    seen = 0;
  }
  const int fail = ++seen >= n;
  pthread_mutex_unlock(&lock);
  if (fail) record_failure();
  return fail;
}

static int fd_fails(const char *call, int fd) {
  const char *rule = getenv("FAIL_IO");
  if (!rule || !*rule) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return should_fail(call, path);
}

ssize_t write(int fd, const void *buf, size_t count) {
  static ssize_t (*real)(int, const void *, size_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t))next("write");
  if (fd_fails("write", fd)) return errno = ENOSPC, -1;
  return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void *, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t, off_t))next("pwrite");
  if (fd_fails("write", fd) || (offset == 0 && fd_fails("write@0", fd))) return errno = ENOSPC, -1;
  return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void *, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t, off_t))next("pwrite64");
  if (fd_fails("write", fd) || (offset == 0 && fd_fails("write@0", fd))) return errno = ENOSPC, -1;
  return real(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
  static ssize_t (*real)(int, const struct iovec *, int);
  if (!real) real = (ssize_t(*)(int, const struct iovec *, int))next("writev");
  if (fd_fails("write", fd)) return errno = ENOSPC, -1;
  return real(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
  static ssize_t (*real)(int, const struct iovec *, int, off_t);
  if (!real) real = (ssize_t(*)(int, const struct iovec *, int, off_t))next("pwritev");
  if (fd_fails("write", fd)) return errno = ENOSPC, -1;
  return real(fd, iov, iovcnt, offset);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("fsync");
  if (fd_fails("fsync", fd)) return errno = EIO, -1;
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("fdatasync");
  if (fd_fails("fsync", fd)) return errno = EIO, -1;
  return real(fd);
}

int close(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("close");
  const int fail = fd_fails("close", fd);
  const int rc = real(fd);
  if (fail) return errno = EIO, -1;
  return rc;
}

int rename(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  if (!real) real = (int (*)(const char *, const char *))next("rename");
  if (should_fail("rename", from)) return errno = EIO, -1;
  return real(from, to);
}

int renameat2(int olddirfd, const char *from, int newdirfd, const char *to, unsigned int flags) {
  static int (*real)(int, const char *, int, const char *, unsigned int);
  if (!real) real = (int (*)(int, const char *, int, const char *, unsigned int))next("renameat2");
  if (should_fail("rename", from)) return errno = EIO, -1;
  return real(olddirfd, from, newdirfd, to, flags);
}
