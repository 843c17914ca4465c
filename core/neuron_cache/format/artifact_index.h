// The artifact index: which MODULE_ folders (and registry files) a configuration key needs, with
// each file's size and sha256, so neuron-cache can prefetch a configuration's NEFFs without
// tracing the model. optimum-neuron's registry does not record this (format spec 13c), and every
// file under 0_REGISTRY must stay a valid registry entry (13b), so the index lives elsewhere:
//
// - On the Hub (format 2): one SHARD per model and compiler version,
//   `neuron-cache-index/neuronxcc-<version>/<model slug>.json`,
//   {"entries": {"<key>": <entry>, ...}, "format": 2, "model_id": "<model id>"}, compact JSON.
//   A shard's path follows from a configuration's inputs, so `plan` asks for the shards of the
//   models it needs with one paths-info request and downloads only those: the cost grows with the
//   models asked about, not with the repo. Pushing a configuration rewrites its model's shard
//   only (about 2 KB per configuration of that model and compiler version), inside the commit
//   that uploads the artifacts, on top of the head it read: a conflict re-reads and merges.
//   The top-level name does not start with "neuronxcc-", so optimum-neuron's registry lookup
//   never mistakes it for a compiler folder.
// - A PROFILE (cache_key.h: a training run's graphs, no model) has its own shard,
//   `neuron-cache-index/neuronxcc-<version>/profiles/<profile name>.json`,
//   {"entries": {"<key>": <entry>, ...}, "format": 2, "profile": "<name>"}: one entry per compiler
//   flags. Model slugs never contain '/', so no model's shard can be that path; format 1 files
//   never hold profiles.
// - An entry GROWS (a later run of a profile, or of `run --config`, adds graphs): pushing it
//   again writes the union of the Hub's entry and the local one (merged()), and uploads only the
//   MODULE_ folders the Hub's entry lacked; covers() tells whether there is anything to push.
// - Format 1 (neuron-cache 0.1): ONE file per compiler version,
//   `neuron-cache-index/neuronxcc-<version>.json`, same object with "format": 1. Still read (its
//   entries count as on the Hub), never rewritten: its size grew with the whole repo.
// - Locally: one file per key, `<root>/.cache/huggingface/neuron-cache-index/neuronxcc-<version>/
//   <key>.json`, written atomically, so parallel compiles need no lock. `.cache/huggingface/` is
//   never uploaded by `synchronize` (nor by huggingface_hub's upload_folder).
//
// An entry, as written by pyjson::dumps(indent=2) (sorted keys):
//   {"compile_seconds": 1834.2, "configuration": "llama-bs1", "created_at": "2026-11-29T18:00:00Z",
//    "inputs": <cache key inputs, see cache_key.h>, "key": "<32 hex>",
//    "modules": [{"files": [{"name": "model.neff", "sha256": "...", "size": 123}, ...],
//                 "name": "MODULE_...+..."}],
//    "registry": [{"name": "0_REGISTRY/0.4.5/<arch>/<hash>.json", "sha256": "...", "size": 1229}],
//    "signatures": [{"key": "acme-ci-1", "sig": "<base64>"}],  (only when signed)
//    "tool": "neuron-cache 0.1.0"}
// Module and registry paths are relative to the folder neuronxcc-<inputs.compiler.version>.
// A traced export (MODULE_<entry hash>, no model.neff) is one module whose files are the export
// folder's, sub-folders included; its listed files must make it complete (layout::classify).
// Reading checks every name, so an index from the Hub can never make a writer leave that folder.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::artifact_index {

inline constexpr int kFormat = 2;        // what this version writes: per-model shards
inline constexpr int kLegacyFormat = 1;  // one file per compiler version, read only
inline constexpr std::string_view kRemoteDir = "neuron-cache-index";
inline constexpr std::string_view kLocalDir = ".cache/huggingface/neuron-cache-index";
// Files one list (a module's, or the registry files) may hold: an entry read from a shared repo
// claiming more is refused, so a folder with more files cannot be recorded.
inline constexpr size_t kMaxFilesPerList = 1000;

struct FileRecord {
  // '/'-separated, relative to its module (or to the compiler folder): a traced export's
  // sub-folders (diffusion components) give "unet/model.neuron". At most 255 bytes.
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

struct ModuleRecord {
  std::string name;  // "MODULE_..."
  std::vector<FileRecord> files;
  uint64_t size() const;
};

// A signature over an entry's canonical statement (trust/signing.h): the key's name and the
// base64 of the 64 signature bytes. Read structurally here; trust/ verifies it.
struct EntrySignature {
  std::string key;
  std::string sig;
  bool operator==(const EntrySignature&) const = default;
};
inline constexpr size_t kMaxSignatures = 16;
inline constexpr size_t kMaxKeyName = 64;
inline constexpr size_t kSignatureBase64Bytes = 88;  // 64 bytes

struct Entry {
  std::string key;
  cache_key::KeyInputs inputs;
  std::string configuration;  // the manifest name it was compiled for (informative)
  std::vector<ModuleRecord> modules;
  std::vector<FileRecord> registry;  // registry files written by the compile command
  double compile_seconds = 0;
  std::string tool;
  std::string created_at;  // ISO 8601, UTC
  // Written as "signatures" only when there is one, so an unsigned entry is the bytes it was
  // before signing existed.
  std::vector<EntrySignature> signatures;

