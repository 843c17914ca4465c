// `neuron-cache synchronize`: publish the local cache to a cache store the way optimum-neuron's
// synchronize_hub_cache does (pre-sync cleanup, then ONE commit "Synchronizing local compiler
// cache." on top of the current head, retried on concurrent commits), but sending only what is
// missing or different in the store and never lock files.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::transfer {

inline constexpr const char* kSyncCommitMessage = "Synchronizing local compiler cache.";

struct SyncOptions {
  net::RetryPolicy conflicts{6, std::chrono::milliseconds(1000), std::chrono::milliseconds(30000)};
  bool compiler_running = false;  // skip the pre-sync cleanup, as optimum-neuron does
};

struct SyncResult {
  storage::CommitResult commit;
  size_t local_files = 0;
  size_t already_stored = 0;  // same path and content: not sent
  size_t to_upload = 0;
  uint64_t bytes_to_upload = 0;
  int attempts = 0;
  local::CleanupResult cleanup;
  bool cleanup_skipped = false;
  std::vector<std::string> skipped;  // untrusted symlinks and other things not uploaded
};

// A file of the local cache as the store will see it.
struct LocalCacheFile {
  std::string path;                 // relative to the store's root
  std::filesystem::path read_from;  // the file itself, or a trusted symlink's target
  uint64_t size = 0;
};

// Every file to publish: lock files, the staging area and .git are left out; symlinks are
// followed only to trusted places.
std::vector<LocalCacheFile> publishable_files(const local::LocalCache& cache,
                                              std::vector<std::string>& skipped);

SyncResult synchronize(storage::Store& store, const local::LocalCache& cache,
                       const SyncOptions& options);

}  // namespace neuron_cache::transfer
