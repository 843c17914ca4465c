// Downloads: resolve/raw on the hub listener, and the signed LFS object URLs on the CDN listener
// that resolve redirects to.
#include "hash.h"
#include "server.h"
#include "text.h"

namespace neuron_cache::hub_server {

namespace {
constexpr const char* kBinaryType = "application/octet-stream";
}

std::pair<FileEntry, std::string> Server::find_file(Call& call, const std::string& type,
                                                    const std::string& id,
                                                    const std::string& revision,
                                                    const std::string& path) {
  Identity who = identify(call, ErrorStyle::Hub);
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  const Commit& commit = find_revision(repo, revision);
  if (auto it = commit.files.find(path); it != commit.files.end()) return {it->second, commit.oid};
  // huggingface_hub records the miss under .no_exist/<commit>/, so the commit is still sent.
  throw HttpError{404,
                  "Entry not found: " + path + " does not exist at " + revision,
                  "EntryNotFound",
                  ErrorStyle::Hub,
                  {{"X-Repo-Commit", commit.oid}}};
}

void Server::resolve(Call& call, const std::string& type, const std::string& id,
                     const std::string& revision, const std::string& path, bool raw) {
  auto [entry, commit_oid] = find_file(call, type, id, revision, path);
  if (entry.lfs && !raw) {
    // Like the Hub: LFS content is served by storage on another origin, via a signed URL.
    std::string etag = "\"" + entry.sha256 + "\"";
    call.res.set_header("X-Repo-Commit", commit_oid);
    call.res.set_header("ETag", etag);
    call.res.set_header("X-Linked-Etag", etag);
    call.res.set_header("X-Linked-Size", std::to_string(entry.size));
    call.res.set_header("Location",
                        signed_url(cdn_base(), "GET", "/lfs/objects/" + entry.sha256, ""));
    return send_text(call, 302, "", "text/plain; charset=utf-8");
  }
  if (!raw) {
    // Like the Hub since 2025: a regular file is served at a commit-pinned URL of the same host
    // (relative Location), and only that final answer names the file (ETag) and the commit, as
    // huggingface_hub reads them.
    std::string prefix = type == "dataset" ? "datasets/" : "models/";
    call.res.set_header("Location", "/api/resolve-cache/" + prefix + id + "/" + commit_oid + "/" +
                                        percent_encode(path, true) +
                                        "?etag=" + percent_encode("\"" + entry.oid + "\""));
    // A fault on the body of the file is meant for the answer that carries it.
    leave_body_fault(call);
    return send_text(call, 307, "", "text/plain; charset=utf-8");
  }
  serve_blob(call, entry, commit_oid, raw);
}

void Server::resolve_cache(Call& call, const std::string& type, const std::string& id,
                           const std::string& commit, const std::string& path) {
  if (!is_hex(commit, 40)) {
    throw HttpError{400, "resolve-cache needs a full commit id, not " + commit, "",
                    ErrorStyle::Hub};
  }
  auto [entry, commit_oid] = find_file(call, type, id, commit, path);
  serve_blob(call, entry, commit_oid, false);
}

void Server::serve_blob(Call& call, const FileEntry& entry, const std::string& commit_oid,
                        bool raw) {
  call.res.set_header("X-Repo-Commit", commit_oid);
  std::string etag = "\"" + entry.oid + "\"";
  call.res.set_header("ETag", etag);
  if (!raw && call.req.get_header_value("If-None-Match") == etag) {
    return send_text(call, 304, "", kBinaryType);
  }
  if (entry.lfs && raw) {  // the pointer file git stores
    std::string pointer = lfs_pointer(entry.sha256, entry.size);
    uint64_t size = pointer.size();
    return send_ranged(call, std::nullopt, std::move(pointer), size, kBinaryType);
  }
  if (entry.lfs) {  // resolve-cache of an LFS file: the Hub never links one, storage serves it
    call.res.set_header("Location",
                        signed_url(cdn_base(), "GET", "/lfs/objects/" + entry.sha256, ""));
    return send_text(call, 302, "", "text/plain; charset=utf-8");
  }
  send_ranged(call, blobs_.git_path(entry.oid), "", entry.size, kBinaryType);
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
