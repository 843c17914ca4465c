// The cache key of a declared configuration: which compiled artifacts it needs. It is the first
// 32 hex characters of the SHA-256 of the key inputs below written as compact, sorted JSON
// (Python's json.dumps(inputs, sort_keys=True)), so the same configuration gives the same key on
// every machine and in every directory, and a change to any factor gives another key:
//
//   {"compiler": {"flags": [...], "num_cores": 8, "target": "trn1", "version":
//   "2.21.33363.0+82129205"},
//    "environment": {"checkpoint_revision": "<40 hex>" | null, "optimum_neuron_version": "0.4.5" |
//    null}, "key_format": 1, "model": {"batch_size": 1, "model_id": "org/name", "model_type":
//    "llama", "precision": "bf16",
//              "sequence_length": 4096, "task": "text-generation"}}
//
// - flags: the manifest's compiler flags, then the words of NEURON_CC_FLAGS without the cache
//   options libneuronxla's wrapper consumes (--cache_dir, --no_cache, --retry_failed_compilation);
//   order is kept, because it is kept in compile_flags.json too.
// - target: the compilation target of the instance type (trn2 for trn2, trn1 for trn1, trn1n and
//   inf2, as optimum-neuron normalises it): the instance type itself does not change the NEFFs.
// - No path (cache dir, checkout, manifest location) ever enters the inputs.
// Changing this layout is a new key_format: old keys then simply stop matching.
//
// A PROFILE (`neuron-cache run --profile NAME`: a training run, a custom loop) has no model
// configuration: its graphs are whatever the run compiles. Its inputs are only the profile name,
// the compiler version and the flags (the same NEURON_CC_FLAGS rule as above), with no "model" or
// "environment" object, so no model key can ever equal a profile key:
//
//   {"compiler": {"flags": [...], "version": "2.21.33363.0+82129205"}, "key_format": 1,
//    "profile": "llama-train"}
//
// A profile name starts with a letter or digit, has only [A-Za-z0-9._-] and at most 100
// characters (like a configuration name), so it is also a safe file name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::cache_key {

inline constexpr int kKeyFormat = 1;

struct KeyInputs {
  std::string model_id;
  std::string model_type;
  std::string task;
  std::string precision;
  std::int64_t batch_size = 0;
  std::int64_t sequence_length = 0;
  std::string compiler_version;
  std::int64_t num_cores = 0;
  std::string target;
  std::vector<std::string> flags;
  std::optional<std::string> checkpoint_revision;
  std::optional<std::string> optimum_neuron_version;
  // Set for a profile: then only it, compiler_version and flags are key inputs, and the model
  // fields above stay empty.
  std::optional<std::string> profile;

  // Every field equal: equal inputs make equal keys, so a key made from one is the other's too.
  bool operator==(const KeyInputs&) const = default;
};

inline constexpr size_t kMaxProfileName = 100;

// Why `name` is not a valid profile name, or nothing when it is.
std::optional<std::string> profile_name_problem(const std::string& name);
// The inputs of a profile.
KeyInputs profile_inputs(const std::string& name, const std::string& compiler_version,
                         std::vector<std::string> flags);
// "profile llama-train" or the model id: what an entry is of, for messages.
std::string owner_of(const KeyInputs& inputs);
// Whether both are of the same profile, or both of the same model.
bool same_owner(const KeyInputs& a, const KeyInputs& b);

pyjson::Json to_json(const KeyInputs& inputs);
// Reads inputs written by to_json (either shape); throws an input Error naming the missing or
// wrong field, or a bad profile name.
KeyInputs from_json(const pyjson::Json& json);
std::string key_of(const KeyInputs& inputs);

// "trn2" for trn2, "trn1" for trn1, trn1n and inf2.
std::string target_of(const std::string& instance_type);

// One differing factor between two inputs, for explaining misses.
struct Difference {
  std::string field;  // "compiler version", "sequence length", ...
  std::string have;   // the cached value
  std::string want;   // the requested value
};
std::vector<Difference> differences(const KeyInputs& cached, const KeyInputs& wanted);

}  // namespace neuron_cache::cache_key
