// Entries a live run uses, so that `cleanup --max-size` in another process does not evict them
// under it (a prefetch's export links would dangle, a compile would lose its seeds). Each run
// that installs or finds entries complete writes one file under
// <root>/.cache/huggingface/neuron-cache-in-use/ (layout::kInUseDir) naming them, and holds an
// flock on it while it lives: a file whose lock nobody holds was left by a run that ended (or was
// killed) and protects nothing.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/local/use_record.h"
#include "neuron_cache/sys/file_lock.h"

namespace neuron_cache::local {

class InUse {
 public:
  explicit InUse(std::filesystem::path cache_root) : root_(std::move(cache_root)) {}
  ~InUse();
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

  // Adds `entries` to this run's file (made and locked on first use). Best effort and never
  // throws: a cache that cannot be written only loses the protection.
  void add(const std::vector<EntryName>& entries);

 private:
  void write();

  std::filesystem::path root_;
  std::string name_;  // this run's file, once made
  std::optional<sys::FileLock> lock_;
  std::set<EntryName> entries_;
};

// The entries live runs use; files of runs that ended are removed on the way. Bounded: files and
// lines past the bounds are ignored (the bookkeeping of the cache is hostile input too).
std::set<EntryName> entries_in_use(const std::filesystem::path& cache_root);

}  // namespace neuron_cache::local
