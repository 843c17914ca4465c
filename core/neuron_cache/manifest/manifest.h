// The manifest: a checked-in file that declares the model configurations a pipeline needs, and
// how to compile one that no cache has. Two formats are read into the same Manifest:
//
// 1. neuron-cache's YAML manifest (`neuron-cache.yaml`, `*.yml`). Every key below is checked:
//    an unknown key, a wrong type, a missing required key, a non-positive number or a duplicate
//    configuration name is an input Error that starts with `FILE:LINE:COLUMN: ` (1-based).
//
//    cache_repo:             string, optional. Hub cache repo ("my-org/optimum-neuron-cache").
//    cache_dir:              string, optional. Local cache root.
//    compiler_version:       string, optional. Full neuronx-cc version ("2.21.33363.0+82129205").
//    optimum_neuron_version: string, optional. The optimum-neuron version of registry entries.
//    instance_type:          string, optional. Default of every configuration: trn1, trn1n,
//                            trn2 or inf2. A configuration without one is an error when this
//                            is not set.
//    compiler_flags:         list of strings, optional. Put before each configuration's flags.
//    trusted_keys:           list of strings, optional. Public keys ("acme-ci-1:<base64>",
//                            `neuron-cache key public`) whose signatures a store entry may carry
//                            (trust/signing.h); an entry a trusted key signed over other bytes
//                            is never installed.
//    require_signatures:     boolean, optional (false). Install only store entries a trusted
//                            key signed; the others are compiled, the plan saying why.
//    compile:                map, optional. How to compile a configuration no cache has:
//      command:              string, required. An argv template (see command_template.h),
//                            e.g. "optimum-cli export neuron --model {model_id} ... {output}".
//      env:                  map of string to string, optional. Added to the environment.
//    models:                 list of maps, required, not empty. Each one:
//      model_id:             string, required. Hub model id ("meta-llama/Llama-3.1-8B").
//      revision:             string, optional. A branch, tag or 40-hex commit, resolved to
//                            the commit through the Hub (default: the main branch).
//      checkout:             string, optional. A local git clone of the model (relative to the
//                            manifest's folder); its HEAD commit is the revision. Not with
//                            revision. The path itself never enters a cache key.
//      model_type:           string, optional. The config.json model_type ("llama"); read
//                            from the checkout or from the Hub at the revision when absent.
//      task:                 string, required ("text-generation", ...).
//      configurations:       list of maps, required, not empty. Each one:
//        name:               string, optional; default derived from the fields (see
//                            default_name). Letters, digits and ._-+@: only; unique in the file.
//        batch_size:         positive integer, required.
//        sequence_length:    positive integer, required.
//        num_cores:          positive integer; `tensor_parallel_size` is the same thing. One of
//                            the two is required; both given with different values is an error.
//        precision:          bf16, fp16 or fp32, required (bfloat16, float16 and float32 are
//                            read as the short names).
//        instance_type:      string, optional override of the global one.
//        compiler_flags:     list of strings, optional; appended to the global ones.
//
//    Integers must be plain YAML integers: `batch_size: "1"` and `batch_size: !!str 1` are
//    strings and an error, so a typo never silently becomes a different configuration. Strings
//    must be YAML strings: `task: 5` (an integer), `compiler_version: 2.21` (a number) or `yes`
//    (a boolean) are errors; quote them. Every value must be UTF-8 text without NUL.
//    Names follow the grammars of format/hub_names.h: cache_repo and model_id are Hub repo ids
//    (model_id may be another name, never an option or holding '{' '}', with checkout:),
//    compiler_version and optimum_neuron_version are versions, revision a git revision,
//    model_type and task lower-case identifiers.
//    Bounds (a manifest is a short hand-written file): 1 MiB of text, 500,000 YAML nodes and
//    16 MiB of values once aliases (*name) and the global compiler_flags are expanded.
//
// 2. The public cache repo's `inference-cache-config/*.json` (format spec, section 3):
//    { "<model_id>": [ {"batch_size": 1, "sequence_length": 4096, "tensor_parallel_size": 2,
//    "instance_type": "trn1", "task"?: ..., "dtype"?|"auto_cast_type"?: ...}, ... ] }, with the
//    legacy `num_cores` for `tensor_parallel_size`. task defaults to text-generation, precision
//    to bf16. JSON text has no positions here, so errors name the model and index instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::manifest {

// Where a configuration was declared, for messages. line and column are 1-based; 0 when the
// format has no positions (JSON).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  // "FILE:LINE:COLUMN", or "FILE" without a position.
  std::string to_string() const;
};

struct CompileSpec {
  std::string command;  // the argv template, unrendered
  std::map<std::string, std::string> env;
};

// One configuration with every field resolved: defaults and global settings applied.
struct Configuration {
  std::string model_id;
  std::optional<std::string> revision;
  std::optional<std::string> model_type;
  std::optional<std::string> checkout;  // as written: relative to the manifest's folder
  std::string task;
  std::string name;
  std::int64_t batch_size = 0;
  std::int64_t sequence_length = 0;
  std::int64_t num_cores = 0;               // = tensor_parallel_size
  std::string precision;                    // bf16, fp16 or fp32
  std::string instance_type;                // trn1, trn1n, trn2 or inf2
  std::vector<std::string> compiler_flags;  // global flags, then the configuration's own
  SourceLocation source;
};

struct Manifest {
  std::string path;
  std::string text_sha256;  // of the file's bytes (load_manifest): what a lockfile records
  std::optional<std::string> cache_repo;
  std::optional<std::string> cache_dir;
  std::optional<std::string> compiler_version;
  std::optional<std::string> optimum_neuron_version;
  std::optional<std::string> instance_type;
  std::vector<std::string> compiler_flags;
  std::optional<std::vector<std::string>> trusted_keys;  // public key lines, checked
  std::optional<bool> require_signatures;
  std::optional<CompileSpec> compile;
  std::vector<Configuration> configurations;  // in file order

  // The configuration with this name, or nullptr.
  const Configuration* find(std::string_view name) const;
};

// Parses YAML manifest text; `file` is only used in messages. Throws an input Error.
Manifest parse_yaml(std::string_view text, const std::string& file);

// Parses an inference-cache-config JSON text. A configuration without "instance_type" takes
// `default_instance_type`, and is an error without one. Throws an input Error.
Manifest parse_inference_cache_config(
    std::string_view text, const std::string& file,
    const std::optional<std::string>& default_instance_type = std::nullopt);

// Reads a manifest file, choosing the format by extension: .yaml/.yml or .json. Throws an input
// Error for an unknown extension or bad content, an operational Error when it cannot be read.
Manifest load_manifest(const std::filesystem::path& path,
                       const std::optional<std::string>& default_instance_type = std::nullopt);

// "bf16" for bf16/bfloat16, "fp16" for fp16/float16, "fp32" for fp32/float32; nothing otherwise.
std::optional<std::string> normalize_precision(std::string_view precision);
bool is_known_instance_type(std::string_view instance_type);
// The name of a configuration without one: "<model_id with / as -->-bs<B>-seq<S>-tp<N>-
// <precision>-<instance type>", e.g. "meta-llama--Llama-3.1-8B-bs1-seq4096-tp8-bf16-trn2".
std::string default_name(const Configuration& configuration);
// A letter or digit, then letters, digits and . _ - + @ : only, at most kMaxNameLength: safe in
// file names (with a suffix) and on command lines ("..", hidden names and options are
// impossible).
inline constexpr std::size_t kMaxNameLength = 200;
bool is_valid_name(std::string_view name);

}  // namespace neuron_cache::manifest
