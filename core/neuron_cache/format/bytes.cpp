#include "neuron_cache/format/bytes.h"

#include <cctype>
#include <cstdio>
#include <iterator>
#include <optional>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"

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

namespace {

struct Unit {
  std::string_view name;  // upper case
  uint64_t factor;
};

constexpr Unit kUnits[] = {
    {"", 1},
    {"B", 1},
    {"K", 1ULL << 10},
    {"KIB", 1ULL << 10},
    {"M", 1ULL << 20},
    {"MIB", 1ULL << 20},
    {"G", 1ULL << 30},
    {"GIB", 1ULL << 30},
    {"T", 1ULL << 40},
    {"TIB", 1ULL << 40},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
};

// 6 decimals times the largest factor (2^40) stays far below 2^64.
constexpr size_t kMaxDecimals = 6;
constexpr size_t kMaxDigits = 19;  // 10^19 - 1 still fits in 64 bits

std::optional<uint64_t> unit_factor(std::string_view unit) {
  std::string upper(unit);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& known : kUnits) {
    if (known.name == upper) return known.factor;
  }
  return std::nullopt;
}

// "12.5" -> {125, 1}; nothing unless digits, at most one '.', digits after it.
std::optional<std::pair<uint64_t, size_t>> parse_decimal(std::string_view number) {
  size_t dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  bool digits_only = number.find_first_not_of("0123456789.") == std::string_view::npos;
  if (!digits_only || whole.empty() || (dot != std::string_view::npos && fraction.empty()) ||
      fraction.find('.') != std::string_view::npos || fraction.size() > kMaxDecimals ||
      whole.size() + fraction.size() > kMaxDigits) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (char c : whole) value = value * 10 + static_cast<uint64_t>(c - '0');
  for (char c : fraction) value = value * 10 + static_cast<uint64_t>(c - '0');
  return std::make_pair(value, fraction.size());
}

}  // namespace

uint64_t parse_size(std::string_view text, std::string_view what) {
  auto refuse = [&](const std::string& why) {
    return input_error(std::string(what) + " \"" + printable(text) + "\" " + why + ": give " +
                       std::string(kSizeForms) + " (e.g. 200GiB)");
  };
  size_t unit_start = text.find_first_not_of("0123456789.");
  std::string_view number = text.substr(0, unit_start);
  std::string_view unit = unit_start == std::string_view::npos ? "" : text.substr(unit_start);
  if (unit.starts_with(' ')) unit.remove_prefix(1);  // "500 MiB"
  auto decimal = parse_decimal(number);
  if (!decimal) throw refuse("is not a size");
  auto factor = unit_factor(unit);
  if (!factor) throw refuse("has a unit neuron-cache does not know");
  auto [digits, decimals] = *decimal;
  uint64_t scale = 1;
  for (size_t i = 0; i < decimals; ++i) scale *= 10;
  if (decimals > 0 && *factor == 1) throw refuse("is not a whole number of bytes");
  uint64_t whole = digits / scale;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(whole, *factor, &bytes) ||
      __builtin_add_overflow(bytes, digits % scale * *factor / scale, &bytes)) {
    throw refuse("is too large");
  }
  return bytes;
}

}  // namespace neuron_cache::format
