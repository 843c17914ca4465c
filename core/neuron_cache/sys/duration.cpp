#include "neuron_cache/sys/duration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace neuron_cache::sys {
namespace {

// `value` with one decimal, the decimal dropped when it is 0: "2", "2.5".
std::string one_decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  std::string out = text;
  if (out.size() > 2 && out.ends_with(".0")) out.resize(out.size() - 2);
  return out;
}

}  // namespace

std::string duration_text(std::chrono::milliseconds length) {
  int64_t ms = length.count();
  if (ms <= 0) return "0 s";
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms < 10'000) return one_decimal(static_cast<double>(ms) / 1000) + " s";
  if (ms < 120'000) return std::to_string((ms + 500) / 1000) + " s";
  if (ms < 7'200'000) return std::to_string((ms + 30'000) / 60'000) + " min";
  return one_decimal(static_cast<double>(ms) / 3'600'000) + " h";
}

std::string duration_text(double seconds) {
  // Beyond 10^12 s (tens of thousands of years) nothing is said more precisely.
  if (std::isnan(seconds) || seconds <= 0) return "0 s";
  double ms = std::min(seconds, 1e12) * 1000;
  return duration_text(std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms))));
}

}  // namespace neuron_cache::sys
