#include "neuron_cache/sys/random.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <random>

namespace neuron_cache::sys {

uint64_t random_seed() {
  uint64_t seed = 0;
  ssize_t got;
  do {
    got = getrandom(&seed, sizeof seed, 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof seed)) {
    // A kernel before 3.17 or a seccomp filter: names only need to differ between processes.
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<uint64_t>(getpid()) << 32);
  }
  return seed;
}

std::string random_hex(int digits) {
  static thread_local std::mt19937_64 generator{random_seed()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < digits; ++i) text += kHex[generator() % 16];
  return text;
}

}  // namespace neuron_cache::sys
