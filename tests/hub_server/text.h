// Small text helpers for the test Hub: URL pieces, base64, booleans the way the Hub's clients
// send them, byte ranges, timestamps and gitattributes/gitignore-style globs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace neuron_cache::hub_server {

// %XX decoding; `plus_is_space` for form bodies. Malformed escapes are kept as they are.
std::string percent_decode(std::string_view text, bool plus_is_space = false);
// Encodes everything except unreserved characters (and '/' when keep_slash).
std::string percent_encode(std::string_view text, bool keep_slash = false);

std::vector<std::string> split(std::string_view text, char separator);

// "a=1&b=2&b=3" -> ordered decoded pairs (a form body or a query string).
std::vector<std::pair<std::string, std::string>> parse_form(std::string_view text);

std::string base64_encode(std::string_view bytes);
// Accepts standard and URL-safe alphabets, with or without padding; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view text);

// true/True/1/yes/on, case-insensitively: Python clients before httpx sent "True".
bool truthy(std::string_view value);

// An ISO-8601 UTC timestamp with milliseconds, the form the Hub uses ("2024-01-01T00:00:00.000Z").
std::string iso_time(int64_t unix_seconds);

// One byte range of a `Range: bytes=...` header, resolved against a size. `satisfiable` is false
// when the range starts past the end (HTTP 416).
struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
  bool satisfiable = true;
};
// nullopt when the header is absent or not a single `bytes=` range (then it is ignored, as the
// RFC allows); multi-range requests are answered with their first range only.
std::optional<ByteRange> parse_range(std::string_view header, uint64_t size);

// gitattributes/gitignore glob: `*` and `?` stop at '/', `**` crosses folders; a pattern without
// '/' matches the last path component, one with '/' matches from the root.
bool glob_match(std::string_view pattern, std::string_view path);

// Binary detection the way git does it: a NUL byte in the sample.
bool looks_binary(std::string_view sample);

}  // namespace neuron_cache::hub_server
