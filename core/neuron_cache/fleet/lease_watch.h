// How a machine waiting for another machine's compile lease judges it expired without reading
// one clock against another (issue 42). The holder's times are its own clock's: a waiter whose
// clock runs 10 minutes ahead took a live lease over at once, one 10 minutes behind waited 10
// minutes too long. So a lease's times are used only as differences among themselves (expires -
// heartbeat: the life its holder promised), and its age is measured on the waiter's monotonic
// clock from the moment it first saw that version of the file: a renewal is a new version. A
// version seen for the first time is as old as the store says (its own clock's now minus its own
// clock's write time: S3's Date and Last-Modified, a folder file's mtime against a probe's) when
// the store says so believably, else new: a waiter that arrives late at a dead lease does not
// wait a whole life again where the store keeps times, and never takes a live one too early.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::fleet {

// Beyond the promised life, before a lease that was not renewed is expired: the store's times
// are whole seconds.
inline constexpr int64_t kExpiryGraceSeconds = 2;

using MonotonicClock = std::function<std::chrono::steady_clock::time_point()>;

// The store's age of a file from its times, or nothing when they are not believable (before
// 2020, past the year 2200, written more than a few seconds after the store's now): the reader
// then counts the file's age from its first sight.
std::optional<int64_t> store_age(const storage::StoreTimes& times);

class LeaseWatch {
 public:
  // `clock`: the monotonic clock ages are counted on (tests move it; default steady_clock).
  explicit LeaseWatch(MonotonicClock clock = nullptr);

  struct Sight {
    int64_t age = 0;  // seconds since this version was written, as far as this machine can tell
    // When the store wrote it, on the store's clock, when it said so believably: what the
    // heartbeat is judged against for damage (lease::damaged).
    std::optional<int64_t> store_written;
  };
  // The age of `content` at `path`: since this machine first saw it there, plus the store's age
  // of it then. `store_times` is asked only for a content not seen at `path` before. Safe to call
  // from several threads.
  Sight seen(const std::string& path, const std::string& content,
             const std::function<std::optional<storage::StoreTimes>()>& store_times);

 private:
  struct Version {
    std::string content;
    std::chrono::steady_clock::time_point first_seen;
    int64_t age_then = 0;
    std::optional<int64_t> store_written;
  };
  MonotonicClock clock_;
  std::mutex mutex_;
  std::map<std::string, Version> by_path_;
};

}  // namespace neuron_cache::fleet
