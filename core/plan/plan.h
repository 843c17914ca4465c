// The plan: for every declared configuration, whether its artifacts are complete locally,
// available on the Hub, or must be compiled; what fetching costs and what it saves; and, for a
// miss, the nearest cached configurations and how they differ.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "format/artifact_index.h"
#include "plan/targets.h"
#include "remote/remote_index.h"
#include "store/local_index.h"

namespace neuron_cache::plan {

enum class Status { Local, Hub, Compile };
std::string_view status_name(Status status);  // "local", "hub", "compile"

struct Nearest {
  std::string configuration;
  std::string key;
  std::vector<cache_key::Difference> differences;
};

struct PlanRow {
  Target target;
  Status status = Status::Compile;
  std::optional<artifact_index::Entry> entry;  // what makes it a hit
  bool recorded = false;                       // `entry` is the local index's own
  uint64_t bytes_to_download = 0;
  size_t files_to_download = 0;
  double compile_seconds_saved = 0;
  std::string reason;            // one sentence: why this status
  std::vector<Nearest> nearest;  // for a miss, closest first
};

struct Plan {
  std::vector<PlanRow> rows;
  std::string repo;
  std::string hub_revision;
  bool hub_checked = false;
  std::string hub_problem;  // why the Hub was not checked, when it was not

  size_t count(Status status) const;
};

// The index shards that can hold these targets' entries: (compiler version, shard path) pairs.
std::set<std::pair<std::string, std::string>> shards_of(const std::vector<const Target*>& targets);

// `remote` is null when the Hub is not asked (offline, or unreachable: say why in hub_problem).
Plan make_plan(const std::vector<Target>& targets, const LocalIndex& local,
               remote::RemoteIndex* remote, const std::string& hub_problem);

// "cached for compiler 2.15.128 and sequence length 4096; you asked for 2.16.1 and 8192"
std::string explain_difference(const std::vector<cache_key::Difference>& differences);

}  // namespace neuron_cache::plan
