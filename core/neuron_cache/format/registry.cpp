#include "neuron_cache/format/registry.h"

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"

namespace neuron_cache::registry {
namespace {

const char* const kUnderscoreKeys[] = {"_entry_class", "_model_id", "_task"};

bool is_hex(std::string_view s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "0.4.6.dev4", "0.0.18": digits, a dot, digits, then anything.
bool looks_like_version(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == 0 || i + 1 >= s.size() || s[i] != '.') return false;
  return is_digit(s[i + 1]);
}

std::string join(const std::vector<std::string>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (i > from ? "/" : "") + parts[i];
  return out;
}

Json without_reserved_keys(const Json& entry) {
  Json config = entry;
  for (const char* key : kUnderscoreKeys) config.erase(key);
  config.erase("neuron");
  return config;
}

Json multi_arch_input(const Json& entry) {
  Json configs = Json::object();
  for (const auto& [component, value] : entry.items()) {
    if (component == "_entry_class" || component == "_model_id" || component == "_task") continue;
    Json config = value;
    if (config.is_object()) config.erase("neuron");
    configs[component] = config;
  }
  std::string model_type;
  if (configs.contains("unet")) {
    model_type = "stable-diffusion";
  } else if (configs.contains("transformer")) {
    model_type = "diffusion-transformer";
  } else {
    throw input_error(
        "a MultiModelCacheEntry needs a \"unet\" or a \"transformer\" component: optimum-neuron "
        "indexes only stable-diffusion and diffusion-transformer pipelines");
  }
  return Json{{"model_type", model_type}, {"configs", configs}};
}

}  // namespace

void validate_entry(const Json& entry) {
  if (!entry.is_object()) throw input_error("a registry entry must be a JSON object");
  if (!entry.contains("_entry_class")) {
    throw input_error(
        "the entry has no \"_entry_class\": it is not a current registry entry (optimum-neuron "
        ">= 0.2.0 adds _entry_class, _model_id and _task)");
  }
  const Json& entry_class = entry["_entry_class"];
  if (entry_class != kSingleModel && entry_class != kMultiModel) {
    throw input_error(
        "\"_entry_class\" must be \"SingleModelCacheEntry\" or "
        "\"MultiModelCacheEntry\", not " +
        pyjson::dumps(entry_class));
  }
  if (!entry.contains("_model_id") || !entry["_model_id"].is_string()) {
    throw input_error("the entry needs \"_model_id\" as a string (the Hub model id)");
  }
  if (!entry.contains("_task") || !(entry["_task"].is_string() || entry["_task"].is_null())) {
    throw input_error("the entry needs \"_task\" as a string (or null for multi-model entries)");
  }
  if (entry_class == kSingleModel) {
    if (!entry.contains("model_type") || !entry["model_type"].is_string()) {
      throw input_error("a SingleModelCacheEntry needs \"model_type\" as a string");
    }
  }
}

std::string serialize(const Json& entry) {
  validate_entry(entry);
  return pyjson::dumps(entry, 2);
}

std::string entry_hash(std::string_view serialized_text) {
  return sha512_hex(serialized_text).substr(0, 20);
}

Json arch_input(const Json& entry) {
  validate_entry(entry);
  if (entry["_entry_class"] == kMultiModel) return multi_arch_input(entry);
  return Json{{"model_type", entry["model_type"]},
              {"task", entry["_task"]},
              {"config", without_reserved_keys(entry)}};
}

std::string arch_digest(const Json& entry) {
  return sha256_hex(pyjson::dumps(arch_input(entry)));
}

const std::vector<std::string>& cache_white_list() {
  static const std::vector<std::string> kKeys = {"_name_or_path",
                                                 "transformers_version",
                                                 "_diffusers_version",
                                                 "eos_token_id",
                                                 "bos_token_id",
                                                 "pad_token_id",
                                                 "torchscript",
                                                 "torch_dtype",
                                                 "_commit_hash",
                                                 "sample_size",
                                                 "projection_dim",
                                                 "_use_default_values",
                                                 "_attn_implementation_autoset",
                                                 "return_dict"};
  return kKeys;
}

std::string primary_path(std::string_view optimum_version, std::string_view digest,
                         std::string_view hash) {
  return join({std::string(layout::kRegistryDir), std::string(optimum_version), std::string(digest),
               std::string(hash) + ".json"},
              0, 4);
}

std::string alias_path(std::string_view optimum_version, std::string_view model_type,
                       std::string_view model_id, std::string_view hash) {
  return join({std::string(layout::kRegistryDir), std::string(optimum_version),
               std::string(model_type), std::string(model_id), std::string(hash) + ".json"},
              0, 5);
}

std::string_view shape_name(PathShape shape) {
  switch (shape) {
    case PathShape::Initial:
      return "initial (0_REGISTRY/<model_id>)";
    case PathShape::ByMode:
      return "by mode (optimum-neuron 0.0.19-0.1.x)";
    case PathShape::ByModelType:
      return "by model type (optimum-neuron 0.0.18, 0.2.0-0.4.4, alias)";
    case PathShape::ByArch:
      return "by architecture digest (optimum-neuron >= 0.4.5)";
  }
  return "";
}

std::optional<Location> locate(std::string_view path) {
  std::vector<std::string> parts = layout::split_path(path);
  const std::string& file = parts.back();
  if (parts.size() < 2 || !file.ends_with(".json") || file.size() <= 5) return std::nullopt;
  for (const auto& part : parts) {
    if (part.empty() || part == "." || part == "..") return std::nullopt;
  }
  Location where;
  where.hash = file.substr(0, file.size() - 5);
  size_t n = parts.size();
  if (!looks_like_version(parts[0])) {
    if (n > 3) return std::nullopt;
    where.shape = PathShape::Initial;
    where.model_id = join(parts, 0, n - 1);
    return where;
  }
  where.optimum_version = parts[0];
  if (n == 3 && is_hex(parts[1], 64)) {
    where.shape = PathShape::ByArch;
    where.arch_digest = parts[1];
    return where;
  }
  size_t type_index = 1;
  where.shape = PathShape::ByModelType;
  if ((parts[1] == "training" || parts[1] == "inference") && (n == 5 || n == 6)) {
    where.shape = PathShape::ByMode;
    where.mode = parts[1];
    type_index = 2;
  }
  size_t id_parts = n - 2 - type_index;
  if (id_parts < 1 || id_parts > 2) return std::nullopt;
  where.model_type = parts[type_index];
  where.model_id = join(parts, type_index + 1, n - 1);
  return where;
}

Record read_record(const Location& location, std::string_view file_text) {
  Json doc = pyjson::parse(file_text);
  if (!doc.is_object()) throw input_error("a registry file must hold a JSON object");
  Record record;
  record.location = location;
  record.hash_matches = entry_hash(file_text) == location.hash;
  record.model_id = location.model_id;
  if (doc.contains("_entry_class") && doc["_entry_class"].is_string()) {
    record.entry_class = doc["_entry_class"].get<std::string>();
  }
  if (doc.contains("_model_id") && doc["_model_id"].is_string()) {
    record.model_id = doc["_model_id"].get<std::string>();
  }
  record.neuron = doc.contains("neuron") ? doc["neuron"] : Json();
  if (doc.contains("_task") && doc["_task"].is_string()) {
    record.task = doc["_task"].get<std::string>();
  } else if (record.neuron.is_object() && record.neuron.contains("task") &&
             record.neuron["task"].is_string()) {
    record.task = record.neuron["task"].get<std::string>();  // legacy texts kept it there
  }
  record.config = without_reserved_keys(doc);
  return record;
}

}  // namespace neuron_cache::registry
