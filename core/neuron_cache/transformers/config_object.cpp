#include "neuron_cache/transformers/config_object.h"

namespace neuron_cache::transformers {
namespace {

const Value* find(const Object& object, const std::string& name) {
  auto it = object.attributes.find(name);
  return it == object.attributes.end() ? nullptr : &it->second;
}

Value plain(Json json) {
  return Value{std::move(json), nullptr};
}

Json json_of(const Object& object, const std::string& name) {
  const Value* value = find(object, name);
  return value == nullptr || value->object ? Json() : value->json;
}

bool dtype_is_renamed(const Object& object) {
  return object.table->base.dtype_attribute == "dtype";
}

// PretrainedConfig's read-side properties; nothing for other names.
std::optional<Value> base_property(const Object& object, const std::string& name) {
  if (name == "num_labels") {
    const Value* labels = find(object, "id2label");
    if (labels == nullptr || !labels->json.is_object()) {
      throw PythonError("TypeError: len() of the config's id2label, which is not a dict");
    }
    return plain(static_cast<int64_t>(labels->json.size()));
  }
  if (name == "output_attentions") return plain(json_of(object, "_output_attentions"));
  if (name == "name_or_path") return plain(json_of(object, "_name_or_path"));
  if (name == "use_return_dict") {
    return plain(truthy(json_of(object, "return_dict")) && !truthy(json_of(object, "torchscript")));
  }
  if (name == "_attn_implementation") {
    return plain(json_of(object, "_attn_implementation_internal"));
  }
  if (name == "torch_dtype" && dtype_is_renamed(object)) return plain(json_of(object, "dtype"));
  return std::nullopt;
}

void create_id_label_maps(Object& object, const Json& count) {
  int64_t n = as_int(count);
  if (n > kMaxListLength) throw PythonError("num_labels beyond " + std::to_string(kMaxListLength));
  Json id2label = Json::object();
  Json label2id = Json::object();
  for (int64_t i = 0; i < n; ++i) {
    id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    label2id["LABEL_" + std::to_string(i)] = i;
  }
  object.attributes["id2label"] = plain(std::move(id2label));
  object.attributes["label2id"] = plain(std::move(label2id));
}

void set_attn_implementation(Object& object, const Value& value) {
  Json current = json_of(object, "_attn_implementation_internal");
  const Json& given = value.json;
  object.attributes["_attn_implementation_internal"] =
      plain(given.is_object() ? given.value("", current) : given);
  for (const auto& [key, type] : object.cls->sub_configs) {
    auto sub = object.attributes.find(key);
    if (sub == object.attributes.end() || !sub->second.object) continue;
    Json sub_current = json_of(*sub->second.object, "_attn_implementation_internal");
    set_attribute(*sub->second.object, "_attn_implementation",
                  plain(given.is_object() ? given.value(key, sub_current) : given));
  }
}

void set_output_attentions(Object& object, const Value& value) {
  if (truthy(value.json) && json_of(object, "_attn_implementation_internal").is_null()) {
    object.attributes["_attn_implementation_internal"] = plain("eager");
  }
  if (truthy(value.json) && json_of(object, "_attn_implementation_internal") != Json("eager")) {
    throw PythonError("ValueError: output_attentions needs attn_implementation 'eager'");
  }
  object.attributes["_output_attentions"] = value;
}

// PretrainedConfig's write-side properties; false for other names.
bool set_base_property(Object& object, const std::string& name, const Value& value) {
  if (name == "num_labels") {
    const Value* labels = find(object, "id2label");
    if (labels == nullptr || labels->json.is_null() ||
        !equal(base_property(object, "num_labels")->json, value.json)) {
      create_id_label_maps(object, value.json);
    }
    return true;
  }
  if (name == "output_attentions") {
    set_output_attentions(object, value);
    return true;
  }
  if (name == "name_or_path") {
    object.attributes["_name_or_path"] = plain(str(value.json));
    return true;
  }
  if (name == "use_return_dict") throw PythonError("AttributeError: can't set use_return_dict");
  if (name == "_attn_implementation") {
    set_attn_implementation(object, value);
    return true;
  }
  if (name == "torch_dtype" && dtype_is_renamed(object)) {
    object.attributes["dtype"] = value;
    return true;
  }
  return false;
}

// _remove_keys_not_serialized, on a dict and the dicts in it.
void remove_keys_not_serialized(Json& d, bool quantized) {
  if (quantized) d.erase("_pre_quantization_dtype");
  d.erase("_auto_class");
  if (d.contains("_output_attentions")) {
    Json value = d["_output_attentions"];
    d.erase("_output_attentions");
    d["output_attentions"] = value;
  }
  for (const char* key : {"_commit_hash", "_attn_implementation_internal", "base_model_tp_plan",
                          "base_model_pp_plan"}) {
    d.erase(key);
  }
  for (auto& [key, value] : d.items()) {
    if (value.is_object()) remove_keys_not_serialized(value, quantized);
  }
}

Json recursive_diff_dict(const Json& a, const Json& b, const Object* object) {
  if (!a.is_object()) throw PythonError("AttributeError: a sub-config that is not a dict");
  Json defaults = object != nullptr ? object->cls->defaults : Json::object();
  Json diff = Json::object();
  for (const auto& [key, value] : a.items()) {
    std::optional<Value> attribute;
    if (object != nullptr) attribute = get_attribute(*object, key);
    if (attribute && attribute->object && b.contains(key) && b[key].is_object()) {
      diff[key] = recursive_diff_dict(value, b[key], attribute->object.get());
    } else if (!b.contains(key)) {
      diff[key] = value;
    } else if (!defaults.contains(key)) {
      throw PythonError("KeyError: '" + key + "' (recursive_diff_dict)");
    } else if (!equal(value, defaults[key])) {
      diff[key] = value;
    }
  }
  return diff;
}

bool is_nested(const Object& object, const std::string& key, const Json& class_defaults) {
  std::optional<Value> attribute = get_attribute(object, key);
  bool built = attribute && attribute->object && class_defaults.contains(key) &&
               class_defaults[key].is_object();
  return built || object.cls->sub_configs.count(key) > 0;
}

bool differs_from_defaults(const std::string& key, const Json& value, const Json& base,
                           const Json& class_defaults) {
  if (!base.contains(key) || key == "transformers_version" || key == "vocab_file") return true;
  if (!equal(value, base[key])) return true;
  return class_defaults.contains(key) && !equal(value, class_defaults[key]);
}

}  // namespace

std::string stored_name(const Object& object, const std::string& name) {
  auto mapped = object.cls->attribute_map.find(name);
  std::string key = mapped == object.cls->attribute_map.end() ? name : mapped->second;
  auto alias = object.cls->property_aliases.find(key);
  return alias == object.cls->property_aliases.end() ? key : alias->second;
}

std::optional<Value> get_attribute(const Object& object, const std::string& name) {
  std::string key = stored_name(object, name);
  if (object.cls->property_aliases.count(key) == 0) {
    if (auto property = base_property(object, key)) return property;
  }
  if (const Value* value = find(object, key)) return *value;
  if (key == "model_type") return plain(object.cls->model_type);
  return std::nullopt;
}

void set_attribute(Object& object, const std::string& name, Value value) {
  auto mapped = object.cls->attribute_map.find(name);
  std::string key = mapped == object.cls->attribute_map.end() ? name : mapped->second;
  auto alias = object.cls->property_aliases.find(key);
  if (alias != object.cls->property_aliases.end()) {
    object.attributes[alias->second] = std::move(value);
    return;
  }
  if (set_base_property(object, key, value)) return;
  object.attributes[key] = std::move(value);
}

Json to_dict(const Object& object) {
  Json output = Json::object();
  for (const auto& [key, value] : object.attributes) {
    if (value.object) {
      Json nested = to_dict(*value.object);
      nested.erase("transformers_version");
      output[key] = std::move(nested);
    } else {
      output[key] = value.json;
    }
  }
  output["model_type"] = object.cls->model_type;
  output["transformers_version"] = object.table->version;
  bool quantized = find(object, "quantization_config") != nullptr;
  remove_keys_not_serialized(output, quantized);
  if (quantized) output["quantization_config"] = json_of(object, "quantization_config");
  return output;
}

Json to_diff_dict(const Object& object) {
  const Json& base = object.table->base.defaults;
  Json class_defaults = object.cls->has_no_defaults_at_init ? Json::object() : object.cls->defaults;
  Json result = Json::object();
  const Json config = to_dict(object);
  for (const auto& [key, value] : config.items()) {
    if (is_nested(object, key, class_defaults)) {
      std::optional<Value> attribute = get_attribute(object, key);
      const Object* nested = attribute && attribute->object ? attribute->object.get() : nullptr;
      Json diff = recursive_diff_dict(value, base, nested);
      if (value.contains("model_type")) diff["model_type"] = value["model_type"];
      result[key] = std::move(diff);
    } else if (differs_from_defaults(key, value, base, class_defaults)) {
      result[key] = value;
    }
  }
  bool quantized = find(object, "quantization_config") != nullptr;
  remove_keys_not_serialized(result, quantized);
  result.erase("_name_or_path");
  if (quantized) result["quantization_config"] = json_of(object, "quantization_config");
  return result;
}

ObjectPtr get_text_config(const ObjectPtr& object) {
  std::vector<std::string> found;
  for (const std::string& name : text_config_names()) {
    std::optional<Value> value = get_attribute(*object, name);
    if (value && (value->object || !value->json.is_null())) found.push_back(name);
  }
  if (found.size() > 1) {
    throw PythonError("ValueError: several text configs (" + found[0] + ", " + found[1] +
                      "): get_text_config() is ambiguous");
  }
  if (found.empty()) return object;
  std::optional<Value> text = get_attribute(*object, found[0]);
  if (!text->object) {
    throw PythonError("AttributeError: the config's " + found[0] + " is a " +
                      type_name(text->json) + ", not a config");
  }
  return text->object;
}

const std::vector<std::string>& text_config_names() {
  static const std::vector<std::string> kNames = {"text_encoder", "decoder", "generator",
                                                  "text_config"};
  return kNames;
}

const std::set<std::string>& int_keyed_members() {
  static const std::set<std::string> kMembers = {"id2label", "pruned_heads"};
  return kMembers;
}

}  // namespace neuron_cache::transformers
