#include "neuron_cache/storage/policies.h"

#include <algorithm>

namespace neuron_cache::storage {

// ReadOnlyStore --------------------------------------------------------------------------------

ReadOnlyStore::ReadOnlyStore(Store& inner, std::string reason)
    : ForwardingStore(inner), reason_(std::move(reason)) {}

CommitResult ReadOnlyStore::commit(const std::vector<CommitOperation>& /*operations*/,
                                   const std::string& /*message*/,
                                   const std::optional<std::string>& /*parent*/) {
  throw operational_error("this run is read-only (" + reason_ + "): nothing was written to " +
                          inner().location() + "; run without it to publish");
}

std::string ReadOnlyStore::squash_history(const std::string& /*message*/) {
  throw operational_error("this run is read-only (" + reason_ + "): the history of " +
                          inner().location() + " was not squashed; run without it to squash");
}

LeftoverRemoval ReadOnlyStore::remove_leftovers(const std::vector<Leftover>& found,
                                                const LeftoverAges& /*ages*/) {
  LeftoverRemoval out;
  for (const auto& item : found)
    out.kept.push_back(item.path + ": this run is read-only (" + reason_ + ")");
  return out;
}

std::string ReadOnlyStore::why_not_writable() {
  return "read-only (" + reason_ + ")";
}

// MissOnFailureStore ---------------------------------------------------------------------------

MissOnFailureStore::MissOnFailureStore(Store& inner) : ForwardingStore(inner) {}

bool MissOnFailureStore::absorbs(const std::string& operation, const Error& error) {
  if (error.kind() != ErrorKind::Operational) return false;
  if (dynamic_cast<const CommitConflict*>(&error) != nullptr) return false;
  std::lock_guard lock(mutex_);
  if (std::find(operations_seen_.begin(), operations_seen_.end(), operation) ==
      operations_seen_.end()) {
    operations_seen_.push_back(operation);
    problems_.push_back(operation + " failed on " + inner().location() +
                        ", taken as a miss: " + error.what());
  }
  return true;
}

std::vector<std::string> MissOnFailureStore::problems() const {
  std::lock_guard lock(mutex_);
  return problems_;
}

std::vector<DownloadResult> MissOnFailureStore::download(const std::string& revision,
                                                         std::vector<DownloadRequest>& requests) {
  try {
    return inner().download(revision, requests);
  } catch (const Error& error) {
    if (!absorbs("download", error)) throw;
    std::vector<DownloadResult> failed(requests.size());
    for (auto& result : failed) result.error = error.what();
    return failed;
  }
}

}  // namespace neuron_cache::storage
