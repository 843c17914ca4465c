// The public cache repo's inference-cache-config/*.json files, read into a Manifest.
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/manifest/manifest.h"

namespace neuron_cache::manifest {
namespace {

using pyjson::Json;

constexpr std::string_view kKeys =
    "batch_size, sequence_length, tensor_parallel_size, num_cores, instance_type, task, dtype, "
    "auto_cast_type";
const std::set<std::string, std::less<>> kKeySet = {
    "batch_size", "sequence_length", "tensor_parallel_size", "num_cores", "instance_type",
    "task",       "dtype",           "auto_cast_type"};

// JSON text has no positions once parsed, so a configuration is named by model and index.
struct JsonPlace {
  const std::string& file;
  const std::string& model_id;
  size_t index;
  std::string prefix() const {
    return file + ": \"" + model_id + "\"[" + std::to_string(index) + "]: ";
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw input_error(prefix() + message);
  }
};

std::int64_t positive(const JsonPlace& at, const Json& item, const std::string& key) {
  const Json& value = item.at(key);
  if (!value.is_number_integer() || value.get<std::int64_t>() <= 0) {
    at.fail("\"" + key + "\" must be a positive integer, got " + pyjson::dumps(value));
  }
  return value.get<std::int64_t>();
}

std::optional<std::string> optional_string(const JsonPlace& at, const Json& item,
                                           const std::string& key) {
  if (!item.contains(key)) return std::nullopt;
  const Json& value = item.at(key);
  if (!value.is_string() || value.get<std::string>().empty()) {
    at.fail("\"" + key + "\" must be a non-empty string, got " + pyjson::dumps(value));
  }
  return value.get<std::string>();
}

std::int64_t num_cores(const JsonPlace& at, const Json& item) {
  bool has_tp = item.contains("tensor_parallel_size");
  bool has_cores = item.contains("num_cores");
  if (!has_tp && !has_cores) {
    at.fail("missing \"tensor_parallel_size\" (or its legacy alias \"num_cores\")");
  }
  std::int64_t tp = has_tp ? positive(at, item, "tensor_parallel_size") : 0;
  std::int64_t cores = has_cores ? positive(at, item, "num_cores") : 0;
  if (has_tp && has_cores && tp != cores) {
    at.fail(
        "\"tensor_parallel_size\" and \"num_cores\" are the same setting with different "
        "values; give only one");
  }
  return has_tp ? tp : cores;
}

std::string precision(const JsonPlace& at, const Json& item) {
  std::optional<std::string> dtype = optional_string(at, item, "dtype");
  std::optional<std::string> auto_cast = optional_string(at, item, "auto_cast_type");
  std::string given = dtype.value_or(auto_cast.value_or("bf16"));
  std::optional<std::string> normalized = normalize_precision(given);
  if (!normalized) {
    at.fail("unknown precision \"" + given +
            "\" (expected one of: bf16, fp16, fp32, bfloat16, float16, float32)");
  }
  if (dtype && auto_cast && normalize_precision(*auto_cast) != normalized) {
    at.fail("\"dtype\" and \"auto_cast_type\" disagree; give only one");
  }
  return *normalized;
}

Configuration read_item(const JsonPlace& at, const Json& item,
                        const std::optional<std::string>& default_instance_type) {
  if (!item.is_object()) at.fail("a configuration must be an object, got " + pyjson::dumps(item));
  for (const auto& [key, value] : item.items()) {
    if (!kKeySet.contains(key)) {
      at.fail("unknown key \"" + key + "\" (expected one of: " + std::string(kKeys) + ")");
    }
  }
  for (const char* key : {"batch_size", "sequence_length"}) {
    if (!item.contains(key)) at.fail(std::string("missing \"") + key + "\" (a positive integer)");
  }
  Configuration c;
  c.model_id = at.model_id;
  c.task = optional_string(at, item, "task").value_or("text-generation");
  if (!hub_names::is_identifier(c.task)) {
    at.fail("task \"" + c.task + "\" is not a task (" + std::string(hub_names::kIdentifierRule) +
            "): check the value");
  }
  c.batch_size = positive(at, item, "batch_size");
  c.sequence_length = positive(at, item, "sequence_length");
  c.num_cores = num_cores(at, item);
  c.precision = precision(at, item);
  std::optional<std::string> type = optional_string(at, item, "instance_type");
  if (!type) type = default_instance_type;
  if (!type) at.fail("missing \"instance_type\" (one of: trn1, trn1n, trn2, inf2)");
  if (!is_known_instance_type(*type)) {
    at.fail("unknown instance type \"" + *type + "\" (expected one of: trn1, trn1n, trn2, inf2)");
  }
  c.instance_type = *type;
  c.name = default_name(c);
  c.source = {at.file, 0, 0};
  return c;
}

}  // namespace

Manifest parse_inference_cache_config(std::string_view text, const std::string& file,
                                      const std::optional<std::string>& default_instance_type) {
  Json root;
  try {
    root = pyjson::parse(text);
  } catch (const Error& e) {
    throw input_error(file + ": " + e.what());
  }
  if (!root.is_object()) {
    throw input_error(file +
                      ": an inference-cache-config file must be a JSON object "
                      "{\"<model_id>\": [configurations]}");
  }
  Manifest m;
  m.path = file;
  std::map<std::string, std::string> first_place;
  for (const auto& [model_id, list] : root.items()) {
    if (model_id.empty()) throw input_error(file + ": a model id is empty");
    hub_names::require_repo_id(model_id, file + ": the model id", "check the name");
    if (!list.is_array()) {
      throw input_error(file + ": \"" + model_id + "\" must be a list of configurations");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      JsonPlace at{file, model_id, i};
      Configuration c = read_item(at, list[i], default_instance_type);
      std::string place = "\"" + model_id + "\"[" + std::to_string(i) + "]";
      auto [it, inserted] = first_place.emplace(c.name, place);
      if (!inserted) at.fail("the same configuration as " + it->second + " (" + c.name + ")");
      m.configurations.push_back(std::move(c));
    }
  }
  return m;
}

}  // namespace neuron_cache::manifest
