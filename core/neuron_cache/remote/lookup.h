// Which configurations of models a cache store has registry entries for. A constant number of
// listings finds them, whatever the number of models: the repo root, then one recursive listing
// of each matching compiler folder's 0_REGISTRY. Only the entry files that may belong to the
// models are then downloaded, in parallel. `neuron-cache lookup` and `plan` both use it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/format/registry.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::remote {

// One registry entry as `lookup` shows it. batch_size, sequence_length and tensor_parallel are
// JSON numbers when the entry stores a number or a numeric string (legacy texts), strings when it
// stores other text, and null when it stores nothing.
struct LookupRow {
  std::string task;
  registry::Json batch_size;
  registry::Json sequence_length;
  registry::Json tensor_parallel;
  std::string dtype;
  std::string instance_type;
  std::string compiler_version;
  std::string optimum_version;  // the registry version folder (empty for the first generation)
  std::string mode;             // "inference", or "training" for 0.0.19-0.1.x training entries
  std::string checkpoint_revision;
  std::string same_architecture_as;  // the entry's model when it is another one (RegistryHit)
  std::string path;                  // the registry file in the repo

  bool operator<(const LookupRow& other) const;
  bool operator==(const LookupRow& other) const;
};

// How an entry's architecture digest folder relates to the model's config.json.
enum class Architecture {
  Unknown,  // an older generation (no digest folder), or the model's config.json was not read
  Same,     // the folder is the digest optimum-neuron computes for the model and the entry's task
  Other,    // the model's own entry, made from another config.json (it changed since)
};

// What a scan knows of a model's architecture for one task.
struct TaskArchitecture {
  // The digests optimum-neuron computes from the model's config.json, one per transformers
  // release it hashes configs with (transformers::arch_digests): each is the model's folder.
  std::set<std::string> digests;
  // The config.json, when its model type is not in neuron-cache's transformers tables: a digest
  // folder whose entries store a config made from it (transformers::stored_config_matches) is
  // the model's.
  std::optional<registry::Json> config_json;
  // What the plan and lookup say of how the folders were found (empty when by digest).
  std::string note;
};

// The models a scan looks for: model id -> task -> what is known of its architecture. A model
// without tasks had its config.json unread (gated, offline): the digest folders its own aliases
// link are taken as its architecture's.
using ScanModels = std::map<std::string, std::map<std::string, TaskArchitecture>>;

// What a task's architecture is, from the model's config.json.
TaskArchitecture architecture_of(const registry::Json& config_json, const std::string& task);

// The tasks whose digests a lookup without --task computes: every task optimum-neuron exports.
const std::vector<std::string>& known_tasks();

// One registry entry of a scanned model.
struct RegistryHit {
  registry::Record record;   // the whole entry: neuron config and model config
  LookupRow row;             // what lookup shows of it
  std::string compiler_dir;  // neuronxcc-<version>
  std::string optimum_version;
  std::string path;  // the registry file in the repo (the primary file when an alias exists)
  Architecture architecture = Architecture::Unknown;
  // The model the entry was made for when it is another one of the same architecture (a
  // fine-tune, base and Instruct variants): optimum-neuron's lookup returns it too.
  std::string same_architecture_as;
  // A traced export (encoders, diffusion): optimum-neuron's filters never select it, and
  // `optimum-cli export neuron` does not ask the Hub for traced models.
  bool traced = false;
};

struct RegistryScan {
  // By requested model id, sorted by row; a model without entries has an empty list. An entry
  // stored under two optimum-neuron versions is a hit in each.
  std::map<std::string, std::vector<RegistryHit>> hits;
  std::vector<std::string> compiler_dirs;  // the neuronxcc-* folders searched
  std::vector<std::string> problems;       // "path: why" for entry files that could not be read
  uint64_t listing_requests = 0;
  // By model id and task: the digest folders found by comparing stored configs (an unknown model
  // type), and how many folders were compared.
  std::map<std::string, std::map<std::string, std::set<std::string>>> matched_by_config;
  size_t compared_folders = 0;
  bool has_registry = false;  // whether any searched compiler folder has a 0_REGISTRY at all
  // False when a listing or a download failed (and counted as a miss): then the scan says what
  // this run could see, not what the store holds, and must not be remembered.
  bool complete = true;
};

// One listing of the repo root, then ONE recursive listing of each matching compiler folder's
// 0_REGISTRY, whatever the number of models; then only the candidate files of `models` are
// downloaded, in parallel: files named after a model (aliases, older generations), and every
// file of a digest folder that holds such a file or is one of the model's digests (optimum-neuron
// writes an alias only for a model's first entry on a machine, and reads the digest folder
// whatever the aliases say). compiler_version: prefix of neuronxcc-<version> (empty: every
// compiler folder). Files are told apart by (optimum-neuron version, mode, hash): an alias and its
// primary file are one entry, the same bytes under two versions are two. Unreadable files are
// problems, not errors; failures of the listings throw, unless the store counts them as misses
// (then the scan is not `complete`).
RegistryScan scan_registry(storage::Store& store, const std::string& compiler_version,
                           const ScanModels& models, const std::string& revision = "main");

struct LookupQuery {
  std::string model_id;
  std::string compiler_version;  // prefix of neuronxcc-<version>; empty: every compiler
  std::optional<std::string> task;
  std::optional<std::string> instance_type;
  std::optional<std::string> dtype;
  std::optional<long> tensor_parallel_size;
  std::optional<long> batch_size;
  std::optional<long> sequence_length;
  std::string mode = "inference";              // "inference", "training" or "all"
  std::optional<std::string> optimum_version;  // exact registry version folder; none: every one
  // The model's architecture by task (see ScanModels); empty: its config.json was not read.
  std::map<std::string, TaskArchitecture> architectures;
};

struct LookupResult {
  std::vector<LookupRow> rows;
  std::vector<std::string> compiler_dirs;  // the neuronxcc-* folders searched
  std::vector<std::string> problems;       // unreadable entry files
  uint64_t listing_requests = 0;
  bool has_registry = false;
  size_t other_mode_rows = 0;  // rows that pass every filter but the mode (e.g. training rows)
  // The model's own entries in another digest folder than its config.json gives (they were made
  // from an older config.json): optimum-neuron does not find them, nor does the plan.
  size_t other_architecture_rows = 0;
  // Entries of other models with the model's architecture, among `rows`.
  size_t same_architecture_rows = 0;
  // Rows that pass every filter but the instance type once it is normalised (inf2 and trn1n
  // entries are stored as trn1): a hint, since optimum-neuron compares it as given.
  size_t normalised_instance_rows = 0;
};

// scan_registry for one model, filtered by the query.
LookupResult lookup(storage::Store& store, const LookupQuery& query);

// Whether a row passes the query's filters (compiler version and model id aside).
bool matches(const LookupRow& row, const LookupQuery& query);
bool mode_matches(const LookupRow& row, const std::string& mode);

// "bf16" and "bfloat16" are the same dtype (optimum-neuron's DTYPE_MAPPER).
std::string canonical_dtype(const std::string& dtype);

}  // namespace neuron_cache::remote
