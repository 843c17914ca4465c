#include "neuron_cache/format/compile_flags.h"

#include <sstream>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache {

std::string compile_flags_json(const std::vector<std::string>& flags) {
  return pyjson::dumps(pyjson::Json(flags));
}

std::string legacy_compile_flags_txt(const std::vector<std::string>& flags) {
  std::string text;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (i > 0) text += ' ';
    text += flags[i];
  }
  return text;
}

std::string flags_key(std::string_view flags_file_bytes) {
  return md5_hex(flags_file_bytes).substr(0, 8);
}

std::vector<std::string> parse_compile_flags_json(std::string_view text) {
  pyjson::Json value = pyjson::parse(text);
  if (!value.is_array()) throw input_error("compile flags must be a JSON list of strings");
  std::vector<std::string> flags;
  for (const auto& item : value) {
    if (!item.is_string()) throw input_error("compile flags must be a JSON list of strings");
    flags.push_back(item.get<std::string>());
  }
  return flags;
}

std::optional<std::string> cache_dir_in_flags(const std::string& neuron_cc_flags) {
  std::istringstream words(neuron_cc_flags);
  std::optional<std::string> dir;
  bool value_next = false;
  for (std::string word; words >> word;) {
    if (value_next) dir = word;
    value_next = word == "--cache_dir";
    if (word.starts_with("--cache_dir=")) dir = word.substr(12);
  }
  return dir;
}

std::string strip_cache_flags(const std::string& neuron_cc_flags,
                              std::vector<std::string>* removed) {
  std::istringstream words(neuron_cc_flags);
  std::string word, kept;
  bool value_of_cache_dir = false;
  auto drop = [&](const std::string& w) {
    if (removed) removed->push_back(w);
  };
  while (words >> word) {
    if (value_of_cache_dir) {
      value_of_cache_dir = false;
      drop(word);
    } else if (word == "--cache_dir") {
      value_of_cache_dir = true;
      drop(word);
    } else if (word.starts_with("--cache_dir=") || word == "--no_cache" || word == "--no-cache" ||
               word == "--retry_failed_compilation") {
      drop(word);
    } else {
      kept += (kept.empty() ? "" : " ") + word;
    }
  }
  return kept;
}

}  // namespace neuron_cache
