// Reading the artifact index of a Hub cache repo (format/artifact_index.h) with a number of
// requests that does not depend on how many configurations are asked about: the head commit, one
// listing of neuron-cache-index/, then one download per compiler version actually needed.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "format/artifact_index.h"
#include "hub/client.h"

namespace neuron_cache::remote {

class RemoteIndex {
 public:
  // Reads the head commit and lists the index folder; everything later reads that commit. With
  // `copies`, index files are kept there by their Hub oid (verified when read back), so an index
  // that did not change since the last run is not downloaded again.
  static RemoteIndex open(hub::HubClient& client, const std::string& repo,
                          std::filesystem::path copies = {});

  const std::string& repo() const { return repo_; }
  const std::string& revision() const { return revision_; }
  // Versions that have an index file on the Hub.
  std::vector<std::string> compiler_versions() const;
  // The index of one compiler version, downloaded once; empty when there is none.
  const artifact_index::IndexFile& index(const std::string& compiler_version);
  const artifact_index::Entry* find(const std::string& compiler_version, const std::string& key);
  // Entries set aside so far because they could not be read.
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  RemoteIndex(hub::HubClient& client, std::string repo)
      : client_(&client), repo_(std::move(repo)) {}
  std::optional<std::string> read_copy(const std::string& compiler_version) const;
  void keep_copy(const std::string& compiler_version, const std::string& text) const;

  hub::HubClient* client_;
  std::string repo_;
  std::string revision_;
  std::filesystem::path copies_;
  std::map<std::string, hub::RemoteEntry> files_;  // by compiler version
  std::map<std::string, artifact_index::IndexFile> loaded_;
  std::vector<std::string> problems_;
};

}  // namespace neuron_cache::remote
