#include "neuron_cache/sys/random.h"

#include <random>

namespace neuron_cache::sys {

std::string random_hex(int digits) {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < digits; ++i) text += kHex[generator() % 16];
  return text;
}

}  // namespace neuron_cache::sys
