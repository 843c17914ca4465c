#include "neuron_cache/local/cleanup.h"

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/local/in_use.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/sys/file_lock.h"

namespace neuron_cache::local {
namespace {

using layout::EntryState;

// Whether a live process holds a lock of either kind on the lock file (an flock, as EntryLock
// and Python's filelock take, or a record lock, as fcntl.lockf takes: which one libneuronxla
// uses is not public). Deleting such a file would let a second writer into the entry.
bool lock_is_held(const sys::SafeDir& dir, const std::string& name) {
  int fd = openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  sys::UniqueFd guard(fd);
  return sys::locked_elsewhere(fd);
}

void clean_module(const sys::SafeDir& compiler, const ModuleEntry& module,
                  const CleanupOptions& options, CleanupResult& result) {
  std::string rel = module.compiler_dir + "/" + module.name;
  auto remove_entry = [&](int& counter) {
    result.bytes_freed += options.dry_run ? module.size_bytes : compiler.remove_tree(module.name);
    result.removed.push_back(rel);
    ++counter;
  };
  if (module.state == EntryState::Failed) {
    remove_entry(result.failed_removed);
  } else if (module.state == EntryState::Locked && options.compiler_running == false) {
    std::optional<sys::SafeDir> dir = compiler.open_subdir(module.name);
    if (!dir) return;
    for (const auto& lock : module.files.lock_files) {
      if (lock_is_held(*dir, lock)) continue;
      result.bytes_freed +=
          dir->entry(lock).value_or(sys::DirEntry{lock, sys::NodeType::Other}).size;
      if (!options.dry_run) dir->remove_file(lock);
      result.removed.push_back(rel + "/" + lock);
      ++result.locks_removed;
    }
  } else if (module.state == EntryState::Empty && options.remove_empty) {
    remove_entry(result.empty_removed);
  } else if (module.state == EntryState::Traced && options.remove_empty) {
    // optimum-neuron's cleanup --all counts it EMPTY and deletes it (format spec 2.4): it is a
    // usable export, so it stays, and the summary says so.
    ++result.traced_kept;
  }
}

bool is_complete(const ModuleEntry& module) {
  return module.state == EntryState::Success || module.state == EntryState::Traced;
}

struct Candidate {
  const ModuleEntry* module = nullptr;
  double last_used = 0;
};

// Whether cleanup removed the entry already (itself or its compiler folder): a dry run of the
// other modes left it on disk, yet it is no longer part of the cache it describes.
bool removed_already(const std::set<std::string>& removed, const ModuleEntry& module) {
  return removed.count(module.compiler_dir) ||
         removed.count(module.compiler_dir + "/" + module.name);
}

// The complete entries of `tree`, least recently used first (ties by path, so runs agree).
std::vector<Candidate> eviction_order(const CacheTree& tree, const std::set<std::string>& removed,
                                      const std::map<EntryName, double>& used) {
  std::vector<Candidate> out;
  for (const auto& compiler : tree.compilers) {
    for (const auto& module : compiler.modules) {
      if (!is_complete(module) || removed_already(removed, module)) continue;
      double last = module.newest_mtime;
      if (auto it = used.find({module.compiler_dir, module.name}); it != used.end()) {
        last = std::max(last, it->second);
      }
      out.push_back({&module, last});
    }
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.last_used, a.module->compiler_dir, a.module->name) <
           std::tie(b.last_used, b.module->compiler_dir, b.module->name);
  });
  return out;
}

enum class Eviction { Evicted, InUse, Gone };

// Deletes one complete entry unless a writer holds its EntryLock, which this holds meanwhile so
// no writer starts on it. A dry run only looks at the lock.
Eviction evict(const sys::SafeDir& compiler, const ModuleEntry& module, bool dry_run,
               uint64_t& freed) {
  std::optional<sys::SafeDir> dir = compiler.open_subdir(module.name);
  if (!dir) return Eviction::Gone;  // deleted, or swapped for a symlink, since the scan
  if (dry_run) {
    freed = module.size_bytes;
    return lock_is_held(*dir, std::string(layout::kEntryLock)) ? Eviction::InUse
                                                               : Eviction::Evicted;
  }
  std::optional<EntryLock> lock = EntryLock::try_acquire(*dir);
  if (!lock) return Eviction::InUse;
  freed = compiler.remove_tree(module.name);
  return Eviction::Evicted;
}

// The compiler folders of the root, opened once each (never through a symlink).
class CompilerFolders {
 public:
  explicit CompilerFolders(const std::filesystem::path& root) : root_(sys::SafeDir::open(root)) {}
  const sys::SafeDir* get(const std::string& name) {
    auto it = open_.find(name);
    if (it == open_.end()) it = open_.emplace(name, root_.open_subdir(name)).first;
    return it->second ? &*it->second : nullptr;
  }

