// Policies as wrappers around any Store (as sccache's readonly.rs wraps any storage), instead of
// flags checked through the pipeline. They hold a reference: the inner store outlives them.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

// Every method passes to `inner`, except that nothing can be published.
class ReadOnlyStore : public Store {
 public:
  // `reason`: why the run is read-only, for messages ("--read-only", "a pull request from a
  // fork").
  explicit ReadOnlyStore(Store& inner, std::string reason = "--read-only");

  Kind kind() const override;
  std::string location() const override;
  std::string name() const override;
  std::string head() override;
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  std::optional<std::string> read_small(const std::string& path, const std::string& revision,
                                        uint64_t max_bytes) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  bool absorbs(const std::string& operation, const Error& error) override;
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  std::string squash_history(const std::string& message) override;
  bool has_revision(const std::string& revision) override;
  std::vector<RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                      const std::string& revision) override;
  std::string why_not_writable() override;
  bool checks_conditional_writes() override;
  Url download_url(const std::string& revision, const std::string& path) const override;
  uint64_t requests() const override;
  std::string unreachable() const override;
  bool offline() const override;

 private:
  Store& inner_;
  std::string reason_;
};

// A cache failure is a miss: reads through list_or_failure, stat_or_failure and
// read_small_or_failure that fail operationally (store down, no access, a damaged answer) are a
// Failure value, which consumers count as a miss for this run without keeping it, and the
// failure is kept for the run's report. It never fabricates "absent": the plain list(), stat()
// and read_small() still throw, so a consumer cannot mistake a failure for a missing file.
// Input Errors (a bad path, a malformed request) and CommitConflict still propagate, and so does
// every failure of head() and commit(): a publication that failed must be seen.
class MissOnFailureStore : public Store {
 public:
  explicit MissOnFailureStore(Store& inner);

  Kind kind() const override;
  std::string location() const override;
  std::string name() const override;
  std::string head() override;
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  std::optional<std::string> read_small(const std::string& path, const std::string& revision,
                                        uint64_t max_bytes) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  // Keeps the first failure of `operation`; true when `error` is one to turn into a miss.
  bool absorbs(const std::string& operation, const Error& error) override;
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  std::string squash_history(const std::string& message) override;
  bool has_revision(const std::string& revision) override;
  std::vector<RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                      const std::string& revision) override;
  std::string why_not_writable() override;
  bool checks_conditional_writes() override;
  Url download_url(const std::string& revision, const std::string& path) const override;
  uint64_t requests() const override;
  std::string unreachable() const override;
  bool offline() const override;

  // The failures turned into misses, one line each: the first failure of each operation kind
  // ("list", "stat", "read", "download"), in the order they happened.
  std::vector<std::string> problems() const;

 private:
  Store& inner_;
  mutable std::mutex mutex_;
  std::vector<std::string> operations_seen_;
  std::vector<std::string> problems_;
};

}  // namespace neuron_cache::storage
