// Python-compatible JSON: the one place that reproduces CPython's json module byte for byte.
// Registry files, arch digests and compile_flags.json are hashed, so their text must be exactly
// what json.dumps writes; no JSON library prints that format.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache::pyjson {

using Json = nlohmann::json;

// Parses like json.loads: NaN/Infinity/-Infinity literals, the last duplicate key wins, lone
// surrogate escapes kept (as WTF-8), integers limited to the int64/uint64 range. Throws an input
// Error with line:column on malformed text.
Json parse(std::string_view text);

// json.dumps(value, sort_keys=True[, indent=N]) with ensure_ascii and Python float repr.
// Without indent the separators are ", " and ": ", as in Python's default.
std::string dumps(const Json& value, std::optional<int> indent = std::nullopt);

// repr(float) as CPython prints it: shortest round-trip digits, "1e-05", "500000.0", "inf".
std::string float_repr(double value);

}  // namespace neuron_cache::pyjson
