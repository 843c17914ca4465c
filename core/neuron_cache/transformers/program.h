// Runs a config class's `__init__` as the table holds it: the JSON form of its Python AST that
// tables/generate.py wrote (assignments, if/for, comprehensions, the calls transformers' config
// classes make), with PretrainedConfig.__init__ itself modelled here once. This is how a config
// built from a config.json gets the attributes transformers gives it: derived ones (head_dim,
// layer_types), defaulted ones, renamed ones (torch_dtype -> dtype).
#pragma once

#include <string>

#include "neuron_cache/transformers/config_object.h"

namespace neuron_cache::transformers {

// The config's model type has no class in the table (transformers may know it; this release of
// neuron-cache does not): the caller falls back to comparing stored configs.
class UnknownModelType : public PythonError {
 public:
  explicit UnknownModelType(const std::string& model_type)
      : PythonError("model type \"" + model_type + "\" is not in the table"),
        model_type_(model_type) {}
  const std::string& model_type() const { return model_type_; }

 private:
  std::string model_type_;
};

// cls(**kwargs). Throws PythonError where transformers raises (or a bound is passed) and
// UnknownModelType when a sub-config's type is not in the table.
ObjectPtr construct(const Table& table, const ClassInfo& cls, const Json& kwargs);

// AutoConfig.from_pretrained on a config.json's parsed content: the class of its model_type,
// built as PretrainedConfig.from_dict builds it.
ObjectPtr from_config_json(const Table& table, const Json& config);

}  // namespace neuron_cache::transformers
