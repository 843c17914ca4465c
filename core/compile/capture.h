// Which MODULE_ entries a compile command produced or used. The command runs against a private
// staging cache inside the real root, seeded with hard links of the real cache's complete
// entries, so everything new in it is the command's own work, and opens of seeded files (watched
// with inotify through the staging paths) say which cached entries it reused. Parallel runs each
// have their own staging cache, so they never see each other's work.
//
// Work folders live in <root>/.cache/huggingface/neuron-cache-work/<label>-<8 hex>: same
// filesystem as the entries (hard links, atomic renames), and a path that neither synchronize nor
// optimum-cli's upload_folder publishes. Each is flock-ed by its owner while it lives; one left by
// a killed process is deleted by the next CaptureCache (remove_abandoned_work). Until then it
// only takes space: nothing reads it.
//
// Seeded files are hard links sharing the real entries' inodes: libneuronxla never writes into an
// entry that has model.done, so they are only read. A command that rewrote a complete entry in
// place would change the real cache too.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/safe_dir.h"

namespace neuron_cache {
class LocalCache;
}

namespace neuron_cache::compile {

struct CapturedModule {
  std::string compiler_dir;  // "neuronxcc-<version>"
  std::string name;          // "MODULE_..."
  auto operator<=>(const CapturedModule&) const = default;
};

struct CaptureResult {
  std::vector<CapturedModule> produced;  // new entries that are SUCCESS (model.neff + model.done)
  std::vector<CapturedModule> used;      // seeded entries the command opened a file in
  std::vector<CapturedModule> failed;    // new entries that are not SUCCESS (model.log, ...)
  // New files under neuronxcc-*/0_REGISTRY/ ('/'-paths relative to the cache root): primary
  // files and alias symlinks.
  std::vector<std::string> registry_files;
  bool usage_tracked = true;  // false when inotify was unavailable: nothing was seeded
};

class UsageWatcher;

class CaptureCache {
 public:
  // Creates an empty staging cache for one command (the real root is created when missing) and
  // deletes the work folders of processes that are gone. Symlinked files of the real cache are
  // seeded only when they resolve inside the root or `trusted_link_roots` (the Hugging Face file
  // cache), as LocalCache reads them.
  CaptureCache(const std::filesystem::path& cache_root, const std::string& label,
               std::vector<std::filesystem::path> trusted_link_roots = {});
  ~CaptureCache();  // deletes the staging cache (best effort, never throws)
  CaptureCache(const CaptureCache&) = delete;
  CaptureCache& operator=(const CaptureCache&) = delete;

  // The staging cache: the command's NEURON_COMPILE_CACHE_URL.
  const std::filesystem::path& dir() const;

  // Mirrors every SUCCESS entry and the registry of the real cache into the staging cache with
  // hard links, then watches the seeded entries. Entries that cannot be linked (another
  // filesystem, another user's files under fs.protected_hardlinks) are left out and listed in
  // not_seeded(): the command compiles them again if it needs them. When inotify cannot watch
  // them all, no entry is seeded and usage is not tracked. Only the first call does anything.
  void seed();
  // Seeded entries left out, with the reason ("neuronxcc-.../MODULE_...: why").
  const std::vector<std::string>& not_seeded() const { return not_seeded_; }

  // After the command finished: which entries it produced, used and failed (call it once). A
  // failed entry's model.log stays readable under dir() until this object is destroyed.
  CaptureResult collect();

  // Installs the produced entries into the real cache (atomically, model.done last; an entry
  // already complete there is kept) and the new registry files that are absent there, alias
  // symlinks re-pointed at the real root. Failed entries are not installed. Returns the number
  // of entries installed.
  size_t adopt(const CaptureResult& result);

 private:
  using Key = std::pair<std::string, std::string>;  // compiler dir, module name

  void seed_compiler_dir(const LocalCache& cache, const SafeDir& real_dir);
  void seed_module(const LocalCache& cache, const SafeDir& real_dir, const SafeDir& stage_dir,
                   const std::string& name);
  void seed_registry(const SafeDir& real, const SafeDir& stage, const std::string& rel, int depth);
  void watch_seeded();
  void unseed_all();
  void scan_compiler_dir(const SafeDir& dir, const std::set<Key>& used, CaptureResult& result);
  void scan_registry(const SafeDir& dir, const std::string& rel, int depth,
                     CaptureResult& result) const;
  void adopt_module(const CapturedModule& module, size_t& installed);
  void adopt_registry_file(const std::string& rel_path, bool links);
  std::optional<std::filesystem::path> real_link_target(const SafeDir& stage_dir,
                                                        const std::string& name) const;

  std::filesystem::path root_;
  std::vector<std::filesystem::path> trusted_;
  std::optional<SafeDir> work_area_;
  std::string work_name_;
  std::optional<SafeDir> work_;
  UniqueFd work_lock_;
  std::set<Key> seeded_modules_;
  std::set<std::string> seeded_registry_;
  std::vector<std::string> not_seeded_;
  std::unique_ptr<UsageWatcher> watcher_;
  bool usage_tracked_ = true;
  bool seeded_ = false;
};

// Deletes the staging caches of <root>/.cache/huggingface/neuron-cache-work whose owner is gone
// (their flock is free). Returns how many were removed.
size_t remove_abandoned_work(const std::filesystem::path& cache_root);

}  // namespace neuron_cache::compile
