#include "neuron_cache/format/printable.h"

namespace neuron_cache {

std::string printable(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : text.substr(0, max_bytes)) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '\\') {
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    } else {
      out += ch;
    }
  }
  if (text.size() > max_bytes) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace neuron_cache
