// Watching the runs made in one seeded view (seed_view.h) with inotify: opens of seeded files
// (one watch per .links/<compiler> folder: a directory watch reports opens by the path used, so
// opens of the same inodes through the real cache or another view never show up here), and the
// names created or deleted in the view's compiler folders and at its top.
//
// The watches are kept from one run to the next while the process lives: adding a watch for
// opens makes the kernel walk the folder's cached children (about 0.1 us each, O(entries)),
// once; a run then costs the same whatever the view holds.
#pragma once

#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "neuron_cache/sys/inotify.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::compile {

class SeedView;

class RunWatch {
 public:
  using Key = std::pair<std::string, std::string>;  // compiler folder, name
  struct Events {
    std::set<Key> opened;   // seeded entries a file was opened in
    std::set<Key> created;  // names made in a compiler folder
    std::set<Key> deleted;  // names removed from one
    std::set<std::string> new_compilers;
    bool lost = false;  // the queue overflowed: nothing above is complete
  };

  RunWatch() = default;
  ~RunWatch();
  RunWatch(const RunWatch&) = delete;
  RunWatch& operator=(const RunWatch&) = delete;

  // Before a run: forgets what happened since the last one (other processes' runs, our own
  // seeding), watches the folders not watched yet and starts reading events. False when inotify
  // cannot (no instance left, watch limit reached).
  bool begin(const SeedView& view);
  // After the run: what it did. Rethrows what stopped the reading thread, if anything did.
  Events end();

 private:
  enum class Kind { Opens, Names, Top };
  bool watch(const std::filesystem::path& path, uint32_t mask, Kind kind,
             const std::string& compiler);
  void run();
  void drain(bool keep);
  void note(const inotify_event& event);

  sys::Inotify inotify_;
  sys::UniqueFd wake_;
  std::map<int, std::pair<Kind, std::string>> watches_;
  Events events_;
  std::thread thread_;
  std::exception_ptr failure_;  // what the thread threw, handed to end()
};

}  // namespace neuron_cache::compile
