#include "neuron_cache/format/timestamp.h"

#include <cctype>
#include <ctime>

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

std::string utc_text(int64_t seconds) {
  std::time_t when = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace neuron_cache
