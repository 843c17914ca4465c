// The configuration tables of the transformers releases optimum-neuron hashes configs with:
// for each supported config class, its `__init__` as a program, its signature defaults and what
// `cls().to_dict()` gives; for PretrainedConfig, its defaults. tables/generate.py writes them from
// transformers' own source (tables/transformers-<version>.json); the build embeds them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::transformers {

using Json = pyjson::Json;

struct ClassInfo {
  std::string name;                                     // "LlamaConfig"
  std::string model_type;                               // "llama"
  std::map<std::string, std::string> attribute_map;     // read/written under another name
  std::map<std::string, std::string> property_aliases;  // properties that alias an attribute
  std::map<std::string, std::string> sub_configs;       // attribute -> model type ("": any)
  bool has_no_defaults_at_init = false;
  std::vector<std::pair<std::string, Json>> params;  // __init__'s keyword parameters, defaults
  Json body;                                         // the __init__ program (program.h)
  Json methods;                                      // name -> {params, body}
  Json defaults;                                     // cls().to_dict() as transformers gave it
};

struct BaseInfo {
  std::string dtype_attribute;  // "dtype" (4.56+) or "torch_dtype"
  std::vector<std::pair<std::string, Json>> params;
  Json generation_defaults;  // PretrainedConfig._get_global_generation_defaults()
  Json defaults;             // PretrainedConfig().to_dict() without transformers_version
};

struct Table {
  std::string version;  // transformers.__version__ of the tree: "4.57.0.dev0"
  std::string commit;
  BaseInfo base;
  std::map<std::string, std::string> model_types;  // CONFIG_MAPPING: model type -> class
  std::map<std::string, ClassInfo> classes;

  const ClassInfo* class_named(const std::string& name) const;
  const ClassInfo* class_of_type(const std::string& model_type) const;
  // "4.57" of "4.57.0.dev0".
  std::string release() const;
};

// Every embedded table, newest release first. Parsed once.
const std::vector<Table>& tables();

// A table from its JSON text (tests load the checked-in files directly).
Table parse_table(const std::string& text);

}  // namespace neuron_cache::transformers
