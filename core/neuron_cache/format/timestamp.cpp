#include "neuron_cache/format/timestamp.h"

#include <cctype>
#include <ctime>

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"

namespace neuron_cache {

std::optional<int64_t> parse_utc_timestamp(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional fractions and a Z.
  static constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd";
  if (text.size() < kShape.size()) return std::nullopt;
  for (size_t i = 0; i < kShape.size(); ++i) {
    bool digit = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
    if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) return std::nullopt;
  }
  auto number = [&](size_t at, size_t digits) {
    return std::stoi(std::string(text.substr(at, digits)));
  };
  std::tm when{};
  when.tm_year = number(0, 4) - 1900;
  when.tm_mon = number(5, 2) - 1;
  when.tm_mday = number(8, 2);
  when.tm_hour = number(11, 2);
  when.tm_min = number(14, 2);
  when.tm_sec = number(17, 2);
  if (when.tm_mon > 11 || when.tm_mday < 1 || when.tm_mday > 31 || when.tm_hour > 23 ||
      when.tm_min > 59 || when.tm_sec > 60) {
    return std::nullopt;
  }
  return static_cast<int64_t>(timegm(&when));
}

std::optional<int64_t> parse_http_date(std::string_view text) {
  // "Www, DD Mon YYYY HH:MM:SS GMT"; the weekday is not checked against the date.
  static constexpr std::string_view kShape = "aaa, dd aaa dddd dd:dd:dd GMT";
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  if (text.size() != kShape.size()) return std::nullopt;
  for (size_t i = 0; i < kShape.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    bool ok = kShape[i] == 'd'   ? std::isdigit(c) != 0
              : kShape[i] == 'a' ? std::isalpha(c) != 0
                                 : text[i] == kShape[i];
    if (!ok) return std::nullopt;
  }
  size_t month = kMonths.find(text.substr(8, 3));
  if (month == std::string_view::npos || month % 3 != 0) return std::nullopt;
  // The same date in the shape parse_utc_timestamp() reads, which checks the fields' ranges.
  std::string iso = std::string(text.substr(12, 4)) + "-" + (month / 3 < 9 ? "0" : "") +
                    std::to_string(month / 3 + 1) + "-" + std::string(text.substr(5, 2)) + "T" +
                    std::string(text.substr(17, 8)) + "Z";
  return parse_utc_timestamp(iso);
}

std::string utc_text(int64_t seconds) {
  std::time_t when = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

namespace {

struct Unit {
  char letter;
  int64_t seconds;
  const char* name;
};
constexpr Unit kUnits[] = {{'w', 604'800, "week"},
                           {'d', 86'400, "day"},
                           {'h', 3'600, "hour"},
                           {'m', 60, "minute"},
                           {'s', 1, "second"}};

}  // namespace

int64_t parse_duration(std::string_view text, std::string_view what) {
  auto refuse = [&] {
    return input_error(std::string(what) + " \"" + printable(text) + "\" is not a duration: give " +
                       std::string(kDurationForms));
  };
  if (text == "0") return 0;
  if (text.size() < 2 || text.size() > 12) throw refuse();
  int64_t number = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') throw refuse();
    number = number * 10 + (c - '0');
  }
  for (const Unit& unit : kUnits) {
    int64_t seconds = 0;
    if (unit.letter != text.back()) continue;
    if (__builtin_mul_overflow(number, unit.seconds, &seconds)) throw refuse();
    return seconds;
  }
  throw refuse();
}

std::string duration_text(int64_t seconds) {
  for (const Unit& unit : kUnits) {
    if (seconds == 0 || seconds % unit.seconds != 0) continue;
    int64_t n = seconds / unit.seconds;
    return std::to_string(n) + " " + unit.name + (n == 1 ? "" : "s");
  }
  return "0 seconds";
}

}  // namespace neuron_cache
