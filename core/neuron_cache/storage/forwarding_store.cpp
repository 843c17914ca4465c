#include "neuron_cache/storage/forwarding_store.h"

namespace neuron_cache::storage {

Kind ForwardingStore::kind() const {
  return inner_.kind();
}
std::string ForwardingStore::location() const {
  return inner_.location();
}
std::string ForwardingStore::name() const {
  return inner_.name();
}
std::string ForwardingStore::head() {
  return inner_.head();
}
std::vector<RemoteEntry> ForwardingStore::list(const std::string& path, bool recursive,
                                               const std::string& revision) {
  return inner_.list(path, recursive, revision);
}
std::vector<RemoteEntry> ForwardingStore::stat(const std::vector<std::string>& paths,
                                               const std::string& revision) {
  return inner_.stat(paths, revision);
}
std::vector<RemoteEntry> ForwardingStore::stat_times(const std::vector<std::string>& paths,
                                                     const std::string& revision) {
  return inner_.stat_times(paths, revision);
}
SmallFile ForwardingStore::read_versioned(const std::string& path, const std::string& revision,
                                          uint64_t max_bytes) {
  return inner_.read_versioned(path, revision, max_bytes);
}
std::optional<StoreTimes> ForwardingStore::write_times(const std::string& path,
                                                       const std::string& revision) {
  return inner_.write_times(path, revision);
}
std::vector<Leftover> ForwardingStore::leftovers(const LeftoverAges& ages) {
  return inner_.leftovers(ages);
}
LeftoverRemoval ForwardingStore::remove_leftovers(const std::vector<Leftover>& found,
                                                  const LeftoverAges& ages) {
  return inner_.remove_leftovers(found, ages);
}
std::vector<DownloadResult> ForwardingStore::download(const std::string& revision,
                                                      std::vector<DownloadRequest>& requests) {
  return inner_.download(revision, requests);
}
bool ForwardingStore::absorbs(const std::string& operation, const Error& error) {
  return inner_.absorbs(operation, error);
}
bool ForwardingStore::content_matches(const RemoteEntry& entry, std::string_view content) const {
  return inner_.content_matches(entry, content);
}
CommitResult ForwardingStore::commit(const std::vector<CommitOperation>& operations,
                                     const std::string& message,
                                     const std::optional<std::string>& parent) {
  return inner_.commit(operations, message, parent);
}
std::string ForwardingStore::squash_history(const std::string& message) {
  return inner_.squash_history(message);
}
bool ForwardingStore::has_revision(const std::string& revision) {
  return inner_.has_revision(revision);
}
std::string ForwardingStore::why_not_writable() {
  return inner_.why_not_writable();
}
bool ForwardingStore::checks_conditional_writes() {
  return inner_.checks_conditional_writes();
}
Store::Url ForwardingStore::download_url(const std::string& revision,
                                         const std::string& path) const {
  return inner_.download_url(revision, path);
}
uint64_t ForwardingStore::requests() const {
  return inner_.requests();
}
void ForwardingStore::look_again() {
  inner_.look_again();
}

std::string ForwardingStore::unreachable() const {
  return inner_.unreachable();
}
bool ForwardingStore::offline() const {
  return inner_.offline();
}

}  // namespace neuron_cache::storage
