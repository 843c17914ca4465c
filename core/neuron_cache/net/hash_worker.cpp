#include "neuron_cache/net/hash_worker.h"

namespace neuron_cache::net {

HashWorker::~HashWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HashWorker::feed(const std::shared_ptr<Stream>& stream, uint64_t until) {
  if (until <= stream->handed_over) return;
  Range range{stream, stream->handed_over, until};
  stream->handed_over = until;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stream->pending;
    queue_.push_back(std::move(range));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  work_.notify_one();
}

bool HashWorker::finish(Stream& stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return stream.pending == 0; });
  return !stream.unreadable;
}

void HashWorker::drop(const std::shared_ptr<Stream>& stream) {
  if (stream) stream->dropped = true;
}

void HashWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Range range = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    hash(range);
    lock.lock();
    --range.stream->pending;
    done_.notify_all();
  }
}

// Runs without the mutex: only this thread touches the stream's hasher until finish() returns.
void HashWorker::hash(const Range& range) {
  Stream& stream = *range.stream;
  if (stream.dropped || stream.unreadable) return;
  if (!hash_range(stream.fd, stream.hasher, range.from, range.to)) stream.unreadable = true;
}

}  // namespace neuron_cache::net
