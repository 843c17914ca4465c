#include "neuron_cache/transformers/config_table.h"

#include <algorithm>
#include <cstdio>

#include "neuron_cache/error.h"

namespace neuron_cache::transformers {

// Defined in the file the build writes from tables/*.json (embed_tables.cmake).
extern const char* const kEmbeddedTables[];
extern const size_t kEmbeddedTableCount;

namespace {

std::vector<std::pair<std::string, Json>> read_params(const Json& params) {
  std::vector<std::pair<std::string, Json>> out;
  for (const auto& param : params) out.emplace_back(param.at(0).get<std::string>(), param.at(1));
  return out;
}

std::map<std::string, std::string> read_names(const Json& object) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : object.items()) out[key] = value.get<std::string>();
  return out;
}

ClassInfo read_class(const std::string& name, const Json& doc) {
  ClassInfo info;
  info.name = name;
  info.model_type = doc.at("model_type").get<std::string>();
  info.attribute_map = read_names(doc.at("attribute_map"));
  info.property_aliases = read_names(doc.at("property_aliases"));
  info.sub_configs = read_names(doc.at("sub_configs"));
  info.has_no_defaults_at_init = doc.at("has_no_defaults_at_init").get<bool>();
  info.params = read_params(doc.at("params"));
  info.body = doc.at("body");
  info.methods = doc.at("methods");
  info.defaults = doc.at("defaults");
  return info;
}

// {4, 57} of "4.57.0.dev0": releases compare by number, not as text.
std::pair<int, int> release_numbers(const std::string& version) {
  int major = 0, minor = 0;
  std::sscanf(version.c_str(), "%d.%d", &major, &minor);
  return {major, minor};
}

}  // namespace

const ClassInfo* Table::class_named(const std::string& name) const {
  auto it = classes.find(name);
  return it == classes.end() ? nullptr : &it->second;
}

const ClassInfo* Table::class_of_type(const std::string& model_type) const {
  auto it = model_types.find(model_type);
  return it == model_types.end() ? nullptr : class_named(it->second);
}

std::string Table::release() const {
  size_t first = version.find('.');
  size_t second = first == std::string::npos ? first : version.find('.', first + 1);
  return version.substr(0, second);
}

Table parse_table(const std::string& text) {
  try {
    Json doc = pyjson::parse(text);
    Table table;
    table.version = doc.at("transformers_version").get<std::string>();
    table.commit = doc.at("transformers_commit").get<std::string>();
    const Json& base = doc.at("base");
    table.base.dtype_attribute = base.at("dtype_attribute").get<std::string>();
    table.base.params = read_params(base.at("params"));
    table.base.generation_defaults = base.at("generation_defaults");
    table.base.defaults = base.at("defaults");
    table.model_types = read_names(doc.at("model_types"));
    for (const auto& [name, entry] : doc.at("classes").items()) {
      table.classes.emplace(name, read_class(name, entry));
    }
    return table;
  } catch (const Json::exception& error) {
    throw input_error(std::string("a transformers configuration table is malformed: ") +
                      error.what() + " (regenerate it with tables/generate.py)");
  }
}

const std::vector<Table>& tables() {
  static const std::vector<Table> kTables = [] {
    std::vector<Table> out;
    for (size_t i = 0; i < kEmbeddedTableCount; ++i) out.push_back(parse_table(kEmbeddedTables[i]));
    std::sort(out.begin(), out.end(), [](const Table& a, const Table& b) {
      return release_numbers(a.version) > release_numbers(b.version);  // 4.100 after 4.57
    });
    return out;
  }();
  return kTables;
}

}  // namespace neuron_cache::transformers
