#include "neuron_cache/storage/hub_store.h"

#include <algorithm>
#include <map>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/hub_names.h"

namespace neuron_cache::storage {
namespace {

// The Hub's words to the seam's and back: an LFS file's sha256 is the sha256 the store lists.
RemoteEntry to_entry(hub::TreeEntry item) {
  // A regular file's oid is the git blob id of its content; an LFS file's, that of its pointer.
  std::string blob_id = item.is_directory || item.is_lfs() ? "" : item.oid;
  return {std::move(item.path),  item.is_directory,          item.size,
          std::move(item.oid),   std::move(item.lfs_sha256), std::move(item.content_sha256),
          item.last_commit_time, std::move(blob_id)};
}

std::vector<RemoteEntry> to_entries(std::vector<hub::TreeEntry> items) {
  std::vector<RemoteEntry> entries;
  entries.reserve(items.size());
  for (auto& item : items) entries.push_back(to_entry(std::move(item)));
  return entries;
}

hub::TreeEntry to_tree_entry(const RemoteEntry& entry) {
  return {entry.path, entry.is_directory,  entry.size,
          entry.oid,  entry.listed_sha256, entry.content_sha256};
}

CommitResult to_result(hub::CommitResult hub) {
  CommitResult result;
  result.committed = hub.committed;
  result.revision = std::move(hub.commit_oid);
  result.link = std::move(hub.commit_url);
  result.small_files = hub.regular_files;
  result.large_sent = hub.lfs_uploaded;
  result.large_already_stored = hub.lfs_already_stored;
  result.unchanged = hub.unchanged;
  result.deleted = hub.deleted;
  result.bytes_sent = hub.bytes_uploaded;
  result.landed_unanswered = std::move(hub.landed_unanswered);
  return result;
}

}  // namespace

HubStore::HubStore(hub::HubClient& client, std::string repo)
    : client_(client), repo_(std::move(repo)) {
  hub_names::require_repo_id(repo_, "the cache repo", "check the name");
}

std::string HubStore::location() const {
  return "hf://" + repo_;
}

std::string HubStore::head() {
  return client_.repo_info(repo_).sha;
}

std::vector<RemoteEntry> HubStore::list(const std::string& path, bool recursive,
                                        const std::string& revision) {
  return to_entries(
      client_.list_tree(repo_, path, recursive, revision.empty() ? "main" : revision));
}

std::vector<RemoteEntry> HubStore::stat(const std::vector<std::string>& paths,
                                        const std::string& revision) {
  return to_entries(client_.paths_info(repo_, paths, revision.empty() ? "main" : revision));
}

// The version is "<revision>:<git blob id>": a commit on that revision as parent needs no other
// check (the Hub refuses it when main moved), any other parent is checked by the blob id.
SmallFile HubStore::read_versioned(const std::string& path, const std::string& revision,
                                   uint64_t max_bytes) {
  std::string at = revision.empty() ? "main" : revision;
  SmallFile file{client_.read_file(repo_, path, at, max_bytes)};
  file.version = (at == "main" ? "" : at) + ":";
  if (file.content) file.version += git_blob_id(*file.content);
  return file;
}

// The blob id each path of `paths` has at `revision`; absent paths are left out.
std::map<std::string, std::string> HubStore::blob_ids(const std::vector<std::string>& paths,
                                                      const std::string& revision) {
  std::map<std::string, std::string> out;
  for (const RemoteEntry& entry : stat(paths, revision)) {
    if (entry.is_directory) continue;
    if (!entry.git_blob_id.empty()) {
      out[entry.path] = entry.git_blob_id;
    } else if (auto content = client_.read_file(repo_, entry.path, revision, kMaxCheckedBytes)) {
      out[entry.path] = git_blob_id(*content);  // an LFS file: its oid is the pointer's
    }
  }
  return out;
}

// CommitConflict unless every expectation holds at `parent`. Those read at `parent` itself hold:
// the commit on it is refused when main moved.
void HubStore::check_expected(const std::vector<CommitOperation>& operations,
                              const std::string& parent) {
  std::vector<const CommitOperation*> to_check;
  std::vector<std::string> paths;
  for (const auto& op : operations) {
    if (!op.expected.conditional()) continue;
    if (op.expected.token.substr(0, op.expected.token.find(':')) == parent) continue;
    to_check.push_back(&op);
    paths.push_back(op.path);
  }
  if (to_check.empty()) return;
  std::map<std::string, std::string> now = blob_ids(paths, parent);
  for (const CommitOperation* op : to_check) {
    std::optional<std::string> version;
    if (auto it = now.find(op->path); it != now.end()) version = it->second;
    Expected expected = op->expected;
    expected.token = expected.token.substr(expected.token.find(':') + 1);
    if (expected.met_by(version)) continue;
    throw CommitConflict(op->path + " changed on the Hub (" + repo_ +
                         ") since it was read (another writer committed meanwhile): read it "
                         "again, merge and commit again");
  }
}

std::vector<DownloadResult> HubStore::download(const std::string& revision,
                                               std::vector<DownloadRequest>& requests) {
  std::vector<hub::DownloadRequest> asked;
  asked.reserve(requests.size());
  for (const auto& request : requests)
    asked.push_back({request.path, request.fd, to_tree_entry(request.expected), request.on_disk,
                     request.on_progress});
  std::vector<hub::DownloadResult> answers =
      client_.download(repo_, revision.empty() ? "main" : revision, asked);
  std::vector<DownloadResult> results;
  results.reserve(answers.size());
  for (auto& answer : answers)
    results.push_back({answer.ok, std::move(answer.error), answer.bytes, std::move(answer.commit),
                       answer.disk_errno, answer.bytes_resumed});
  return results;
}

bool HubStore::content_matches(const RemoteEntry& entry, std::string_view content) const {
  if (!entry.listed_sha256.empty()) return sha256_hex(content) == entry.listed_sha256;
  if (!entry.oid.empty()) return git_blob_id(content) == entry.oid;
  return entry.content_sha256.empty() || sha256_hex(content) == entry.content_sha256;
}

CommitResult HubStore::commit(const std::vector<CommitOperation>& operations,
                              const std::string& message,
                              const std::optional<std::string>& parent) {
  std::optional<std::string> base = parent;
  bool conditional =
      std::any_of(operations.begin(), operations.end(),
                  [](const CommitOperation& op) { return op.expected.conditional(); });
  if (conditional) {
    // The expectations are checked at one commit, and the commit lands only on that one.
    if (!base || base->empty()) base = head();
    check_expected(operations, *base);
  }
  std::vector<hub::CommitOperation> changes;
  changes.reserve(operations.size());
  for (const auto& op : operations) {
    changes.push_back({op.kind == CommitOperation::Kind::Add ? hub::CommitOperation::Kind::Add
                                                             : hub::CommitOperation::Kind::Delete,
                       op.path, op.local});
  }
  return to_result(client_.commit(repo_, changes, message, base));
}

std::string HubStore::squash_history(const std::string& message) {
  return client_.super_squash(repo_, "main", message);
}

std::vector<RemoteEntry> HubStore::stat_times(const std::vector<std::string>& paths,
                                              const std::string& revision) {
  return to_entries(client_.paths_info(repo_, paths, revision.empty() ? "main" : revision, true));
}

bool HubStore::has_revision(const std::string& revision) {
  return client_.revision_exists(repo_, revision);
}

std::string HubStore::why_not_writable() {
  // Known before any request: without a token the Hub refuses every write.
  if (client_.options().token.empty())
    return hub::no_token(client_.options().audience) + ": nothing was pushed";
  try {
    const hub::WhoAmI& who = client_.whoami();
    if (who.role != "read") return "";
    return "the token \"" + who.token_name + "\" is read-only: nothing was pushed; " +
           hub::give_token(client_.options().audience, "a token with write access");
  } catch (const Error&) {
    return "";  // no answer about the token: the commit itself will say what is wrong
  }
}

Store::Url HubStore::download_url(const std::string& revision, const std::string& path) const {
  return {client_.resolve_url(repo_, revision, path), true};
}

uint64_t HubStore::requests() const {
  return client_.http().stats().requests;
}

}  // namespace neuron_cache::storage
