// Seeded views of the local cache, the NEURON_COMPILE_CACHE_URL that compile commands run
// against. libneuronxla takes one cache URL and looks an entry up by its path
// (neuronxcc-<ver>/MODULE_<graph>+<flags>/model.done, then model.neff), so a compile can reuse
// any complete entry only if that URL holds them all. Making one per compile costs O(entries)
// each time; a view persists instead, and is brought up to date with what changed since it was
// last used, so each compile costs O(changes), whatever the cache holds.
//
// A view is <root>/.cache/huggingface/neuron-cache-work/view-<n>/ (same filesystem as the
// entries, never published), used by one compile at a time (flock). A seeded NEFF entry is a real
// folder of hard links to the real entry's files, but for its model.neff: a relative symlink into
// .links/<compiler>/, which holds a hard link to the real NEFF (named <module>.<inode of the real
// folder>.<n>), one folder per compiler version. An open of a NEFF through the view then reports
// (inotify, by the path opened) in that one folder, so one watch tells which seeded entries a
// compile reused (every hit reads the NEFF; reading only an entry's graph or flags is no reuse),
// and opens through the real cache or another view never show up there. Other entries (traced
// exports, whose use may open any of their files; trusted Hub-cache links) are folders of
// symlinks into .links/<compiler>/, one per file. Only the folder and the NEFF's symlink are new
// inodes (a hard link makes none): creating inodes is most of what building a view costs.
//
// What changed in the real cache comes from inotify watches on its compiler folders, held for
// the life of the SeedViews object (one per process). Between processes a view records the stamp
// (inode, mtime, ctime) of each real compiler folder it matches; a folder whose stamp moved is
// compared by readdir alone (names, and the inodes of the real folders). A view left by a killed
// process, from before a reboot or seeded under other trusted symlink roots is rebuilt whole. The
// registry (0_REGISTRY) is not seeded: each run starts with an empty one, so everything in it is
// what the run wrote.
//
// A view is seeded only while it is held (flock), never while a run uses it, so entries are made
// in place: a process killed meanwhile leaves no state file, and the next user rebuilds the view.
// An entry whose files are all regular files at its top (a NEFF entry as libneuronxla writes it)
// is judged complete from one listing, and its files hard-linked by name, never opened (linkat
// without AT_SYMLINK_FOLLOW, each link then checked to be a regular file: a name swapped for a
// symlink meanwhile is never followed); other entries go through LocalCache's inspection, and a
// trusted symlink's target is linked through an fd opened and checked. A rebuilt view's old
// content is moved into a locked folder of the work area and deleted by a background thread once
// the new view is built, like the sweep of abandoned work (remove_abandoned_work); the SeedViews
// destructor waits for it.
//
// Costs and limits: a view is built once per cache and machine boot (and one per compile running
// at once): about 0.3 s of CPU for 10,000 NEFF entries (capture-bench on tmpfs; on ext4 the
// inode allocator adds to it, the more so as more inodes were freed recently). It holds hard
// links to entries deleted from the cache until its next use, a `neuron-cache cleanup`
// (prune_views, idle views only) or its removal after a week unused. Seeded files share the real
// entries' inodes: libneuronxla never writes into an entry that has model.done, so they are only
// read; a command that rewrote a complete entry in place would change the real cache too. Not
// seen: files a command adds to or removes from a seeded entry whose NEFF (any file, for an
// entry of symlinks) it did not open, a file replaced inside a real entry whose folder stays (the
// view keeps the old one, the same graph), and a real folder deleted and made again with the same
// inode number between two processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/compile/run_watch.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {
class LocalCache;
}

namespace neuron_cache::compile {

using ModuleKey = std::pair<std::string, std::string>;  // compiler folder, MODULE_ name

// What seeding touched since the SeedViews object was made: for tests and capture-bench, which
// check that the work per compile does not grow with the cache.
struct SeedStats {
  size_t views_built = 0;      // views emptied and seeded whole (new, killed owner, reboot)
  size_t full_listings = 0;    // compiler folders compared name by name
  size_t names_listed = 0;     // directory entries those comparisons read
  size_t entries_checked = 0;  // real entries inspected
  size_t entries_seeded = 0;
  size_t entries_unseeded = 0;
  size_t links_made = 0;  // hard links and symlinks
};
SeedStats& operator+=(SeedStats& into, const SeedStats& more);

struct SeedOptions {
  // Tests turn inotify off to exercise the fallbacks: without watch_cache every use lists the
  // real compiler folders whole; without watch_runs compiles run unseeded (CaptureCache).
  bool watch_cache = true;
  bool watch_runs = true;
};

class CacheFeed;
class BackgroundWork;

// The seeded entry a hard link of SeedView::links() belongs to, from its name.
std::optional<std::string> module_of_link(const std::string& link_name);
// Whether the entry `name` of a view's compiler folder was seeded (not made by a run): its NEFF,
// model.done or traced config is a symlink into the view's .links folder (a run's entry holds
// files, or symlinks into the Hugging Face file cache).
bool is_seeded_entry(const sys::SafeDir& compiler, const std::string& name);

// One view folder. Only SeedViews changes it; CaptureCache reads its paths while it holds it.
class SeedView {
 public:
  const sys::SafeDir& dir() const { return *dir_; }
  // The folder of hard links of a compiler folder's seeded files; nothing when it has none.
  std::optional<sys::SafeDir> links(const std::string& compiler) const;
  // The compiler folders of the view (one per real one).
  std::vector<std::string> compilers() const;
  // Its runs' watch, kept while the SeedViews object lives.
  RunWatch& watch() { return watch_; }

