// Hashing downloads off the transfer thread. The thread that drives the HTTP transfers also
// wrote every byte and hashed it; for large files the hash (SHA-256 at about 1.4 GB/s here) was
// the larger half of its work. A HashWorker reads the bytes back from the page cache, in file
// order, on a thread of its own, while the transfers go on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "neuron_cache/format/digest.h"

namespace neuron_cache::net {

class HashWorker {
 public:
  // One file's hash, fed bytes [0, handed_over) in order. The transfer thread touches `hasher`
  // only after finish() said every byte handed over went through it.
  struct Stream {
    Stream(int fd_, Hasher hasher_) : fd(fd_), hasher(std::move(hasher_)) {}
    int fd;
    Hasher hasher;
    uint64_t handed_over = 0;          // the transfer thread's side
    std::atomic<bool> dropped{false};  // a restart replaced it: its remaining bytes are skipped
    bool unreadable = false;           // a byte could not be read back (set by the worker)
    size_t pending = 0;                // ranges not hashed yet (guarded by the worker's mutex)
  };

  HashWorker() = default;
  ~HashWorker();  // waits for the ranges handed over (dropped streams' are skipped)
  HashWorker(const HashWorker&) = delete;
  HashWorker& operator=(const HashWorker&) = delete;

  // Hands over bytes [stream->handed_over, until) of the stream's file, already on disk.
  void feed(const std::shared_ptr<Stream>& stream, uint64_t until);
  // Waits until every byte handed over went through the stream's hasher; false when one could
  // not be read back.
  bool finish(Stream& stream);
  // Stops hashing a stream that will never be finished (its file starts again).
  static void drop(const std::shared_ptr<Stream>& stream);

 private:
  struct Range {
    std::shared_ptr<Stream> stream;
    uint64_t from = 0;
    uint64_t to = 0;
  };
  void loop();
  void hash(const Range& range);

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::deque<Range> queue_;
  bool stopping_ = false;
  std::thread thread_;  // started by the first feed()
};

}  // namespace neuron_cache::net
