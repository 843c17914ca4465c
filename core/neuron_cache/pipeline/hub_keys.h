// Which entries the Hub's index holds at a commit, remembered in the cache root. The index at a
// commit never changes, so once a push step has read the shards and found every local entry
// there, the next run against the same head learns that nothing is new without reading them
// again (about 10 KB of JSON per configuration to parse). The push step remembers contents ids
// (artifact_index::contents_id: the key and the names of its folders), not bare keys, so a local
// entry that grew since (a profile's run added a graph) is not taken for one the Hub has.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::pipeline {

class HubKeys {
 public:
  // `file` holds {"repo", "revision", "keys"}; another repo or revision there is not used.
  HubKeys(sys::RootedFile file, std::string repo, std::string revision)
      : file_(std::move(file)), repo_(std::move(repo)), revision_(std::move(revision)) {}

  // Whether every key (or contents id) was found in the repo's index at this revision by an
  // earlier run.
  bool has_all(const std::vector<std::string>& keys) const;
  // Records keys (or contents ids) found in the repo's index at this revision (best effort).
  void remember(const std::vector<std::string>& keys) const;

 private:
  sys::RootedFile file_;
  std::string repo_;
  std::string revision_;
};

}  // namespace neuron_cache::pipeline
