#include "neuron_cache/storage/policies.h"

#include <algorithm>

namespace neuron_cache::storage {

// ReadOnlyStore --------------------------------------------------------------------------------

ReadOnlyStore::ReadOnlyStore(Store& inner, std::string reason)
    : inner_(inner), reason_(std::move(reason)) {}

// Identity and reads: the inner store's.
Kind ReadOnlyStore::kind() const {
  return inner_.kind();
}
std::string ReadOnlyStore::location() const {
  return inner_.location();
}
std::string ReadOnlyStore::name() const {
  return inner_.name();
}
std::string ReadOnlyStore::head() {
  return inner_.head();
}
std::vector<RemoteEntry> ReadOnlyStore::list(const std::string& path, bool recursive,
                                             const std::string& revision) {
  return inner_.list(path, recursive, revision);
}
std::vector<RemoteEntry> ReadOnlyStore::stat(const std::vector<std::string>& paths,
                                             const std::string& revision) {
  return inner_.stat(paths, revision);
}
std::optional<std::string> ReadOnlyStore::read_small(const std::string& path,
                                                     const std::string& revision,
                                                     uint64_t max_bytes) {
  return inner_.read_small(path, revision, max_bytes);
}
std::vector<DownloadResult> ReadOnlyStore::download(const std::string& revision,
                                                    std::vector<DownloadRequest>& requests) {
  return inner_.download(revision, requests);
}
// The inner store's policy decides (a read-only run may still count failures as misses).
bool ReadOnlyStore::absorbs(const std::string& operation, const Error& error) {
  return inner_.absorbs(operation, error);
}
bool ReadOnlyStore::content_matches(const RemoteEntry& entry, std::string_view content) const {
  return inner_.content_matches(entry, content);
}

// The one write: refused before anything reaches the inner store.
CommitResult ReadOnlyStore::commit(const std::vector<CommitOperation>& /*operations*/,
                                   const std::string& /*message*/,
                                   const std::optional<std::string>& /*parent*/) {
  throw operational_error("this run is read-only (" + reason_ + "): nothing was written to " +
                          inner_.location() + "; run without it to publish");
}

// Asked before a push: always a reason, so nothing is prepared in vain.
bool ReadOnlyStore::checks_conditional_writes() {
  return inner_.checks_conditional_writes();
}

std::string ReadOnlyStore::squash_history(const std::string& /*message*/) {
  throw operational_error("this run is read-only (" + reason_ + "): the history of " +
                          inner_.location() + " was not squashed; run without it to squash");
}

std::vector<RemoteEntry> ReadOnlyStore::stat_times(const std::vector<std::string>& paths,
                                                   const std::string& revision) {
  return inner_.stat_times(paths, revision);
}

bool ReadOnlyStore::has_revision(const std::string& revision) {
  return inner_.has_revision(revision);
}

std::string ReadOnlyStore::why_not_writable() {
  return "read-only (" + reason_ + ")";
}

// Plain facts about the inner store.
Store::Url ReadOnlyStore::download_url(const std::string& revision, const std::string& path) const {
  return inner_.download_url(revision, path);
}
uint64_t ReadOnlyStore::requests() const {
  return inner_.requests();
}
std::string ReadOnlyStore::unreachable() const {
  return inner_.unreachable();
}
bool ReadOnlyStore::offline() const {
  return inner_.offline();
}

// MissOnFailureStore ---------------------------------------------------------------------------

MissOnFailureStore::MissOnFailureStore(Store& inner) : inner_(inner) {}

bool MissOnFailureStore::absorbs(const std::string& operation, const Error& error) {
  if (error.kind() != ErrorKind::Operational) return false;
  if (dynamic_cast<const CommitConflict*>(&error) != nullptr) return false;
  std::lock_guard lock(mutex_);
  if (std::find(operations_seen_.begin(), operations_seen_.end(), operation) ==
      operations_seen_.end()) {
    operations_seen_.push_back(operation);
    problems_.push_back(operation + " failed on " + inner_.location() +
                        ", taken as a miss: " + error.what());
  }
  return true;
}

std::vector<std::string> MissOnFailureStore::problems() const {
  std::lock_guard lock(mutex_);
  return problems_;
}

// Identity: the inner store's.
Kind MissOnFailureStore::kind() const {
  return inner_.kind();
}
std::string MissOnFailureStore::location() const {
  return inner_.location();
}
std::string MissOnFailureStore::name() const {
  return inner_.name();
}

// Passes through: a run that cannot pin its reads must see why.
std::string MissOnFailureStore::head() {
  return inner_.head();
}

// Pass through, failures included: only the *_or_failure reads (Store) turn a failure into a
// value, so that no caller can take it for "absent".
std::vector<RemoteEntry> MissOnFailureStore::list(const std::string& path, bool recursive,
                                                  const std::string& revision) {
  return inner_.list(path, recursive, revision);
}
std::vector<RemoteEntry> MissOnFailureStore::stat(const std::vector<std::string>& paths,
                                                  const std::string& revision) {
  return inner_.stat(paths, revision);
}
std::optional<std::string> MissOnFailureStore::read_small(const std::string& path,
                                                          const std::string& revision,
                                                          uint64_t max_bytes) {
  return inner_.read_small(path, revision, max_bytes);
}

// A download that throws fails every request as a value; per-file failures are values already.
std::vector<DownloadResult> MissOnFailureStore::download(const std::string& revision,
                                                         std::vector<DownloadRequest>& requests) {
  try {
    return inner_.download(revision, requests);
  } catch (const Error& error) {
    if (!absorbs("download", error)) throw;
    std::vector<DownloadResult> failed(requests.size());
    for (auto& result : failed) result.error = error.what();
    return failed;
  }
}

// Pure comparison: nothing to fail.
bool MissOnFailureStore::content_matches(const RemoteEntry& entry, std::string_view content) const {
  return inner_.content_matches(entry, content);
}

// Passes through, failures included: a push that failed must be reported as failed.
CommitResult MissOnFailureStore::commit(const std::vector<CommitOperation>& operations,
                                        const std::string& message,
                                        const std::optional<std::string>& parent) {
  return inner_.commit(operations, message, parent);
}

// Plain facts about the inner store.
bool MissOnFailureStore::checks_conditional_writes() {
  return inner_.checks_conditional_writes();
}

std::string MissOnFailureStore::squash_history(const std::string& message) {
  return inner_.squash_history(message);
}

std::vector<RemoteEntry> MissOnFailureStore::stat_times(const std::vector<std::string>& paths,
                                                        const std::string& revision) {
  return inner_.stat_times(paths, revision);
}

bool MissOnFailureStore::has_revision(const std::string& revision) {
  return inner_.has_revision(revision);
}

std::string MissOnFailureStore::why_not_writable() {
  return inner_.why_not_writable();
}
Store::Url MissOnFailureStore::download_url(const std::string& revision,
                                            const std::string& path) const {
  return inner_.download_url(revision, path);
}
uint64_t MissOnFailureStore::requests() const {
  return inner_.requests();
}
std::string MissOnFailureStore::unreachable() const {
  return inner_.unreachable();
}
bool MissOnFailureStore::offline() const {
  return inner_.offline();
}

}  // namespace neuron_cache::storage
