// Builds locked to exact bytes (format/lockfile.h): `lock` takes the store's own index entries of
// the manifest's configurations; locked mode (`--locked`) plans from those entries alone, so a
// run installs exactly their files without reading the index, the registry or the model repos.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::pipeline {

// The lockfile's path: `given`, else neuron-cache.lock beside `manifest`.
std::filesystem::path lock_path(const std::filesystem::path& manifest, const std::string& given);
// The lockfile at `path`, or nothing when there is none; throws an input Error for a file that
// is not a lock (lockfile::parse) or larger than one may be.
std::optional<lockfile::Lock> read_lock(const std::filesystem::path& path);
// read_lock(), or an input Error saying how to write it.
lockfile::Lock require_lock(const std::filesystem::path& path, const std::string& manifest);
// Why `lock` does not lock `names` of this very manifest (changed since, a name missing), or "".
std::string lock_problem(const lockfile::Lock& lock, const manifest::Manifest& manifest,
                         const std::vector<std::string>& names, const std::filesystem::path& path);

class LockedMode {
 public:
  explicit LockedMode(RunContext& run) : run_(run) {}

  // The store's index entries of the plan's configurations at the head read. Throws an
  // operational Error when the store could not be read.
  LockStep lock(const plan::Plan& plan);
  // Plans read the lock, not the store. Each selected configuration's target is its locked
  // entry's key and inputs (no model revision is resolved), the store's index is exactly the
  // locked entries (no index, listing or registry read), reads are pinned to the lock's revision
  // on the lock's store, and the run is strict: a locked file the store cannot give is an Error,
  // never a compile. Throws an input Error when the lock does not cover a selected configuration.
  void use_lock(lockfile::Lock lock);
  // use_lock() of the lockfile `given` (empty: neuron-cache.lock beside the manifest), read and
  // checked first: missing, changed since the manifest or not covering a selected configuration
  // is an input Error that says to run `neuron-cache lock` again.
  void use_lockfile(const std::string& given);
  // The targets of the selected configurations, as the lock has them.
  std::vector<plan::Target> locked_targets() const;
  // The lock's entries as the store's index, read at the lock's commit on the lock's store
  // unless `at_head` (a mirror always reads its head).
  std::unique_ptr<remote::RemoteIndex> locked_index(bool at_head = false);
  // After failed downloads of a locked prefetch: when the lock's commit is gone from the Hub (a
  // squashed history), the failed entries again at the head, still checked against the lock.
  void refetch_locked_at_head(const std::vector<artifact_index::Entry>& entries,
                              transfer::PrefetchResult& result);

 private:
  RunContext& run_;
};

}  // namespace neuron_cache::pipeline
