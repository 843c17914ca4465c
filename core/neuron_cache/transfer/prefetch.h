// `neuron-cache prefetch`: downloads the artifacts of store hits into the local cache. Files of
// many MODULE_ folders download in parallel, each verified against the sha256 in the index
// while it streams; every MODULE_ folder is installed atomically (EntryInstall: model.done
// last), and the local index entry is written only once all of an entry's folders are in place.
// Staging a prefetch killed with -9 (or interrupted) left is reused (its whole, verified files),
// resumed (a large file it had partly downloaded: only the bytes its journal does not list are
// fetched, and the whole file is still verified) or deleted.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::transfer {

struct PrefetchResult {
  size_t modules_installed = 0;
  size_t modules_present = 0;  // already complete locally: not downloaded
  size_t files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
  size_t files_reused = 0;  // staged whole by a killed prefetch: verified, not downloaded again
  uint64_t bytes_reused = 0;
  // Partly downloaded by a killed prefetch, completed and verified: the bytes kept from disk,
  // counted only once the whole file matched its sha256 (bytes_downloaded has the rest).
  size_t files_resumed = 0;
  uint64_t bytes_resumed = 0;
  int staging_reclaimed = 0;                  // abandoned staging folders deleted
  std::vector<std::string> completed;         // keys now complete locally
  std::map<std::string, std::string> failed;  // key -> what went wrong
};
// Adds a later prefetch (a retry, a fetch after waiting for another machine) to `into`: counts
// add up; a key the later one completed is no longer failed, a key it failed has its reason.
PrefetchResult& operator+=(PrefetchResult& into, const PrefetchResult& later);

// One prefetch into a cache at a time (PrefetchLock): a second one waits, telling `on_wait`, then
// downloads only what the first did not install. Files a killed prefetch staged whole are reused,
// the ones it had partly downloaded are resumed; the rest of its staging is deleted.
PrefetchResult prefetch(storage::Store& store, const std::string& revision,
                        const local::LocalIndex& local,
                        const std::vector<artifact_index::Entry>& entries,
                        const std::function<void(const std::string&)>& on_wait = {});

}  // namespace neuron_cache::transfer
