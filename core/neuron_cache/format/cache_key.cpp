#include "neuron_cache/format/cache_key.h"

#include <cctype>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"

namespace neuron_cache::cache_key {
namespace {

using pyjson::Json;

pyjson::Json optional_string(const std::optional<std::string>& value) {
  return value ? Json(*value) : Json(nullptr);
}

const Json& field(const Json& object, const char* name) {
  if (!object.is_object() || !object.contains(name)) {
    throw input_error(std::string("cache key inputs: missing field \"") + name + "\"");
  }
  return object.at(name);
}

std::string string_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_string()) {
    throw input_error(std::string("cache key inputs: \"") + name + "\" is not a string");
  }
  return value.get<std::string>();
}

std::int64_t int_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (!value.is_number_integer()) {
    throw input_error(std::string("cache key inputs: \"") + name + "\" is not an integer");
  }
  return value.get<std::int64_t>();
}

std::optional<std::string> nullable_field(const Json& object, const char* name) {
  const Json& value = field(object, name);
  if (value.is_null()) return std::nullopt;
  return string_field(object, name);
}

std::string show(const std::optional<std::string>& value) {
  return value ? *value : "none";
}

std::string join(const std::vector<std::string>& words) {
  if (words.empty()) return "(none)";
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

void read_flags(const Json& compiler, KeyInputs& in) {
  const Json& flags = field(compiler, "flags");
  if (!flags.is_array()) throw input_error("cache key inputs: \"flags\" is not a list");
  for (const Json& flag : flags) {
    if (!flag.is_string()) throw input_error("cache key inputs: a flag is not a string");
    in.flags.push_back(flag.get<std::string>());
  }
}

KeyInputs profile_from_json(const Json& json) {
  KeyInputs in;
  in.profile = string_field(json, "profile");
  if (auto problem = profile_name_problem(*in.profile)) {
    throw input_error("cache key inputs: " + *problem);
  }
  const Json& compiler = field(json, "compiler");
  in.compiler_version = string_field(compiler, "version");
  read_flags(compiler, in);
  return in;
}

}  // namespace

std::optional<std::string> profile_name_problem(const std::string& name) {
  if (name.empty()) return "a profile name is empty";
  if (name.size() > kMaxProfileName) {
    return "the profile name \"" + name.substr(0, 20) + "...\" is longer than " +
           std::to_string(kMaxProfileName) + " characters";
  }
  if (!std::isalnum(static_cast<unsigned char>(name.front()))) {
    return "the profile name \"" + name + "\" does not start with a letter or digit";
  }
  for (char ch : name) {
    bool allowed =
        std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
    if (!allowed) {
      return "the profile name \"" + name + "\" has a character other than A-Z a-z 0-9 . _ -";
    }
  }
  return std::nullopt;
}

KeyInputs profile_inputs(const std::string& name, const std::string& compiler_version,
                         std::vector<std::string> flags) {
  KeyInputs in;
  in.profile = name;
  in.compiler_version = compiler_version;
  in.flags = std::move(flags);
  return in;
}

std::string owner_of(const KeyInputs& inputs) {
  return inputs.profile ? "profile " + *inputs.profile : inputs.model_id;
}

bool same_owner(const KeyInputs& a, const KeyInputs& b) {
  return a.profile == b.profile && (a.profile || a.model_id == b.model_id);
}

Json to_json(const KeyInputs& in) {
  if (in.profile) {
    return {{"key_format", kKeyFormat},
            {"profile", *in.profile},
            {"compiler", {{"version", in.compiler_version}, {"flags", in.flags}}}};
  }
  Json model = {{"model_id", in.model_id},
                {"model_type", in.model_type},
                {"task", in.task},
                {"precision", in.precision},
                {"batch_size", in.batch_size},
                {"sequence_length", in.sequence_length}};
  Json compiler = {{"version", in.compiler_version},
                   {"num_cores", in.num_cores},
                   {"target", in.target},
                   {"flags", in.flags}};
  Json environment = {{"checkpoint_revision", optional_string(in.checkpoint_revision)},
                      {"optimum_neuron_version", optional_string(in.optimum_neuron_version)}};
  // Moved in: a copy of each object cost as much as building it (key_of runs per configuration).
  return {{"key_format", kKeyFormat},
          {"model", std::move(model)},
          {"compiler", std::move(compiler)},
          {"environment", std::move(environment)}};
}

KeyInputs from_json(const Json& json) {
  if (int_field(json, "key_format") != kKeyFormat) {
    throw input_error("cache key inputs of another key format: this neuron-cache reads format " +
                      std::to_string(kKeyFormat));
  }
  if (json.contains("profile")) return profile_from_json(json);
  const Json& model = field(json, "model");
  const Json& compiler = field(json, "compiler");
  const Json& environment = field(json, "environment");
  KeyInputs in;
  in.model_id = string_field(model, "model_id");
  in.model_type = string_field(model, "model_type");
  in.task = string_field(model, "task");
  in.precision = string_field(model, "precision");
  in.batch_size = int_field(model, "batch_size");
  in.sequence_length = int_field(model, "sequence_length");
  in.compiler_version = string_field(compiler, "version");
  in.num_cores = int_field(compiler, "num_cores");
  in.target = string_field(compiler, "target");
  read_flags(compiler, in);
  in.checkpoint_revision = nullable_field(environment, "checkpoint_revision");
  in.optimum_neuron_version = nullable_field(environment, "optimum_neuron_version");
  return in;
}

std::string key_of(const KeyInputs& inputs) {
  return sha256_hex(pyjson::dumps(to_json(inputs))).substr(0, 32);
}

std::string target_of(const std::string& instance_type) {
  return instance_type == "trn2" ? "trn2" : "trn1";
}

std::vector<Difference> differences(const KeyInputs& have, const KeyInputs& want) {
  std::vector<Difference> out;
  auto compare = [&out](const char* field, const std::string& a, const std::string& b) {
    if (a != b) out.push_back({field, a, b});
  };
  compare("profile", show(have.profile), show(want.profile));
  compare("model", have.model_id, want.model_id);
  compare("model type", have.model_type, want.model_type);
  compare("task", have.task, want.task);
  compare("compiler", have.compiler_version, want.compiler_version);
  compare("batch size", std::to_string(have.batch_size), std::to_string(want.batch_size));
  compare("sequence length", std::to_string(have.sequence_length),
          std::to_string(want.sequence_length));
  compare("cores", std::to_string(have.num_cores), std::to_string(want.num_cores));
  compare("precision", have.precision, want.precision);
  compare("target", have.target, want.target);
  compare("flags", join(have.flags), join(want.flags));
  compare("revision", show(have.checkpoint_revision), show(want.checkpoint_revision));
  compare("optimum-neuron", show(have.optimum_neuron_version), show(want.optimum_neuron_version));
  return out;
}

}  // namespace neuron_cache::cache_key
