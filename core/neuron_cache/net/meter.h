// The one progress sink of every transfer: the HTTP engine (Hub API, LFS and CDN, S3 parts) and
// the shared folder's copies add the bytes they move, the stores add what they are about to move
// and each file they finish. Counting is a relaxed atomic add per chunk, never a lock, so the hot
// path stays as fast as without a display; whoever shows progress reads the counters on its own
// clock (report/progress.h). A phase (TransferPhase: "Downloading", "Uploading") frames one command
// step's transfers: counters start from zero with it, and its end is when a final line is due.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace neuron_cache::net {

struct MeterReading {
  uint64_t bytes = 0;
  uint64_t bytes_total = 0;  // 0: not known yet
  uint64_t files = 0;
  uint64_t files_total = 0;
};

// Told when a phase starts and ends, on the thread that runs it (the display prints its final
// line there, before the command prints what follows).
class MeterObserver {
 public:
  virtual ~MeterObserver() = default;
  virtual void phase_started(const std::string& label) = 0;
  virtual void phase_ended() = 0;
};

class TransferMeter {
 public:
  // Bytes and files about to be moved: added to the totals.
  void expect(uint64_t bytes, uint64_t files) {
    bytes_total_.fetch_add(bytes, std::memory_order_relaxed);
    files_total_.fetch_add(files, std::memory_order_relaxed);
  }
  void add_bytes(uint64_t bytes) { bytes_.fetch_add(bytes, std::memory_order_relaxed); }
  void add_file() { files_.fetch_add(1, std::memory_order_relaxed); }
  MeterReading read() const;

  // The observer of later phases (nullptr: none). Its owner clears it before it goes away.
  void observe(MeterObserver* observer);

 private:
  friend class TransferPhase;
  void begin(const std::string& label);
  void end();

  std::atomic<uint64_t> bytes_{0}, bytes_total_{0}, files_{0}, files_total_{0};
  std::mutex phase_mutex_;  // phases start and end a few times per run: never on the hot path
  int depth_ = 0;           // a phase inside another (a retry) belongs to the outer one
  MeterObserver* observer_ = nullptr;
};

// The process's meter: transfers anywhere in a run feed the one display.
TransferMeter& meter();

// Frames one step's transfers ("Downloading", "Uploading"): resets the counters when it is the
// outermost phase and tells the observer.
class TransferPhase {
 public:
  explicit TransferPhase(const std::string& label) { meter().begin(label); }
  ~TransferPhase() { meter().end(); }
  TransferPhase(const TransferPhase&) = delete;
  TransferPhase& operator=(const TransferPhase&) = delete;
};

}  // namespace neuron_cache::net
