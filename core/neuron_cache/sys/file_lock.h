// Waiting for a lock file with a deadline: the one way the tool waits for another process's lock
// on a file it shares (the statistics, a prefetch into the same cache root, a shared folder's
// index). Every wait is bounded; what the caller does when the deadline passes is its own
// decision (skip, or fail with a message naming the holder).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "neuron_cache/sys/fd.h"

namespace neuron_cache::sys {

class SafeDir;

enum class LockKind {
  Flock,   // flock(2): per open file, what other neuron-cache processes take on local files
  Record,  // a POSIX record lock (fcntl F_SETLK): the kind NFS carries between machines
};

// An exclusive lock held on an open lock file until destroyed (closing the file drops it).
class FileLock {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens (creating, never following a symlink) `name` in `dir` and takes its lock, polling with
  // backoff until `deadline`. `on_wait` is called once, with the lock file's content (a holder's
  // pid, when it wrote one), if the lock is held when first tried. Nothing when the deadline
  // passed with the lock still held elsewhere; throws an operational Error when the file cannot
  // be opened or locked at all.
  static std::optional<FileLock> acquire(
      const SafeDir& dir, const std::string& name, LockKind kind, Clock::time_point deadline,
      const std::function<void(const std::string&)>& on_wait = {});

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;
  ~FileLock();

  int fd() const { return fd_.get(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  FileLock(UniqueFd fd, std::filesystem::path path, LockKind kind)
      : fd_(std::move(fd)), path_(std::move(path)), kind_(kind) {}

  UniqueFd fd_;
  std::filesystem::path path_;
  LockKind kind_ = LockKind::Flock;
};

// Whole-file exclusive locks of both kinds other programs may hold on a lock file they share
// with neuron-cache: flock and a POSIX record lock (fcntl, as Python's fcntl.lockf takes it).
// libneuronxla's kind is not public, and on Linux neither excludes the other. The record lock is
// an open-file-description one (F_OFD_SETLK): it conflicts with classic record locks but, unlike
// them, is not dropped when this process closes some other descriptor of the file.
// Both taken on `fd` (open for writing): true; held elsewhere: false, with neither taken.
// Other failures throw an operational Error naming `path`.
bool try_lock_both_kinds(int fd, const std::filesystem::path& path);
// Whether another open file description holds either kind on `fd`'s file (takes nothing: `fd`
// may be read-only).
bool locked_elsewhere(int fd);

}  // namespace neuron_cache::sys
