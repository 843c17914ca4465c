// The plan: for every declared configuration, whether its artifacts are complete locally,
// available on the Hub, or must be compiled; what fetching costs and what it saves; and, for a
// miss, the nearest cached configurations and how they differ.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/config/trust_settings.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/plan/targets.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::plan {

// Registry: not in any neuron-cache index, but optimum-neuron's registry on the Hub lists the
// configuration (a repo filled by `optimum-cli neuron cache synchronize`): the compile command
// runs, and optimum-neuron's hub proxy fetches its NEFFs instead of compiling them.
enum class Status { Local, Store, Registry, Compile };
std::string_view status_name(Status status);  // "local", "store", "registry", "compile"
// The statuses whose configurations the compile step runs.
bool runs_compile(Status status);

// The registry entry of optimum-neuron that lists a configuration.
struct RegistryMatch {
  std::string compiler_dir;     // "neuronxcc-<version>"
  std::string optimum_version;  // the 0_REGISTRY/<version> folder
  std::string path;             // of the entry file in the repo
};

struct Nearest {
  std::string configuration;
  std::string key;
  std::vector<cache_key::Difference> differences;
};

// A registry entry as the plan compares it with a target (read by remote::scan_registry).
struct RegistryCandidate {
  std::string model_id;
  std::string task;
  std::optional<int64_t> batch_size;
  std::optional<int64_t> sequence_length;
  std::optional<int64_t> tensor_parallel;
  std::string dtype;   // as stored: "bfloat16", "bf16", ...
  std::string target;  // "trn1"/"trn2" as optimum-neuron normalises it, as stored
  RegistryMatch where;
  // The model the entry was made for, when it is another one with the target model's
  // architecture digest (optimum-neuron's lookup and proxy reuse it too).
  std::string same_architecture_as;
  // A traced export: optimum-neuron's filters never select it, and `optimum-cli export neuron`
  // compiles traced models without asking the Hub.
  bool traced = false;
};

struct PlanRow {
  Target target;
  Status status = Status::Compile;
  std::optional<artifact_index::Entry> entry;  // what makes it a hit
  bool recorded = false;                       // `entry` is the local index's own
  uint64_t bytes_to_download = 0;
  size_t files_to_download = 0;
  double compile_seconds_saved = 0;
  std::optional<RegistryMatch> registry;  // Status::Registry: the entry that lists it
  std::string reason;                     // one sentence: why this status
  std::vector<Nearest> nearest;           // for a miss, closest first
  // Under a trust policy: why the store's entry of this key is not installed (unsigned, signed
  // by an unknown key, a bad signature), or ""; and the trusted keys whose signature of the
  // entry used verified.
  std::string refused;
  std::vector<std::string> signed_by;
};

struct Plan {
  std::vector<PlanRow> rows;
  std::string repo;
  std::string repo_origin;         // why this repo: "--repo", "the manifest's cache_repo in F", ...
  std::string store;               // its kind: "hub", "s3", "folder" (storage::kind_name), or ""
  std::vector<std::string> notes;  // facts about the whole plan, shown under the rows
  // The store's revision read (Hub: a commit; other stores have none; empty when nothing needed
  // it: every configuration complete locally and no push to follow), whether the store could be
  // used, and why not. Named hub_* since report format 1; they describe whatever store `store`
  // names.
  std::string hub_revision;
  bool hub_checked = false;
  std::string hub_problem;

  size_t count(Status status) const;
  // Rows whose store entry the trust policy refused.
  size_t refused() const;
};

// Why the store's `entry` may not be installed under `trust`, or nothing. Without a policy every
// entry is installed. A bad signature by a trusted key is refused whether or not signatures are
// required; with require_signatures an entry no trusted key signed is refused too.
std::optional<std::string> refusal(const artifact_index::Entry& entry,
                                   const config::TrustPolicy& trust,
                                   std::vector<std::string>* signed_by = nullptr);

// The index shards that can hold these targets' entries: (compiler version, shard path) pairs.
std::set<std::pair<std::string, std::string>> shards_of(const std::vector<const Target*>& targets);

// `remote` is null when the Hub is not asked (offline, or unreachable: say why in hub_problem).
// The store's entries are installed only as `trust` allows (refusal()); an entry complete in the
// local cache and recorded in its index is this machine's own and is not checked again.
Plan make_plan(const std::vector<Target>& targets, const local::LocalIndex& local,
               remote::RemoteIndex* remote, const std::string& hub_problem,
               const config::TrustPolicy& trust);

// Compile rows that optimum-neuron's registry lists become Registry rows. A candidate matches
// when model (or its architecture), task, batch size, sequence length, tensor parallel degree,
// dtype and compilation target are equal (optimum-neuron's own lookup filters; the entry's target
// against the configuration's normalised one, trn1 or trn2), its compiler folder is the target's
// compiler version and, when the manifest pins one, its optimum-neuron version is that one. The
// checkpoint revision is not compared: NEFFs do not hold the weights. A traced entry of the same
// shape leaves the row Compile, with a reason that says so.
void mark_registry_hits(Plan& plan, const std::vector<RegistryCandidate>& candidates);

// "cached for compiler 2.15.128 and sequence length 4096; you asked for 2.16.1 and 8192"
std::string explain_difference(const std::vector<cache_key::Difference>& differences);

}  // namespace neuron_cache::plan
