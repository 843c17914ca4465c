// A checker for the subset of JSON Schema (2020-12) that
// core/neuron_cache/report/report.schema.json uses: type, const, enum, properties, required,
// items, $ref to #/$defs/..., allOf, anyOf and oneOf; and its annotation `x-every-key-documented`:
// the schema leaves objects open for readers (new keys may come within a format), but the tests
// hold the writer to documenting every key it writes. Returns what does not conform, one line each.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace neuron_cache::testing {

class SchemaCheck {
 public:
  // `as_writer`: every key of an object marked x-every-key-documented must be in the schema (the
  // tool's own reports); false reads as a reader would, ignoring keys it does not know.
  explicit SchemaCheck(nlohmann::json root, bool as_writer = true)
      : root_(std::move(root)), as_writer_(as_writer) {}

  std::vector<std::string> problems(const nlohmann::json& value) const {
    std::vector<std::string> out;
    check(value, root_, "$", out);
    return out;
  }

 private:
  using json = nlohmann::json;

  const json& resolve(const json& schema) const {
    if (!schema.contains("$ref")) return schema;
    std::string ref = schema["$ref"];
    return root_["$defs"][ref.substr(ref.rfind('/') + 1)];
  }

  static bool has_type(const json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") return value.is_number_integer();
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    return type == "null" && value.is_null();
  }

  // The properties a schema and its allOf parts declare.
  std::set<std::string> declared(const json& schema) const {
    std::set<std::string> names;
    if (schema.contains("properties"))
      for (const auto& [name, _] : schema["properties"].items()) names.insert(name);
    if (schema.contains("allOf"))
      for (const auto& part : schema["allOf"]) names.merge(declared(resolve(part)));
    return names;
  }

  void check(const json& value, const json& raw, const std::string& where,
             std::vector<std::string>& out) const {
    const json& schema = resolve(raw);
    for (const char* keyword : {"oneOf", "anyOf"}) {
      if (!schema.contains(keyword)) continue;
      size_t matches = 0;
      std::vector<std::string> closest;
      for (const auto& option : schema[keyword]) {
        std::vector<std::string> trial;
        check(value, option, where, trial);
        matches += trial.empty();
        if (closest.empty() || (!trial.empty() && trial.size() < closest.size())) closest = trial;
      }
      if (matches == 0) out.insert(out.end(), closest.begin(), closest.end());
      if (matches > 1 && std::string(keyword) == "oneOf")
        out.push_back(where + ": matches " + std::to_string(matches) + " of oneOf");
      return;
    }
    if (schema.contains("allOf"))
      for (const auto& part : schema["allOf"]) check(value, part, where, out);
    if (schema.contains("const") && value != schema["const"])
      out.push_back(where + ": is " + value.dump() + ", not " + schema["const"].dump());
    if (schema.contains("enum") &&
        std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end())
      out.push_back(where + ": " + value.dump() + " is not one of " + schema["enum"].dump());
    if (schema.contains("type")) {
      json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
      bool any = false;
      for (const auto& t : types) any = any || has_type(value, t.get<std::string>());
      if (!any)
        out.push_back(where + ": " + value.dump().substr(0, 80) + " is not " + types.dump());
    }
    if (value.is_object()) check_object(value, schema, where, out);
    if (value.is_array() && schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i)
        check(value[i], schema["items"], where + "[" + std::to_string(i) + "]", out);
  }

  void check_object(const json& value, const json& schema, const std::string& where,
                    std::vector<std::string>& out) const {
    if (schema.contains("required"))
      for (const auto& name : schema["required"])
        if (!value.contains(name.get<std::string>()))
          out.push_back(where + ": lacks \"" + name.get<std::string>() + "\"");
    auto is_false = [&schema](const char* keyword) {
      return schema.contains(keyword) && schema[keyword] == false;
    };
    bool closed = (as_writer_ && schema.value("x-every-key-documented", false)) ||
                  is_false("additionalProperties") || is_false("unevaluatedProperties");
    // A map ("additionalProperties": {schema}): every value of a name not declared has it.
    const json* others = schema.contains("additionalProperties") &&
                                 schema["additionalProperties"].is_object()
                             ? &schema["additionalProperties"]
                             : nullptr;
    std::set<std::string> names = declared(schema);
    for (const auto& [name, item] : value.items()) {
      if (closed && !names.count(name))
        out.push_back(where + ": \"" + name + "\" is not in the schema");
      if (schema.contains("properties") && schema["properties"].contains(name))
        check(item, schema["properties"][name], where + "." + name, out);
      else if (others)
        check(item, *others, where + "." + name, out);
    }
  }

  json root_;
  bool as_writer_ = true;
};

}  // namespace neuron_cache::testing
