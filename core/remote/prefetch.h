// `neuron-cache prefetch`: downloads the artifacts of Hub hits into the local cache. Files of
// many MODULE_ folders download in parallel, each verified against the sha256 in the index
// while it streams; every MODULE_ folder is installed atomically (EntryInstall: model.done
// last), and the local index entry is written only once all of an entry's folders are in place.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "format/artifact_index.h"
#include "hub/client.h"
#include "store/local_index.h"

namespace neuron_cache::remote {

struct PrefetchResult {
  size_t modules_installed = 0;
  size_t modules_present = 0;  // already complete locally: not downloaded
  size_t files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
  std::vector<std::string> completed;         // keys now complete locally
  std::map<std::string, std::string> failed;  // key -> what went wrong
};

PrefetchResult prefetch(hub::HubClient& client, const std::string& repo,
                        const std::string& revision, const LocalIndex& local,
                        const std::vector<artifact_index::Entry>& entries);

}  // namespace neuron_cache::remote
