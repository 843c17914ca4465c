// A transformers config instance and what PretrainedConfig does with it: attribute access
// through `attribute_map` and the base's properties, `to_dict()`, `to_diff_dict()` and
// `get_text_config()`, as transformers' configuration_utils.py defines them. The per-class part
// (what `__init__` sets) is data: program.h runs it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/transformers/config_table.h"
#include "neuron_cache/transformers/python.h"

namespace neuron_cache::transformers {

struct Object;
using ObjectPtr = std::shared_ptr<Object>;

// A value a config program handles: plain data, or a config instance (a composite model's
// text_config once built).
struct Value {
  Json json;
  ObjectPtr object;
};

struct Object {
  const Table* table = nullptr;
  const ClassInfo* cls = nullptr;
  std::map<std::string, Value> attributes;  // the instance's __dict__
};

// The name an attribute is stored under: attribute_map first, then an aliasing property.
std::string stored_name(const Object& object, const std::string& name);
// getattr(object, name), or nothing where Python raises AttributeError.
std::optional<Value> get_attribute(const Object& object, const std::string& name);
// setattr(object, name, value) through attribute_map and the base's property setters.
void set_attribute(Object& object, const std::string& name, Value value);

// config.to_dict(), config.to_diff_dict(), config.get_text_config() of transformers.
Json to_dict(const Object& object);
Json to_diff_dict(const Object& object);
// The text config, or the config itself; PythonError when two candidates exist, or the only one
// is plain data rather than a config (transformers then fails too).
ObjectPtr get_text_config(const ObjectPtr& object);

// The attributes get_text_config() looks for, in its order: a composite model's text config.
const std::vector<std::string>& text_config_names();

// The member names whose dicts have int keys in Python (id2label, pruned_heads): json.dumps
// sorts those keys as ints.
const std::set<std::string>& int_keyed_members();

}  // namespace neuron_cache::transformers
