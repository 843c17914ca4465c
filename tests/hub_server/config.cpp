#include "config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace neuron_cache::hub_server {
namespace {

using nlohmann::json;

std::string required_string(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key) || !object[key].is_string() || object[key].get<std::string>().empty()) {
    throw std::runtime_error(where + ": \"" + key + "\" must be a non-empty string");
  }
  return object[key].get<std::string>();
}

std::vector<std::string> string_list(const json& value, const std::string& where) {
  if (!value.is_array()) throw std::runtime_error(where + " must be a list of strings");
  std::vector<std::string> items;
  for (const auto& item : value) {
    if (!item.is_string()) throw std::runtime_error(where + " must be a list of strings");
    items.push_back(item.get<std::string>());
  }
  return items;
}

User parse_user(const json& entry, size_t index) {
  std::string where = "users[" + std::to_string(index) + "]";
  User user;
  user.name = required_string(entry, "name", where);
  user.fullname = entry.value("fullname", user.name);
  if (entry.contains("orgs")) user.orgs = string_list(entry["orgs"], where + ".orgs");
  return user;
}

Token parse_token(const json& entry, size_t index, const Config& config) {
  std::string where = "tokens[" + std::to_string(index) + "]";
  Token token;
  token.value = required_string(entry, "token", where);
  token.user = required_string(entry, "user", where);
  token.role = entry.value("role", "write");
  token.display_name = entry.value("name", "token-" + std::to_string(index));
  if (!config.users.contains(token.user)) {
    throw std::runtime_error(where + ": user \"" + token.user + "\" is not in \"users\"");
  }
  if (token.role != "read" && token.role != "write") {
    throw std::runtime_error(where + ": \"role\" must be \"read\" or \"write\"");
  }
  if (entry.contains("namespaces")) {
    token.write_namespaces = string_list(entry["namespaces"], where + ".namespaces");
  }
  return token;
}

SeedRepo parse_repo(const json& entry, size_t index) {
  std::string where = "repos[" + std::to_string(index) + "]";
  SeedRepo repo;
  repo.id = required_string(entry, "id", where);
  repo.type = entry.value("type", "model");
  repo.is_private = entry.value("private", false);
  if (repo.id.find('/') == std::string::npos) {
    throw std::runtime_error(where + ": \"id\" must be \"namespace/name\"");
  }
  if (repo.type != "model" && repo.type != "dataset") {
    throw std::runtime_error(where + ": \"type\" must be \"model\" or \"dataset\"");
  }
  if (entry.contains("files")) {
    if (!entry["files"].is_object()) {
      throw std::runtime_error(where + ".files must be an object {\"path\": \"utf-8 content\"}");
    }
    for (const auto& [path, content] : entry["files"].items()) {
      if (!content.is_string()) throw std::runtime_error(where + ".files values must be strings");
      repo.files.push_back({path, content.get<std::string>()});
    }
  }
  return repo;
}

}  // namespace

Config load_config(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read the config file " + file.string());
  json document;
  try {
    document = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(file.string() + " is not valid JSON: " + e.what());
  }
  Config config;
  try {
    const json empty = json::array();
    const json& users = document.contains("users") ? document["users"] : empty;
    for (size_t i = 0; i < users.size(); ++i) {
      User user = parse_user(users[i], i);
      config.users[user.name] = user;
    }
    const json& tokens = document.contains("tokens") ? document["tokens"] : empty;
    for (size_t i = 0; i < tokens.size(); ++i) {
      Token token = parse_token(tokens[i], i, config);
      config.tokens[token.value] = token;
    }
    const json& repos = document.contains("repos") ? document["repos"] : empty;
    for (size_t i = 0; i < repos.size(); ++i) config.repos.push_back(parse_repo(repos[i], i));
  } catch (const json::exception& e) {
    throw std::runtime_error(file.string() + ": unexpected value: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  return config;
}

}  // namespace neuron_cache::hub_server
