#include "neuron_cache/config/trust_settings.h"

#include <openssl/crypto.h>

#include <cctype>
#include <utility>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"

namespace neuron_cache::config {
namespace {

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string joined_lines(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : "\n") + key;
  return out;
}

// Masks the key's seed (and the file's text form) everywhere the tool writes, before any
// message could carry it.
std::shared_ptr<const trust::SecretKey> registered(trust::SecretKey key) {
  const auto& seed = key.secret_seed();
  std::string text = trust::base64_encode(seed.data(), seed.size());
  add_secret(text, kSigningKeyLabel);
  add_secret(key.name() + ":" + text, kSigningKeyLabel);
  OPENSSL_cleanse(text.data(), text.size());
  return std::make_shared<const trust::SecretKey>(std::move(key));
}

void resolve_require(Settings& s, const Environment& env, const SettingOverrides& overrides,
                     const ManifestLayer& manifest) {
  std::string origin;
  auto variable = env.get("NEURON_CACHE_REQUIRE_SIGNATURES");
  bool variable_on = false;
  if (variable) {
    std::string value = lowercase(*variable);
    variable_on = value == "1" || value == "true" || value == "yes" || value == "on";
    bool off = value == "0" || value == "false" || value == "no" || value == "off";
    if (!variable_on && !off) {
      throw input_error("NEURON_CACHE_REQUIRE_SIGNATURES=" + printable(*variable) +
                        " is not a boolean: set it to 1 (require signatures) or 0");
    }
  }
  if (overrides.require_signatures) {
    origin = "--require-signatures";
  } else if (variable_on) {
    origin = "NEURON_CACHE_REQUIRE_SIGNATURES";
  } else if (manifest.require_signatures.value_or(false)) {
    origin = "the manifest's require_signatures in " + manifest.file;
  }
  s.require_signatures = !origin.empty();
  s.require_signatures_origin = {s.require_signatures ? "true" : "false",
                                 origin.empty() ? "default" : origin};
  if (variable && !variable_on && manifest.require_signatures.value_or(false)) {
    s.warnings.push_back("NEURON_CACHE_REQUIRE_SIGNATURES=" + printable(*variable) +
                         " does not turn off the require_signatures of " + manifest.file +
                         ": no setting weakens another's; edit the manifest to change it");
  }
}

}  // namespace

std::vector<std::string> split_key_list(const std::string& text) {
  std::vector<std::string> keys;
  std::string current;
  for (char c : text + ",") {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      if (!current.empty()) keys.push_back(std::exchange(current, ""));
    } else {
      current += c;
    }
  }
  return keys;
}

void resolve_trust(Settings& s, const Environment& env, const SettingOverrides& overrides,
                   const ManifestLayer& manifest) {
  if (!overrides.trusted_keys.empty()) {
    s.trusted_keys = {joined_lines(overrides.trusted_keys), "--trusted-key"};
  } else if (auto variable = env.get("NEURON_CACHE_TRUSTED_KEYS")) {
    s.trusted_keys = {joined_lines(split_key_list(*variable)), "NEURON_CACHE_TRUSTED_KEYS"};
  } else if (manifest.trusted_keys) {
    s.trusted_keys = {joined_lines(*manifest.trusted_keys),
                      "the manifest's trusted_keys in " + manifest.file};
  } else {
    s.trusted_keys = {"", "unset"};
  }
  resolve_require(s, env, overrides, manifest);
  if (auto path = env.get("NEURON_CACHE_SIGNING_KEY")) {
    s.signing_key = {*path, "NEURON_CACHE_SIGNING_KEY"};
  } else {
    s.signing_key = {"", "unset (pushes do not sign)"};
  }
}

TrustPolicy trust_policy(const Settings& settings) {
  TrustPolicy policy;
  policy.keys_origin = settings.trusted_keys.origin;
  policy.require = settings.require_signatures;
  policy.require_origin = settings.require_signatures_origin.origin;
  for (const auto& line : split_key_list(settings.trusted_keys.value)) {
    try {
      policy.keys.add(trust::parse_public_key(line, settings.trusted_keys.origin));
    } catch (const Error& error) {
      throw input_error(std::string(error.what()) + " (in " + settings.trusted_keys.origin + ")");
    }
  }
  if (policy.require && policy.keys.empty()) {
    throw input_error("signatures are required (" + policy.require_origin +
                      ") but no key is trusted: list the public keys of your signing keys in "
                      "the manifest's trusted_keys (or --trusted-key, NEURON_CACHE_TRUSTED_KEYS)");
  }
  return policy;
}

std::shared_ptr<const trust::SecretKey> signing_key(const Settings& settings) {
  if (settings.signing_key.value.empty()) return nullptr;
  return registered(trust::read_secret_key(settings.signing_key.value));
}

std::shared_ptr<const trust::SecretKey> signing_key_from_text(const std::string& text,
                                                              const std::string& origin) {
  return registered(trust::parse_secret_key(text, origin));
}

}  // namespace neuron_cache::config
