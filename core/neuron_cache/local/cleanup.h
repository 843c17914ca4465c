// `neuron-cache cleanup`: the semantics of optimum-cli neuron cache cleanup. Always removes FAILED
// entries (cached compiler failures block recompilation forever) and the lock files of LOCKED
// entries, unless a neuronx-cc process runs; optionally EMPTY entries, old compiler folders, or
// the whole root, and always temporary files left in 0_REGISTRY by a writer that died (see
// kAbandonedTemporarySeconds). Nothing is ever deleted through a symlink. Unlike optimum-neuron,
// EMPTY never covers a complete traced export folder (layout::EntryState::Traced): --all keeps it.
//
// --max-size bounds the cache as SCCACHE_CACHE_SIZE bounds sccache's: after the other modes, while
// the cache (total_size: every MODULE_ folder, as status counts) is over the bound, the complete
// entries (SUCCESS, TRACED) are deleted least recently used first. Last use is the later of the
// entry's use record (use_record.h) and its files' newest mtime (an install is a use; entries no
// neuron-cache run touched have only that). An entry whose EntryLock another process holds (a
// compile or a download writing it) is skipped and counted; FAILED, LOCKED and EMPTY entries are
// the other modes' business and never evicted. The local index entries that list an evicted
// folder stay: they are a few KiB, a configuration with a folder missing is a miss already
// (LocalIndex::module_complete), and `run --profile` keeps only what is still complete when it
// grows an entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/local/cache_tree.h"

namespace neuron_cache::local {

// A registry file is written and renamed in well under a second: a temporary one this old has
// lost its writer (nothing records which process writes it, so its age is the only safe sign).
inline constexpr double kAbandonedTemporarySeconds = 3600;

struct CleanupOptions {
  bool remove_empty = false;         // --all
  bool remove_old_versions = false;  // --old-versions
  bool wipe = false;                 // --wipe
  bool dry_run = false;
  std::string installed_compiler;    // needed by --old-versions
  bool compiler_running = false;     // a neuronx-cc process runs: locks are not stale
  std::optional<uint64_t> max_size;  // --max-size: evict until the cache is at most this big
};

struct EvictedEntry {
  std::string path;  // "neuronxcc-<version>/MODULE_...", relative to the root
  uint64_t bytes = 0;
  double last_used = 0;  // seconds since the epoch
};

struct CleanupResult {
  int failed_removed = 0;
  int locks_removed = 0;
  int empty_removed = 0;
  int traced_kept = 0;  // complete traced exports --all left in place
  int staging_removed = 0;
  int temporary_removed = 0;  // abandoned temporary files in 0_REGISTRY
  std::vector<std::string> old_versions_removed;
  bool wiped = false;
  uint64_t bytes_freed = 0;
  // The seeded views of compile runs (compile/seed_view.h) hold hard links to the entries they
  // were seeded with: the front end prunes the idle ones after cleanup_cache (a layer above).
  int view_entries_unseeded = 0;  // deleted entries taken out of idle views
  int views_in_use = 0;
  uint64_t view_bytes_held = 0;  // space of deleted entries that views in use still hold
  std::string skipped_locks_reason;
  std::vector<std::string> removed;  // paths relative to the root (evicted entries: below)
  // --max-size: the cache's total_size before and after eviction (after the other modes), and
  // the entries evicted, least recently used first.
  std::optional<uint64_t> max_size;
  uint64_t size_before = 0;
  uint64_t size_after = 0;
  std::vector<EvictedEntry> evicted;
  int skipped_in_use = 0;  // complete entries it would have evicted whose lock is held

  // optimum-neuron's wording: "Removed 2 failed entries. Freed 1.5 KB."
  std::string summary(bool dry_run) const;
};

CleanupResult cleanup_cache(const LocalCache& cache, const CleanupOptions& options);

// optimum-neuron's sizes: B, KB, MB, GB in steps of 1024 with one decimal.
std::string format_size(uint64_t bytes);

}  // namespace neuron_cache::local
