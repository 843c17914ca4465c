#include "neuron_cache/format/bytes.h"

#include <cstdio>
#include <iterator>

namespace neuron_cache::format {

std::string human_bytes(uint64_t bytes, ByteLabels labels) {
  static constexpr const char* kIec[] = {"KiB", "MiB", "GiB", "TiB"};
  // optimum-neuron stops at GB: 5 TiB is "5120.0 GB" there.
  static constexpr const char* kOptimum[] = {"KB", "MB", "GB"};
  const char* const* units = labels == ByteLabels::Iec ? kIec : kOptimum;
  size_t count = labels == ByteLabels::Iec ? std::size(kIec) : std::size(kOptimum);
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < count) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace neuron_cache::format
