// Policies as wrappers around any Store (as sccache's readonly.rs wraps any storage), instead of
// flags checked through the pipeline. They hold a reference: the inner store outlives them.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "neuron_cache/storage/forwarding_store.h"

namespace neuron_cache::storage {

// Every method passes to `inner`, except that nothing can be published.
class ReadOnlyStore : public ForwardingStore {
 public:
  // `reason`: why the run is read-only, for messages ("--read-only", "a pull request from a
  // fork").
  explicit ReadOnlyStore(Store& inner, std::string reason = "--read-only");

  // The writes: refused before anything reaches the inner store.
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  std::string squash_history(const std::string& message) override;
  LeftoverRemoval remove_leftovers(const std::vector<Leftover>& found,
                                   const LeftoverAges& ages) override;
  // Asked before a push: always a reason, so nothing is prepared in vain.
  std::string why_not_writable() override;

 private:
  std::string reason_;
};

// A cache failure is a miss: reads through list_or_failure, stat_or_failure and
// read_small_or_failure that fail operationally (store down, no access, a damaged answer) are a
// Failure value, which consumers count as a miss for this run without keeping it, and the
// failure is kept for the run's report. It never fabricates "absent": the plain list(), stat()
// and read_small() still throw, so a consumer cannot mistake a failure for a missing file.
// Input Errors (a bad path, a malformed request) and CommitConflict still propagate, and so does
// every failure of head() and commit(): a publication that failed must be seen.
class MissOnFailureStore : public ForwardingStore {
 public:
  explicit MissOnFailureStore(Store& inner);

  // A download that throws fails every request as a value; per-file failures are values already.
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  // Keeps the first failure of `operation`; true when `error` is one to turn into a miss.
  bool absorbs(const std::string& operation, const Error& error) override;

  // The failures turned into misses, one line each: the first failure of each operation kind
  // ("list", "stat", "read", "download"), in the order they happened.
  std::vector<std::string> problems() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> operations_seen_;
  std::vector<std::string> problems_;
};

}  // namespace neuron_cache::storage
