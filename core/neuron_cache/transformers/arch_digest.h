// optimum-neuron's architecture digest of a model, from its config.json, for each transformers
// release optimum-neuron has hashed configs with: SHA-256 of
// json.dumps({"model_type", "task", "config"}, sort_keys=True) where config is transformers'
// to_diff_dict() of the loaded config (its text config for text-generation), without
// CACHE_WHITE_LIST and "neuron" (optimum/neuron/cache/entries/single_model.py, 0.4.5).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/transformers/config_table.h"

namespace neuron_cache::transformers {

struct DigestAnswer {
  std::string release;  // the transformers release: "4.57"
  std::optional<std::string> digest;
  Json hashed;             // the config dict the digest hashes (when there is a digest)
  std::string model_type;  // of the hashed config, or of the config.json when unknown
  // When there is no digest: the model type has no class in the table (compare stored configs
  // instead) ...
  bool unknown_model_type = false;
  // ... or transformers itself would fail on the config (what it raises).
  std::string why_not;
};

// The answer of one release's table.
DigestAnswer arch_digest(const Table& table, const Json& config_json, const std::string& task);
// The answers of every embedded table, newest release first.
std::vector<DigestAnswer> arch_digests(const Json& config_json, const std::string& task);

// The digest of a dict optimum-neuron hashed (a registry entry's config carries it).
std::string digest_of_hashed(const Json& hashed, const std::string& task);

// Whether a config optimum-neuron stored in a registry entry (the dict it hashed) was made from
// this config.json, for a model type the tables do not know: transformers may add keys (class
// defaults, derived values, dtype) and drop base keys equal to PretrainedConfig's defaults, so
// every other key of the file (its text config for text-generation) must be in the stored config
// with an equal value (Python's ==, nested dicts alike), and the model types must agree.
bool stored_config_matches(const Json& config_json, const Json& stored, const std::string& task);

}  // namespace neuron_cache::transformers
