// optimum-neuron registry entries ("model cache entries") under neuronxcc-<ver>/0_REGISTRY/:
// their exact text, their hashes, their paths, and how to read every older generation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::registry {

using pyjson::Json;

inline constexpr std::string_view kSingleModel = "SingleModelCacheEntry";
inline constexpr std::string_view kMultiModel = "MultiModelCacheEntry";

// Throws an input Error naming what is wrong unless `entry` is a current entry: an object with
// "_entry_class" (a known class), "_model_id" (string) and "_task" (string, or null for multi).
void validate_entry(const Json& entry);

// The registry file text: Python json.dumps(entry, indent=2, sort_keys=True).
std::string serialize(const Json& entry);

// First 20 hex digits of SHA-512 over the file text: the file name and, for traced exports,
// the MODULE_<hash> folder name.
std::string entry_hash(std::string_view serialized_text);

// What the architecture digest hashes: {model_type, task, config} for single-model entries
// (config = entry without "neuron" and the three underscore keys), {model_type, configs} for
// multi-model ones (model_type "stable-diffusion" with a unet, "diffusion-transformer" with a
// transformer).
Json arch_input(const Json& entry);
// Full SHA-256 hex of compact json.dumps(arch_input, sort_keys=True): the folder name.
std::string arch_digest(const Json& entry);

// The model config keys optimum-neuron drops before hashing (CACHE_WHITE_LIST, cache_entry.py).
const std::vector<std::string>& cache_white_list();

// The digest optimum-neuron computes for a model from its config.json (transformers'
// to_diff_dict, not the file) is transformers::arch_digest's.

// Paths relative to the compiler folder (neuronxcc-<ver>/).
std::string primary_path(std::string_view optimum_version, std::string_view digest,
                         std::string_view hash);
std::string alias_path(std::string_view optimum_version, std::string_view model_type,
                       std::string_view model_id, std::string_view hash);

// Where an entry file sits tells which generation wrote it (format spec 4.8).
enum class PathShape {
  Initial,      // 0_REGISTRY/<model_id>/<h>.json (first registry commit, indent=4)
  ByMode,       // <ver>/{training,inference}/<model_type>/<model_id>/<h>.json (0.0.19-0.1.x)
  ByModelType,  // <ver>/<model_type>/<model_id>/<h>.json (0.0.18, 0.2.0-0.4.4; alias since 0.4.5)
  ByArch,       // <ver>/<arch digest>/<h>.json (primary file since 0.4.5)
};
std::string_view shape_name(PathShape shape);

struct Location {
  PathShape shape;
  std::string optimum_version;  // empty for Initial
  std::string mode;             // "training"/"inference" for ByMode
  std::string model_type;
  std::string model_id;
  std::string arch_digest;  // ByArch only
  std::string hash;         // the file stem
};

// `path` is relative to 0_REGISTRY/, with '/' separators. Nothing for paths that are not
// registry entries (wrong depth or not *.json).
std::optional<Location> locate(std::string_view path);

// One registry file, read whatever its generation.
struct Record {
  Location location;
  std::string entry_class;  // empty for legacy texts without "_entry_class"
  std::string model_id;
  std::optional<std::string> task;
  Json neuron;                // the neuron config (null when absent)
  Json config;                // the model config without neuron and underscore keys
  bool hash_matches = false;  // SHA-512[:20] of the file bytes equals the file name
};

// Throws an input Error when the text is not JSON or not an object.
Record read_record(const Location& location, std::string_view file_text);

}  // namespace neuron_cache::registry
