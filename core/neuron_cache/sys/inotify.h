// inotify: watches on folders and the events queued for them, read without blocking. What the
// compile step's seeded views (compile/seed_view, compile/run_watch) learn about a run from.
#pragma once

#include <sys/inotify.h>

#include <cstdint>
#include <filesystem>
#include <functional>

#include "neuron_cache/sys/fd.h"

namespace neuron_cache::sys {

class Inotify {
 public:
  // Opens the queue (non-blocking, close-on-exec); false when the system refuses (too many
  // instances, no inotify).
  bool open();
  explicit operator bool() const { return static_cast<bool>(fd_); }
  int fd() const { return fd_.get(); }
  // The watch descriptor of `path` for `mask`, or -1 (see fs.inotify.max_user_watches).
  int watch(const std::filesystem::path& path, uint32_t mask) const;
  void unwatch(int wd) const;
  // Hands every event queued now to `on_event`, in order; returns when the queue is empty or
  // `stop` says so.
  void drain(const std::function<void(const inotify_event&)>& on_event,
             const std::function<bool()>& stop = nullptr) const;

 private:
  UniqueFd fd_;
};

}  // namespace neuron_cache::sys
