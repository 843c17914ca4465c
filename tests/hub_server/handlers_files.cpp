// Downloads: resolve/raw on the hub listener, and the signed LFS object URLs on the CDN listener
// that resolve redirects to.
#include "hash.h"
#include "server.h"

namespace neuron_cache::hub_server {

namespace {
constexpr const char* kBinaryType = "application/octet-stream";
}

void Server::resolve(Call& call, const std::string& type, const std::string& id,
                     const std::string& revision, const std::string& path, bool raw) {
  Identity who = identify(call, ErrorStyle::Hub);
  std::optional<FileEntry> entry;
  std::string commit_oid;
  {
    std::lock_guard lock(state_mutex_);
    const Repo& repo = find_repo(who, type, id);
    const Commit& commit = find_revision(repo, revision);
    commit_oid = commit.oid;
    if (auto it = commit.files.find(path); it != commit.files.end()) entry = it->second;
  }
  if (!entry) {
    // huggingface_hub records the miss under .no_exist/<commit>/, so the commit is still sent.
    throw HttpError{404,
                    "Entry not found: " + path + " does not exist at " + revision,
                    "EntryNotFound",
                    ErrorStyle::Hub,
                    {{"X-Repo-Commit", commit_oid}}};
  }
  call.res.set_header("X-Repo-Commit", commit_oid);
  if (entry->lfs && !raw) {
    // Like the Hub: LFS content is served by storage on another origin, via a signed URL.
    std::string etag = "\"" + entry->sha256 + "\"";
    call.res.set_header("ETag", etag);
    call.res.set_header("X-Linked-Etag", etag);
    call.res.set_header("X-Linked-Size", std::to_string(entry->size));
    call.res.set_header("Location",
                        signed_url(cdn_base(), "GET", "/lfs/objects/" + entry->sha256, ""));
    return send_text(call, 302, "", "text/plain; charset=utf-8");
  }
  std::string etag = "\"" + entry->oid + "\"";
  call.res.set_header("ETag", etag);
  if (!raw && call.req.get_header_value("If-None-Match") == etag) {
    return send_text(call, 304, "", kBinaryType);
  }
  if (entry->lfs) {  // raw: the pointer file git stores
    std::string pointer = lfs_pointer(entry->sha256, entry->size);
    uint64_t size = pointer.size();
    return send_ranged(call, std::nullopt, std::move(pointer), size, kBinaryType);
  }
  send_ranged(call, blobs_.git_path(entry->oid), "", entry->size, kBinaryType);
}

void Server::cdn_download(Call& call, const std::string& sha256) {
  refuse_hub_auth(call);
  check_signature(call);
  auto size = is_hex(sha256, 64) ? blobs_.lfs_size(sha256) : std::nullopt;
  if (!size) {
    throw HttpError{404, "The specified key does not exist: " + sha256, "NoSuchKey",
                    ErrorStyle::S3};
  }
  call.res.set_header("ETag", "\"" + sha256 + "\"");
  send_ranged(call, blobs_.lfs_path(sha256), "", *size, kBinaryType);
}

}  // namespace neuron_cache::hub_server
