// Which MODULE_ entries a compile command produced or used. The command runs against a staging
// cache inside the real root, so everything new in it is the command's own work, and adopt()
// installs it into the real cache only once complete.
//
// Seeded (the default): the staging cache is a view of seed_view.h holding every complete entry
// of the cache, so the command reuses any of them as libneuronxla would; inotify tells which
// ones it opened and which names it created, so capture costs what the run did, not what the
// cache holds. Parallel runs each have their own view: they never see each other's work, and
// the opens of one never show up in another. When inotify cannot watch the run, it runs in an
// empty staging cache instead (exact, slower: it compiles every graph it needs), and
// not_seeded() says so.
//
// Unseeded: an empty staging cache of its own, <root>/.cache/huggingface/neuron-cache-work/
// <label>-<8 hex>, flock-ed by its owner from before it appears under that name until it is gone
// (SafeDir::make_locked_subdir); one left by a killed process is deleted by the next CaptureCache
// (remove_abandoned_work).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/compile/work_area.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::compile {

struct CapturedModule {
  std::string compiler_dir;  // "neuronxcc-<version>"
  std::string name;          // "MODULE_..."
  auto operator<=>(const CapturedModule&) const = default;
};

struct CaptureResult {
  // New entries that are complete: SUCCESS (model.neff + model.done), or a TRACED export folder
  // (config + *.neuron files) written by a command that succeeded.
  std::vector<CapturedModule> produced;
  std::vector<CapturedModule> used;  // seeded entries the command opened a file in
  // New entries with the marks of a failed compile (model.log without model.neff, a NEFF of
  // their own without model.done, any other file of their own), or any new entry that is not
  // complete when the command failed.
  std::vector<CapturedModule> failed;
  // New entries holding symlinks and no file of their own but the graph (model.hlo_module.pb,
  // compile_flags.json) and lock files: optimum-neuron's hub proxy fetched their files into the
  // HF file cache and linked them (format spec 2.5). They are complete on the Hub, not here: the
  // caller completes them from there (a link is at most a verified local source of a file whose
  // hash the store lists, never copied as it is).
  std::vector<CapturedModule> proxied;
  // New entries of a command that succeeded holding nothing, or nothing but the graph and lock
  // files: no NEFF of their own, no link, no mark of a failure. What libneuronxla leaves when
  // optimum-neuron's hub proxy handed it a NEFF from the HF file cache without linking it here
  // (optimum-neuron's decoder test asserts no .neff in the local cache after a Hub hit). Not
  // failures: the caller completes them from the store when it holds them (their names are the
  // keys), else records nothing.
  std::vector<CapturedModule> unlinked;
  // Files the command wrote under neuronxcc-*/0_REGISTRY/ ('/'-paths relative to the cache
  // root; the staging registry starts empty): primary files and alias symlinks.
  std::vector<std::string> registry_files;
  bool usage_tracked = true;  // false when inotify was unavailable: nothing was seeded
  // inotify dropped events of a seeded run: `used` is unknown, so the run must not be recorded
  // (produced and failed come from a scan of the view and stay exact).
  bool usage_lost = false;
};

class SeedView;
class SeedViews;

class CaptureCache {
 public:
  // An empty staging cache of its own for one command (the real root is created when missing);
  // also deletes the work folders of processes that are gone.
  CaptureCache(const std::filesystem::path& cache_root, const std::string& label);
  // A view of `views` seeded with every complete entry of the cache, its use watched; an empty
  // staging cache when inotify cannot watch it. Entries left out are listed in not_seeded().
  CaptureCache(SeedViews& views, const std::string& label);
  ~CaptureCache();  // gives the view back, or deletes the staging cache (never throws)
  CaptureCache(const CaptureCache&) = delete;
  CaptureCache& operator=(const CaptureCache&) = delete;

  // The staging cache: the command's NEURON_COMPILE_CACHE_URL.
  const std::filesystem::path& dir() const;

  // Complete entries the command cannot reuse, with the reason ("neuronxcc-.../MODULE_...:
  // why"), or why nothing is seeded.
  const std::vector<std::string>& not_seeded() const { return not_seeded_; }

  // After the command finished: which entries it produced, used and failed (call it once). A
  // failed entry's model.log stays readable under dir() until this object is destroyed.
  // `command_succeeded` false (non-zero exit, signal): a traced export folder it wrote may lack
  // files nothing can tell missing, so it counts as failed.
  CaptureResult collect(bool command_succeeded = true);

  // Installs the produced entries into the real cache (atomically: model.done last, a traced
  // export folder renamed into place whole; an entry already complete there is kept) and the new
  // registry files that are absent there, alias symlinks re-pointed at the real root. Failed
  // entries are not installed. Returns the number of entries installed.
  size_t adopt(const CaptureResult& result);

 private:
  void make_work_folder(const std::string& label);
  const sys::SafeDir& stage() const;
  void collect_from_scan(CaptureResult& result);
  void collect_from_events(CaptureResult& result);
  void classify(const std::string& compiler, const std::string& name, CaptureResult& result);
  void scan_registry(const sys::SafeDir& dir, const std::string& rel, int depth,
                     CaptureResult& result) const;
  void adopt_module(const CapturedModule& module, size_t& installed);
  void adopt_registry_file(const std::string& rel_path, bool links);
  std::optional<std::filesystem::path> real_link_target(const sys::SafeDir& stage_dir,
                                                        const std::string& name) const;

  std::filesystem::path root_;
  std::optional<sys::SafeDir> work_area_;
  std::string work_name_;
  std::optional<sys::SafeDir> work_;
  sys::UniqueFd work_lock_;
  SeedViews* views_ = nullptr;
  SeedView* view_ = nullptr;                               // while held
  std::set<std::pair<std::string, std::string>> touched_;  // names of the view the run touched
  bool view_trusted_ = true;  // false: what the run did to the view is unknown
  bool collected_ = false;
  bool command_succeeded_ = true;
  std::vector<std::string> not_seeded_;
  bool usage_tracked_ = true;
};

}  // namespace neuron_cache::compile
