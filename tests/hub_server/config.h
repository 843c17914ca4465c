// The test Hub's users, access tokens and pre-created repos, read from the --config JSON file
// (format in tests/README.md, example in example-config.json).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::hub_server {

struct User {
  std::string name;
  std::string fullname;
  std::vector<std::string> orgs;
};

struct Token {
  std::string value;  // "hf_..." (the JS client refuses anything else)
  std::string user;
  std::string role;  // "read" or "write"
  std::string display_name;
  // When set, the only namespaces this token may write to (a fine-grained token).
  std::optional<std::vector<std::string>> write_namespaces;
};

struct SeedFile {
  std::string path;
  std::string content;
};

struct SeedRepo {
  std::string type;  // "model" or "dataset"
  std::string id;    // "namespace/name"
  bool is_private = false;
  std::vector<SeedFile> files;
};

struct Config {
  std::map<std::string, User> users;
  std::map<std::string, Token> tokens;  // by value
  std::vector<SeedRepo> repos;
};

// Throws std::runtime_error naming the file and the offending field.
Config load_config(const std::filesystem::path& file);

}  // namespace neuron_cache::hub_server
