// Linked into the release's executables only (NEURON_CACHE_PORTABLE): the static libstdc++ of
// gcc 12, built on glibc 2.36, seeds std::random_device with arc4random, new in glibc 2.36. This
// definition binds that reference inside the executable, so the release needs glibc 2.34 only
// (packaging/release/check-glibc.sh proves it). Same contract as glibc's: never fails.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" uint32_t arc4random(void) {
  uint32_t value = 0;
  ssize_t got;
  do {
    got = getrandom(&value, sizeof value, 0);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof value)) return value;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value)) {
    close(fd);
    return value;
  }
  abort();  // glibc's arc4random aborts too when the kernel gives no randomness
}
