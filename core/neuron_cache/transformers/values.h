// What the config programs (program.h) do with a Value, which may be a config instance rather
// than plain data: truth, attributes, subscripts, iteration, comparison operators, isinstance(),
// the builtins and the methods of str, list and dict they call. python.h holds the rules for plain
// data; this file adds the config objects and the calls, so the interpreter keeps only the
// walking of the program.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/transformers/config_object.h"
#include "neuron_cache/transformers/python.h"

namespace neuron_cache::transformers {

inline Value plain(Json json) {
  return Value{std::move(json), nullptr};
}
// The plain data of `value`; PythonError for a config instance.
const Json& data(const Value& value);
bool truthy_value(const Value& value);

// The position of `key` (an int, negative from the end) in `list`; IndexError outside it.
size_t index_of(const Json& list, const Json& key);
// container[key] = value for a dict (str keys) or a list (int index, negative from the end).
void store_item(Json& container, const Json& key, Json value);
// container[key] for a dict, a list or a str.
Json subscript(const Json& container, const Json& key);
// The items `for x in value` visits: a list's items, a dict's keys, a str's characters.
Json iterable(const Value& value);

// getattr(object, name), AttributeError when it has none; attribute_of also for plain data.
Value attribute(const Object& object, const std::string& name);
Value attribute_of(const Value& owner, const std::string& name);

// Python's ast names: "Not", "USub", "UAdd", "Invert"; "Eq", "Lt", "In", "Is", ...
Json unary(const std::string& op, const Value& operand);
bool compare_one(const std::string& op, const Value& a, const Value& b);
// isinstance(value, types) for the type names the programs use ("dict", "PretrainedConfig", ...).
Json isinstance(const Value& value, const Json& types);

// range, len, int, bool, float, str, list, getattr.
Value builtin(const std::string& name, const std::vector<Value>& args);
// list.append and dict.pop, which change `target` in place.
Json mutate(Json& target, const std::string& name, const std::vector<Value>& args);
// str.lower(), str.strip(), str.split(separator).
Json string_method(const std::string& text, const std::string& name,
                   const std::vector<Value>& args);

}  // namespace neuron_cache::transformers