  std::string compiler_dir() const;  // "neuronxcc-<inputs.compiler_version>"
  uint64_t total_bytes() const;      // modules and registry files
};

struct IndexFile {
  int format = kFormat;
  std::string model_id;                  // format 2: the model every entry belongs to
  std::optional<std::string> profile;    // format 2: or the profile (then model_id is empty)
  std::map<std::string, Entry> entries;  // by key
  // Entries this version cannot read (damaged, or written by a newer neuron-cache): kept as they
  // are so a writer never drops them, and never used.
  std::map<std::string, pyjson::Json> unreadable;
  std::vector<std::string> problems;  // why each unreadable entry was set aside
};

pyjson::Json entry_to_json(const Entry& entry);
// A key and the inputs the caller made it from with cache_key::key_of: an entry holding both
// matches them without hashing its inputs again (a warm plan reads one entry per configuration).
struct KnownKey {
  const std::string& key;
  const cache_key::KeyInputs& inputs;
};

// Throws an input Error naming `origin` when a field is missing, a name is unsafe (absolute,
// "..", not a MODULE_ folder, a lock file) or the key does not match the inputs.
Entry entry_from_json(const pyjson::Json& json, const std::string& origin,
                      const KnownKey* known = nullptr);

std::string serialize_entry(const Entry& entry);
Entry parse_entry(std::string_view text, const std::string& origin,
                  const KnownKey* known = nullptr);
// A format 2 shard (compact) or a format 1 file (indented), as `index.format` says.
std::string serialize_index(const IndexFile& index);
// Throws an input Error when the file itself is not an index (or of a newer format); a bad entry
// (or, in a shard, an entry of another model) only lands in `unreadable`, so one broken entry
// never hides the others.
IndexFile parse_index(std::string_view text, const std::string& origin);
// Whether `text` is an index file of a newer format than this tool reads: parse_index refuses it,
// and it is never rewritten (a newer tool's entries would be lost); anything else parse_index
// refuses is damaged.
bool is_newer_index(std::string_view text);

// "neuron-cache-index/neuronxcc-<version>.json" (format 1)
std::string remote_index_path(std::string_view compiler_version);
// "neuron-cache-index/neuronxcc-<version>/<model slug>.json" (format 2)
std::string remote_shard_path(std::string_view compiler_version, std::string_view model_id);
// "neuron-cache-index/neuronxcc-<version>/profiles/<name>.json" (format 2); `profile` must be a
// valid profile name (cache_key::profile_name_problem).
std::string remote_profile_shard_path(std::string_view compiler_version, std::string_view profile);
// The shard that holds entries of these inputs: the profile's or the model's.
std::string remote_shard_path(const cache_key::KeyInputs& inputs);
// An empty shard for entries of these inputs (model_id or profile set).
IndexFile shard_for(const cache_key::KeyInputs& inputs);
// Whether `shard` is the shard for entries of `inputs`.
bool is_shard_for(const IndexFile& shard, const cache_key::KeyInputs& inputs);
// A file name for a model id: "org--name" when it only has [A-Za-z0-9._-] and one '/', else
// "model-" + 32 hex of its sha256 (local paths, odd names): never a path, never too long.
std::string model_slug(std::string_view model_id);
// The compiler version a file below kRemoteDir belongs to (the format 1 file, a format 2 shard),
// or nothing for other paths.
std::optional<std::string> compiler_version_of_index(std::string_view path_in_repo);
// ".cache/huggingface/neuron-cache-index/neuronxcc-<version>/<key>.json", relative to the root.
std::string local_entry_path(std::string_view compiler_version, std::string_view key);

// Whether `hub` lists every MODULE_ folder and registry file of `local` (by name): then pushing
// `local` adds no file. Signatures are not compared: whether the Hub's entry lacks a signature
// the pusher would add is the signing step's question, not this one's.
bool covers(const Entry& hub, const Entry& local);
// `first` with the MODULE_ folders and registry files of `more` it lacks added (same key; the
// records of `first` win for names both list): the union a grown entry is written as. Sorted by
// name. A signature vouches for exact files, so the union keeps only the signatures of an input
// whose files (names, sizes, sha256s) are exactly the union's (both inputs' when both are, those
// of `first` winning for a key name both carry): a grown entry loses every signature until it is
// signed again, rather than carry one the verifier would report as bad.
Entry merged(const Entry& first, const Entry& more);
// The key and the names of an entry's modules and registry files, as one short string: two
// entries of one key with the same contents have the same one (what the push memo remembers).
std::string contents_id(const Entry& entry);

// Why `name` is not a MODULE_ folder an index may list (libneuronxla's MODULE_<graph key>+<8 hex>
// or a traced export's MODULE_<20 hex>, at most 255 bytes, no control character), or nothing.
std::optional<std::string> module_name_problem(std::string_view name);
// Why `name` is not a file an index may list in the folder `module`, or nothing: a plain MODULE_
// folder is flat and holds only the files libneuronxla writes; a traced export's files may sit
// in sub-folders. At most 255 bytes, no control character nor backslash, no lock file.
std::optional<std::string> file_name_problem(std::string_view module, std::string_view name);

// Why the files `module` lists do not make a complete folder, or nothing: a plain MODULE_ folder
// needs model.neff and libneuronxla's empty model.done, a traced export its config and a *.neuron
// file (layout::classify_listed, the rule a folder on disk is judged by). Index entries and store
// listings are both judged by it: what lists less is a miss, never installed as complete.
std::optional<std::string> incomplete_module_problem(const ModuleRecord& module);

// Why `name` is not a signing key name, or nothing: a letter or digit first, then letters,
// digits, '.', '_' or '-', ending in '-' and a number (acme-ci-1) so that a key can be replaced by
// the next number; at most kMaxKeyName bytes.
std::optional<std::string> key_name_problem(std::string_view name);

// A relative '/'-path with no empty, "." or ".." component, no NUL and no lock file.
bool is_safe_relative_path(std::string_view path);

// The current time as "2026-11-29T18:00:00Z".
std::string utc_now();

}  // namespace neuron_cache::artifact_index
