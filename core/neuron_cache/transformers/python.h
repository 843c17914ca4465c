// Python's semantics for the values a transformers config holds (None, bool, int, float, str,
// list, dict with str keys), on JSON values: what `==`, truth, arithmetic and comparison mean
// there. The config programs (program.h) compute with these, so a derived attribute comes out
// as CPython computes it: 4096 // 32 is the int 128, 1e-05 stays a float, True == 1.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::transformers {

using Json = pyjson::Json;

// What Python would raise (TypeError, ValueError, KeyError, ...), or a bound the tool sets on a
// hostile config (a 2**40-layer list): transformers fails on it, or would take unbounded work.
class PythonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

bool truthy(const Json& value);
// Python ==: numbers compare by value across bool/int/float, containers element-wise.
bool equal(const Json& a, const Json& b);
// a < b for numbers and strings (TypeError otherwise).
bool less(const Json& a, const Json& b);
bool is_int(const Json& value);  // int or bool, as isinstance(x, int)
// The int value of an int or bool; PythonError for other values.
int64_t as_int(const Json& value);
// +, -, *, /, //, %, ** as Python's ast names them ("Add", "FloorDiv", ...).
Json binop(const std::string& op, const Json& a, const Json& b);
// `needle in haystack` for a list, a dict (its keys) or a str.
bool contains(const Json& haystack, const Json& needle);
// Python's type name of a value, for messages.
std::string type_name(const Json& value);
// str(x) for the values str() meets in configs (str, int, bool, None, float).
std::string str(const Json& value);
// str.strip() with no argument: the ASCII whitespace around `text` removed.
std::string strip(const std::string& text);
// int(x): ints, bools, floats (truncated) and decimal text (spaces around allowed).
Json to_int(const Json& value);

// The most elements one list a config program builds may hold: transformers builds per-layer
// lists; no real model has near this many layers.
inline constexpr int64_t kMaxListLength = 1 << 16;

}  // namespace neuron_cache::transformers
