// `neuron-cache lookup`: which configurations of a model a Hub cache repo has registry entries
// for. A constant number of listings finds them (the repo root, then one recursive listing of
// each matching compiler's 0_REGISTRY); only the matching entry files are then downloaded, in
// parallel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hub/client.h"

namespace neuron_cache::remote {

struct LookupQuery {
  std::string model_id;
  std::string compiler_version;  // prefix of neuronxcc-<version>; empty: every compiler
  std::optional<std::string> task;
  std::optional<std::string> instance_type;
  std::optional<std::string> dtype;
  std::optional<long> tensor_parallel_size;
  std::optional<long> batch_size;
  std::optional<long> sequence_length;
};

struct LookupRow {
  std::string task;
  std::string batch_size;
  std::string sequence_length;
  std::string tensor_parallel;
  std::string dtype;
  std::string instance_type;
  std::string compiler_version;
  std::string optimum_version;
  std::string checkpoint_revision;
  std::string path;  // the registry file in the repo

  bool operator<(const LookupRow& other) const;
  bool operator==(const LookupRow& other) const;
};

struct LookupResult {
  std::vector<LookupRow> rows;
  std::vector<std::string> compiler_dirs;  // the neuronxcc-* folders searched
  std::vector<std::string> problems;       // unreadable entry files
  uint64_t listing_requests = 0;
};

LookupResult lookup(hub::HubClient& client, const std::string& repo, const LookupQuery& query);

// "bf16" and "bfloat16" are the same dtype (optimum-neuron's DTYPE_MAPPER).
std::string canonical_dtype(const std::string& dtype);

}  // namespace neuron_cache::remote
