// Counts in messages: "1 configuration", "2 configurations", one rule for every line the tool
// prints about how many of something.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache {

// `n` and the noun that agrees with it: `plural` when given, else `singular` + "s".
inline std::string count_of(size_t n, std::string_view singular, std::string_view plural = {}) {
  if (n == 1) return "1 " + std::string(singular);
  return std::to_string(n) + " " +
         (plural.empty() ? std::string(singular) + "s" : std::string(plural));
}

// "a, b, c", or the first `at_most` and "and N more": names in one line, however many.
inline std::string list_of(const std::vector<std::string>& names, size_t at_most = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < at_most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > at_most) out += " and " + std::to_string(names.size() - at_most) + " more";
  return out;
}

}  // namespace neuron_cache
