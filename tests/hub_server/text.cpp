#include "text.h"

#include <algorithm>
#include <cctype>
#include <ctime>

namespace neuron_cache::hub_server {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Glob matching on [p, pattern end) against [s, text end), recursive for '*' and '**'.
bool match_from(std::string_view pattern, std::string_view text) {
  size_t p = 0;
  size_t s = 0;
  while (p < pattern.size()) {
    char c = pattern[p];
    if (c == '*') {
      bool double_star = p + 1 < pattern.size() && pattern[p + 1] == '*';
      std::string_view rest = pattern.substr(p + (double_star ? 2 : 1));
      // "**/" also matches zero folders.
      if (double_star && !rest.empty() && rest[0] == '/' &&
          match_from(rest.substr(1), text.substr(s))) {
        return true;
      }
      for (size_t i = s; i <= text.size(); ++i) {
        if (match_from(rest, text.substr(i))) return true;
        if (i < text.size() && text[i] == '/' && !double_star) return false;
      }
      return false;
    }
    if (s >= text.size()) return false;
    if (c == '?') {
      if (text[s] == '/') return false;
    } else if (c == '\\' && p + 1 < pattern.size()) {
      ++p;
      if (pattern[p] != text[s]) return false;
    } else if (c != text[s]) {
      return false;
    }
    ++p;
    ++s;
  }
  return s == text.size();
}

}  // namespace

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
        hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::vector<std::pair<std::string, std::string>> parse_form(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (text.empty()) return pairs;
  for (const auto& item : split(text, '&')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = percent_decode(item.substr(0, eq), true);
    std::string value = eq == std::string::npos ? "" : percent_decode(item.substr(eq + 1), true);
    pairs.emplace_back(std::move(key), std::move(value));
  }
  return pairs;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t buffer = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == '=') {
      ++padding;
      continue;
    }
    if (c == '\n' || c == '\r') continue;
    int v = value(c);
    if (v < 0 || padding > 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  if (padding > 2 || bits >= 6) return std::nullopt;
  return out;
}

bool truthy(std::string_view value) {
  std::string v = lower(value);
  return v == "true" || v == "1" || v == "yes" || v == "on";
}

std::string iso_time(int64_t unix_seconds) {
  std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S.000Z", &utc);
  return buffer;
}

std::optional<ByteRange> parse_range(std::string_view header, uint64_t size) {
  if (!header.starts_with("bytes=")) return std::nullopt;
  std::string spec(header.substr(6));
  spec = spec.substr(0, spec.find(','));  // first range only
  spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return std::nullopt;
  std::string first = spec.substr(0, dash);
  std::string last = spec.substr(dash + 1);
  auto all_digits = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  ByteRange range;
  if (first.empty()) {  // suffix: the last N bytes
    if (!all_digits(last)) return std::nullopt;
    uint64_t n = std::stoull(last);
    if (n == 0 || size == 0) return ByteRange{0, 0, false};
    range.length = std::min(n, size);
    range.first = size - range.length;
    return range;
  }
  if (!all_digits(first) || (!last.empty() && !all_digits(last))) return std::nullopt;
  range.first = std::stoull(first);
  uint64_t end = last.empty() ? size - 1 : std::min<uint64_t>(std::stoull(last), size - 1);
  if (!last.empty() && std::stoull(last) < range.first) return std::nullopt;
  if (range.first >= size) return ByteRange{range.first, 0, false};
  range.length = end - range.first + 1;
  return range;
}

bool glob_match(std::string_view pattern, std::string_view path) {
  if (pattern.empty()) return false;
  if (pattern.front() == '/') return match_from(pattern.substr(1), path);
  if (pattern.find('/') != std::string_view::npos) return match_from(pattern, path);
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return match_from(pattern, name);
}

bool looks_binary(std::string_view sample) {
  return sample.find('\0') != std::string_view::npos;
}

}  // namespace neuron_cache::hub_server