 private:
  sys::SafeDir root_;
  std::map<std::string, std::optional<sys::SafeDir>> open_;
};

// The cache's total_size but for what cleanup removed already (a dry run left it on disk).
uint64_t size_without(const CacheTree& tree, const std::set<std::string>& removed) {
  uint64_t size = total_size(tree);
  for (const auto& compiler : tree.compilers) {
    for (const auto& module : compiler.modules) {
      if (removed_already(removed, module)) size -= module.size_bytes;
    }
  }
  return size;
}

// --max-size: the least recently used complete entries go until the cache is at most the bound.
void evict_to_size(const LocalCache& cache, const CleanupOptions& options, CleanupResult& result) {
  const uint64_t bound = *options.max_size;
  result.max_size = bound;
  CacheTree tree = cache.scan(options.installed_compiler, false);
  std::set<std::string> removed(result.removed.begin(), result.removed.end());
  uint64_t size = size_without(tree, removed);
  result.size_before = size;
  CompilerFolders folders(cache.root());
  std::vector<EntryName> forgotten;
  // What live runs installed or found complete and still use (their export links, their seeds).
  const std::set<EntryName> in_use = entries_in_use(cache.root());
  for (const Candidate& candidate : eviction_order(tree, removed, read_use_records(cache.root()))) {
    if (size <= bound) break;
    const ModuleEntry& module = *candidate.module;
    const sys::SafeDir* compiler = folders.get(module.compiler_dir);
    uint64_t freed = 0;
    Eviction done = Eviction::InUse;
    if (!in_use.count({module.compiler_dir, module.name}))
      done = compiler ? evict(*compiler, module, options.dry_run, freed) : Eviction::Gone;
    if (done == Eviction::InUse) ++result.skipped_in_use;
    if (done != Eviction::InUse) size -= module.size_bytes;  // a folder gone counts no more
    if (done != Eviction::Evicted) continue;
    result.bytes_freed += freed;
    result.evicted.push_back(
        {module.compiler_dir + "/" + module.name, module.size_bytes, candidate.last_used});
    forgotten.emplace_back(module.compiler_dir, module.name);
  }
  result.size_after = size;
  if (!options.dry_run) forget_use(cache.root(), forgotten);
}

// Registry generations go 6 levels deep (format spec 2.2): 8 leaves room without walking forever.
constexpr int kMaxRegistryDepth = 8;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Removes the temporary files (layout::is_temporary_file) below `dir` old enough to be abandoned.
void clean_registry_temporaries(const sys::SafeDir& dir, const std::string& rel, int depth,
                                const CleanupOptions& options, CleanupResult& result) {
  for (const auto& item : dir.list()) {
    std::string path = rel + "/" + item.name;
    if (item.type == sys::NodeType::Directory) {
      if (depth >= kMaxRegistryDepth) continue;
      if (auto sub = dir.open_subdir(item.name))
        clean_registry_temporaries(*sub, path, depth + 1, options, result);
      continue;
    }
    if (!layout::is_temporary_file(item.name)) continue;
    if (seconds_now() - item.mtime < kAbandonedTemporarySeconds) continue;  // maybe being written
    if (!options.dry_run) dir.remove_file(item.name);
    result.bytes_freed += item.size;
    result.removed.push_back(path);
    ++result.temporary_removed;
  }
}

// The root as a parent folder and a plain name: "cache/", "cache/." and "./cache" all name the
// folder "cache" (a trailing slash has an empty filename()).
std::pair<std::filesystem::path, std::string> split_root(const std::filesystem::path& root) {
  std::filesystem::path target = std::filesystem::absolute(root).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  if (target == target.root_path()) {
    throw input_error("refusing to wipe " + target.string() + ": it is not a cache folder");
  }
  return {target.parent_path(), target.filename().string()};
}

CleanupResult wipe(const LocalCache& cache, bool dry_run) {
  CleanupResult result;
  result.wiped = true;
  auto [parent_path, name] = split_root(cache.root());
  auto parent = sys::SafeDir::open(parent_path);
  auto node = parent.entry(name);
  if (node && node->type == sys::NodeType::Symlink) {
    throw input_error("the cache root " + cache.root().string() +
                      " is a symlink: pass --cache-dir with the folder it points to if you want "
                      "that folder wiped");
  }
  result.bytes_freed = dry_run ? parent.tree_size(name) : parent.remove_tree(name);
  return result;
}

