#include "neuron_cache/report/markdown.h"

#include <string_view>

namespace neuron_cache::report {

std::string markdown_text(const std::string& text) {
  constexpr std::string_view kPunctuation = "\\`*_[]|!~";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    if (ch == '<') {
      out += "&lt;";
    } else if (ch == '>') {
      out += "&gt;";
    } else if (ch == '&') {
      out += "&amp;";
    } else if (ch == '\n' || ch == '\r') {
      out += ' ';
    } else {
      if (kPunctuation.find(ch) != std::string_view::npos) out += '\\';
      out += ch;
    }
  }
  return out;
}

std::string code_cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|')
      out += "\\|";
    else
      out += ch == '`' ? '\'' : ch;
  }
  return "`" + out + "`";
}

}  // namespace neuron_cache::report
