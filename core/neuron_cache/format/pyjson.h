// Python-compatible JSON: the one place that reproduces CPython's json module byte for byte.
// Registry files, arch digests and compile_flags.json are hashed, so their text must be exactly
// what json.dumps writes; no JSON library prints that format.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::pyjson {

using Json = nlohmann::json;

// What one JSON text may hold: THE bound of every JSON the tool reads (API answers, index
// shards, registry files, its own memos), whatever its origin. Each kind of text sets its own
// (kApiAnswer, ...); the bytes should also be capped while the text streams in, before it is
// whole. A text beyond a limit is refused like malformed text, before its DOM grows.
struct Limits {
  size_t max_bytes = 64u << 20;
  size_t max_depth = 64;
  size_t max_values = 4'000'000;  // every value: objects, arrays, strings, numbers, literals
};
// An API answer: a tree page, paths-info, a commit's answer, an error body.
inline constexpr Limits kApiAnswer{16u << 20, 64, 1'000'000};
// A file the tool keeps for itself (memos, kept answers).
inline constexpr Limits kMemo{16u << 20, 64, 1'000'000};

// Parses like json.loads: NaN/Infinity/-Infinity literals, the last duplicate key wins, lone
// surrogate escapes kept (as WTF-8), integers limited to the int64/uint64 range. Throws an input
// Error with line:column on malformed text, or one naming the limit a text goes beyond.
Json parse(std::string_view text, const Limits& limits = {});
// parse(), or nothing for text that is malformed or beyond the limits.
std::optional<Json> parse_or_nothing(std::string_view text, const Limits& limits);
// A JSON file the tool keeps below a root (sys::RootedFile's rule: regular file, no symlink,
// read bounded by limits.max_bytes), or nothing when it is missing, unreadable or not JSON.
std::optional<Json> read_kept(const sys::RootedFile& file, const Limits& limits = kMemo);

// json.dumps(value, sort_keys=True[, indent=N]) with ensure_ascii and Python float repr.
// Without indent the separators are ", " and ": ", as in Python's default. The dicts stored
// under a member named in `int_keyed` (transformers' id2label) had int keys in Python, which
// sort_keys orders as ints: "2" before "10".
std::string dumps(const Json& value, std::optional<int> indent = std::nullopt,
                  const std::set<std::string>* int_keyed = nullptr);

// repr(float) as CPython prints it: shortest round-trip digits, "1e-05", "500000.0", "inf".
std::string float_repr(double value);

}  // namespace neuron_cache::pyjson
