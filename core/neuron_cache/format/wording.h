// Counts in messages: "1 configuration", "2 configurations", one rule for every line the tool
// prints about how many of something.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace neuron_cache {

// `n` and the noun that agrees with it: `plural` when given, else `singular` + "s".
inline std::string count_of(size_t n, std::string_view singular, std::string_view plural = {}) {
  if (n == 1) return "1 " + std::string(singular);
  return std::to_string(n) + " " +
         (plural.empty() ? std::string(singular) + "s" : std::string(plural));
}

}  // namespace neuron_cache
