// UTC timestamps as the formats write them ("2024-05-01T12:34:56Z"; S3 and STS add fractions):
// the one reader and writer of the index's created_at, the statistics' since, S3's and the AWS
// credential sources' times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache {

// "YYYY-MM-DDTHH:MM:SS", then optional fractions and a Z, as seconds since 1970; or nothing.
std::optional<int64_t> parse_utc_timestamp(std::string_view text);
// An HTTP date as servers send it (RFC 9110's IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT": S3's
// Date and Last-Modified) as seconds since 1970; nothing for any other text (the obsolete forms
// included: no store of this tool sends them).
std::optional<int64_t> parse_http_date(std::string_view text);
// Seconds since 1970 as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_text(int64_t seconds);

// What parse_duration accepts, for help texts and error messages.
inline constexpr std::string_view kDurationForms =
    "a number with a unit: s, m, h, d or w (90d, 12h, 30m); 0 alone is none";
// Seconds of "90d", "12h", "30m", "45s", "2w" or "0"; throws an input Error naming `what` and
// kDurationForms for anything else (no unit, a negative or overflowing number).
int64_t parse_duration(std::string_view text, std::string_view what);
// "90 days", "12 hours", "30 minutes", "45 seconds": the largest unit that divides it.
std::string duration_text(int64_t seconds);

}  // namespace neuron_cache