 private:
  friend class SeedViews;
  std::string name_;
  std::optional<sys::SafeDir> dir_;
  sys::UniqueFd lock_;
  bool busy_ = false;
  std::string token_;   // written in its state file at our last release ("" = never)
  size_t applied_ = 0;  // changes of the feed log already applied
  // Real entries not seeded (incomplete, or they cannot be): compiler -> name -> the stamp of
  // their folder, looked at again only when it moves.
  std::map<std::string, std::map<std::string, std::string>> pending_;
  RunWatch watch_;
};

class SeedViews {
 public:
  // Starts watching the real cache (created when missing) for changes.
  SeedViews(const std::filesystem::path& cache_root,
            std::vector<std::filesystem::path> trusted_link_roots = {}, SeedOptions options = {});
  ~SeedViews();
  SeedViews(const SeedViews&) = delete;
  SeedViews& operator=(const SeedViews&) = delete;

  const std::filesystem::path& root() const { return root_; }
  const SeedOptions& options() const { return options_; }
  SeedStats stats() const;

  // Locks a free view (made when none is free) and brings it up to date; `notes` receives the
  // complete entries left out and why. Safe from several threads.
  SeedView& acquire(std::vector<std::string>& notes);
  // Gives the view back after a run. `touched`: the names the run created, deleted or opened
  // in its compiler folders (removed, then seeded again from the real cache). `trusted` false:
  // what the run did is unknown, so the next user rebuilds the view.
  void release(SeedView& view, const std::set<ModuleKey>& touched, bool trusted);

 private:
  struct Sync;
  SeedView& pick_view();
  void prepare(SeedView& view, std::vector<std::string>& notes);
  void bring_up_to_date(SeedView& view, Sync& sync);
  void take_changes(SeedView& view, Sync& sync);
  void plan_listings(SeedView& view, Sync& sync);
  void plan_from_stamp(const std::string& compiler, Sync& sync);
  void full_listing(SeedView& view, const std::string& compiler, Sync& sync);
  void recheck(SeedView& view, const ModuleKey& key, Sync& sync);
  void recheck_pending(SeedView& view, Sync& sync);
  void consider(SeedView& view, const ModuleKey& key, const sys::SafeDir& real, Sync& sync);
  bool seed(SeedView& view, const ModuleKey& key, const sys::SafeDir& real_compiler,
            const sys::SafeDir& real, uint64_t inode, Sync& sync);
  void unseed(SeedView& view, const ModuleKey& key, Sync& sync);
  void drop_compiler(SeedView& view, const std::string& compiler, Sync& sync);
  void wipe(SeedView& view, Sync& sync);
  void throw_away(const sys::SafeDir& dir);
  void clean_after_run(SeedView& view, const std::set<ModuleKey>& touched, Sync& sync);
  void record_state(SeedView& view, Sync& sync);
  std::string settled_stamp(const SeedView& view, const sys::SafeDir& root,
                            const std::string& compiler);
  bool unchanged_since_applied(const SeedView& view, const std::string& compiler);
  void unlock(SeedView& view);

  std::filesystem::path root_;
  std::vector<std::filesystem::path> trusted_;
  SeedOptions options_;
  std::unique_ptr<local::LocalCache> cache_;
  std::optional<sys::SafeDir> work_area_;
  std::unique_ptr<CacheFeed> feed_;
  std::unique_ptr<BackgroundWork> background_;  // declared after work_area_: done before it goes
  mutable std::mutex mutex_;                    // views_, the feed and its log, stats_
  std::vector<std::unique_ptr<SeedView>> views_;
  SeedStats stats_;
};

// What `neuron-cache cleanup` does to the views: a view hard-links the files of the entries it was
// seeded with, so an entry deleted from the cache keeps its space until the view's next use.
struct ViewsPruned {
  size_t entries_unseeded = 0;  // seeded entries gone from the cache, removed from idle views
  uint64_t bytes_freed = 0;     // space that gave back, but for the entries cleanup removed now
  size_t views_in_use = 0;      // views a run holds: left as they are
  // Space of entries gone from the cache (those cleanup removed now included) that views in use
  // still hold: their runs' end gives it back (SeedViews::release brings the view up to date).
  uint64_t bytes_held = 0;
};

// Removes from every idle view the entries the cache no longer has (or holds replaced), counting
// `removed` ('/'-paths of compiler folders and entries cleanup deleted) as gone, and the
// abandoned work folders. A dry run only counts.
ViewsPruned prune_views(const std::filesystem::path& cache_root,
                        const std::vector<std::string>& removed, bool dry_run);

}  // namespace neuron_cache::compile
