// `neuron-cache key generate NAME --secret-file PATH` and `key public SECRETFILE`: the Ed25519
// keys that sign index entries (trust/keys.h). Only the public key line is ever printed.
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/trust/keys.h"

namespace neuron_cache::cli {
namespace {

void generate(const std::string& name, const std::string& secret_file) {
  trust::SecretKey key = trust::generate_key(name);
  trust::write_secret_key(secret_file, key);
  std::cout << trust::public_key_line(key.public_key()) << "\n";
}

void print_public(const std::string& secret_file) {
  std::cout << trust::public_key_line(trust::read_secret_key(secret_file).public_key()) << "\n";
}

}  // namespace

void register_key(CLI::App& app, Context&) {
  CLI::App* key = app.add_subcommand(
      "key", "Make and show the Ed25519 keys that sign index entries (NAME:<base64> public lines)");
  key->require_subcommand(1);

  auto name = std::make_shared<std::string>();
  auto secret_file = std::make_shared<std::string>();
  CLI::App* gen = key->add_subcommand(
      "generate",
      "Write a new secret key file (mode 0600, never over an existing file) and print its public "
      "key line for trusted_keys");
  gen->add_option("name", *name, "Key name ending in a number, e.g. acme-ci-1")->required();
  gen->add_option("--secret-file", *secret_file, "Where to write the secret key")->required();
  gen->callback([name, secret_file] { generate(*name, *secret_file); });

  auto file = std::make_shared<std::string>();
  CLI::App* pub = key->add_subcommand("public", "Print the public key line of a secret key file");
  pub->add_option("secretfile", *file, "A secret key file `key generate` wrote")->required();
  pub->callback([file] { print_public(*file); });
}

}  // namespace neuron_cache::cli
