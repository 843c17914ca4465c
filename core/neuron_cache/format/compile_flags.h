// The flags part of a MODULE_<graph key>+<flags key> name. libneuronxla names the folder after
// the MD5 of the exact bytes of the flags file, so the file text must match Python's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache {

// Text of compile_flags.json: Python json.dumps(flags), e.g. ["--target=trn1", "-O2"].
std::string compile_flags_json(const std::vector<std::string>& flags);

// Text of the legacy compile_flags.txt: the flags joined by single spaces.
std::string legacy_compile_flags_txt(const std::vector<std::string>& flags);

// First 8 hex digits of MD5 over the flags file bytes (either format).
std::string flags_key(std::string_view flags_file_bytes);

// Reads a compile_flags.json text; throws an input Error unless it is a JSON list of strings.
std::vector<std::string> parse_compile_flags_json(std::string_view text);

// The cache folder NEURON_CC_FLAGS names, in either form libneuronxla's parser accepts
// (--cache_dir=DIR, --cache_dir DIR; the last one wins), or nothing.
std::optional<std::string> cache_dir_in_flags(const std::string& neuron_cc_flags);

// NEURON_CC_FLAGS without the flags neuron-cache must control or that only the libneuronxla
// wrapper reads: --cache_dir=..., --cache_dir <dir>, --no_cache, --no-cache,
// --retry_failed_compilation. The words left are joined by single spaces; `removed` (optional)
// receives the words taken out.
std::string strip_cache_flags(const std::string& neuron_cc_flags,
                              std::vector<std::string>* removed);

}  // namespace neuron_cache
