#include "neuron_cache/format/printable.h"

#include <cstdint>

namespace neuron_cache {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void escape_byte(std::string& out, unsigned char c) {
  out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
}

// The length of the valid UTF-8 sequence at the start of `text` and its code point, or 0.
size_t utf8_sequence(std::string_view text, uint32_t& code) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(0);
  size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
  if (lead >= 0xf5 || length == 0 || text.size() < length) return 0;
  code = lead & (0x7f >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3f);
  }
  bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  bool invalid = code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff);
  return overlong || invalid ? 0 : length;
}

// C1 controls (8-bit terminal commands) and the marks that reorder or hide text on screen.
bool is_hidden_control(uint32_t code) {
  return (code >= 0x80 && code <= 0x9f) || code == 0x061c || code == 0x200e || code == 0x200f ||
         (code >= 0x202a && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
  std::string_view shown = text.substr(0, max_bytes);
  std::string out;
  for (size_t i = 0; i < shown.size();) {
    auto c = static_cast<unsigned char>(shown[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f || c == '\\') {
        escape_byte(out, c);
      } else {
        out += shown[i];
      }
      ++i;
      continue;
    }
    uint32_t code = 0;
    size_t length = utf8_sequence(shown.substr(i), code);
    if (length == 0) {
      escape_byte(out, c);  // not UTF-8: a lone 0x9b is CSI to an 8-bit terminal
      ++i;
    } else if (is_hidden_control(code)) {
      for (size_t k = 0; k < length; ++k)
        escape_byte(out, static_cast<unsigned char>(shown[i + k]));
      i += length;
    } else {
      out += shown.substr(i, length);
      i += length;
    }
  }
  if (text.size() > max_bytes) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace neuron_cache