// What --max-size did, for the summary line.
void add_size_bound(const CleanupResult& r, std::vector<std::string>& parts) {
  uint64_t evicted_bytes = 0;
  for (const auto& entry : r.evicted) evicted_bytes += entry.bytes;
  if (!r.evicted.empty()) {
    parts.push_back("Evicted " + std::to_string(r.evicted.size()) +
                    " least recently used entries (" + format_size(evicted_bytes) + ")");
  }
  if (r.skipped_in_use > 0) {
    parts.push_back("Kept " + std::to_string(r.skipped_in_use) +
                    " entries in use (a compile or download holds their lock)");
  }
  std::string size = "Cache size " + format_size(r.size_after);
  if (r.size_after <= *r.max_size) {
    parts.push_back(size + ", at most " + format_size(*r.max_size));
  } else {
    parts.push_back(size + ", over the bound of " + format_size(*r.max_size) +
                    ": the rest is in use or not complete (cleanup --all removes EMPTY entries)");
  }
}

}  // namespace

std::string format_size(uint64_t bytes) {
  return format::human_bytes(bytes, format::ByteLabels::OptimumNeuron);
}

std::string CleanupResult::summary(bool dry_run) const {
  std::string prefix = dry_run ? "[DRY RUN] " : "";
  if (wiped) return prefix + "Cache wiped. Freed " + format_size(bytes_freed) + ".";
  std::vector<std::string> parts;
  auto count = [&](int n, const std::string& what) {
    if (n > 0) parts.push_back("Removed " + std::to_string(n) + " " + what);
  };
  count(failed_removed, "failed entries");
  count(locks_removed, "stale lock files");
  if (!skipped_locks_reason.empty())
    parts.push_back("Skipped lock cleanup: " + skipped_locks_reason);
  count(empty_removed, "empty entries");
  if (traced_kept > 0) {
    parts.push_back("Kept " + std::to_string(traced_kept) +
                    " complete traced exports (optimum-cli neuron cache cleanup --all would "
                    "delete them as empty)");
  }
  if (!old_versions_removed.empty()) {
    std::string names;
    for (const auto& v : old_versions_removed) names += (names.empty() ? "" : ", ") + v;
    parts.push_back("Removed old compiler versions: " + names);
  }
  count(staging_removed, "abandoned neuron-cache staging folders");
  count(temporary_removed, "abandoned temporary registry files");
  count(view_entries_unseeded, "deleted entries from idle compile views");
  if (max_size) add_size_bound(*this, parts);
  if (parts.empty()) parts.push_back("Nothing to clean up");
  parts.push_back("Freed " + format_size(bytes_freed));
  if (view_bytes_held > 0) {
    parts.push_back(format_size(view_bytes_held) + " of deleted entries stay held by " +
                    std::to_string(views_in_use) +
                    " compile views in use until their compiles end");
  }
  std::string text = prefix;
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? ". " : "") + parts[i];
  return text + ".";
}

CleanupResult cleanup_cache(const LocalCache& cache, const CleanupOptions& options) {
  if (!cache.exists()) {
    CleanupResult nothing;
    nothing.max_size = options.max_size;
    return nothing;
  }
  if (options.wipe) return wipe(cache, options.dry_run);
  if (options.remove_old_versions && options.installed_compiler.empty()) {
    throw input_error(
        "--old-versions needs the installed compiler version to know which folders "
        "are old: put neuronx-cc on PATH or pass --compiler-version");
  }
  CleanupResult result;
  if (options.compiler_running) {
    result.skipped_locks_reason = "neuronx-cc processes are currently running";
  }
  CacheTree tree = cache.scan(options.installed_compiler, false);
  sys::SafeDir root = sys::SafeDir::open(cache.root());
  for (const auto& compiler : tree.compilers) {
    if (options.remove_old_versions && !compiler.current) {
      result.bytes_freed +=
          options.dry_run ? root.tree_size(compiler.name) : root.remove_tree(compiler.name);
      result.old_versions_removed.push_back(compiler.name);
      result.removed.push_back(compiler.name);
      continue;
    }
    std::optional<sys::SafeDir> dir = root.open_subdir(compiler.name);
    if (!dir) continue;
    for (const auto& module : compiler.modules) clean_module(*dir, module, options, result);
    if (auto registry = dir->open_subdir(layout::kRegistryDir)) {
      clean_registry_temporaries(*registry, compiler.name + "/" + std::string(layout::kRegistryDir),
                                 0, options, result);
    }
  }
  result.bytes_freed +=
      remove_abandoned_staging(cache.root(), options.dry_run, &result.staging_removed);
  if (options.max_size) evict_to_size(cache, options, result);
  return result;
}

}  // namespace neuron_cache::local
