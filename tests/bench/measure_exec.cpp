// measure-exec: runs a command and writes its wall time, peak RSS, exit code and CPU time to a
// file, for the benchmarks. A separate, tiny process (libc only) on purpose: Linux counts the
// memory a process replaces at exec in the child's ru_maxrss, so spawning straight from the
// benchmark (tens of MiB) would put a floor that high under every measurement; from here it is ~1.5
// MiB.
//   measure-exec RESULT_FILE COMMAND [ARGS...]
// RESULT_FILE gets "<seconds> <ru_maxrss KiB> <exit code> <cpu seconds>\n" (exit code 128+N for
// signal N; cpu: user + system time of the command and the children it waited for).
// The command inherits the environment and the standard streams; measure-exec exits 0 once the
// result is written, 127 when the command cannot start.
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char** environ;

static double cpu_seconds(const struct rusage& usage) {
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: measure-exec RESULT_FILE COMMAND [ARGS...]\n");
    return 2;
  }
  timespec start{}, end{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  pid_t pid = -1;
  int error = posix_spawnp(&pid, argv[2], nullptr, nullptr, argv + 2, environ);
  if (error != 0) {
    fprintf(stderr, "measure-exec: cannot start %s: %s\n", argv[2], strerror(error));
    return 127;
  }
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      perror("measure-exec: wait4");
      return 1;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double seconds = static_cast<double>(end.tv_sec - start.tv_sec) +
                   static_cast<double>(end.tv_nsec - start.tv_nsec) / 1e9;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE* out = fopen(argv[1], "w");
  if (out == nullptr ||
      fprintf(out, "%.6f %ld %d %.6f\n", seconds, usage.ru_maxrss, code, cpu_seconds(usage)) < 0 ||
      fclose(out) != 0) {
    perror("measure-exec: cannot write the result");
    return 1;
  }
  return 0;
}
