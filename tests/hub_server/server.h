// A loopback stand-in for the Hugging Face Hub HTTP API (the requests tests/README.md lists under
// "What it implements"), used by the tests of neuron-cache's Hub client. Two listeners: "hub" (the
// API, resolve, LFS batch) and "cdn" (signed LFS upload/download URLs, the role S3/CloudFront
// play), so that redirects and presigned URLs cross origins the way they do against huggingface.co.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "blob_store.h"
#include "config.h"
#include "quota.h"
#include "repo_state.h"
#include "traffic.h"

namespace neuron_cache::hub_server {

inline constexpr uint64_t kMiB = 1024 * 1024;
// Lifetime of signed CDN and completion URLs, as `expires_in` tells LFS clients.
inline constexpr int kUrlLifetimeSeconds = 3600;

struct Options {
  std::filesystem::path data_dir;
  std::string host = "127.0.0.1";
  int port = 0;
  int cdn_port = 0;
  size_t page_size = 1000;
  uint64_t lfs_threshold = 10 * kMiB;
  uint64_t multipart_chunk_size = 16 * kMiB;
  uint64_t multipart_threshold = 64 * kMiB;
  // Upload URLs (single PUTs and parts) on the hub listener itself, as a Hub whose storage
  // shares its origin: a client that sends the token to every same-origin URL then leaks it.
  bool storage_on_hub = false;
  // The Hub's request and commit quotas (quota.h); none by default.
  QuotaOptions quotas;
};

enum class Listener { Hub, Cdn };

// How an error body is shaped: Hub API ({"error"} + X-Error-*), Git LFS ({"message"}, its own
// content type) or S3 (XML), so clients meet the same error forms as in production.
enum class ErrorStyle { Hub, Lfs, S3 };

struct HttpError {
  HttpError(int status, std::string message, std::string code = "",
            ErrorStyle style = ErrorStyle::Hub, httplib::Headers headers = {})
      : status(status),
        message(std::move(message)),
        code(std::move(code)),
        style(style),
        headers(std::move(headers)) {}
  int status = 500;
  std::string message;
  std::string code;  // X-Error-Code (Hub), <Code> (S3)
  ErrorStyle style = ErrorStyle::Hub;
  httplib::Headers headers;
};

// One request being served.
struct Call {
  const httplib::Request& req;
  httplib::Response& res;
  const httplib::ContentReader* reader;  // set for POST/PUT/DELETE
  Listener listener;
  std::string raw_path;                 // as sent, still percent-encoded
  std::string raw_query;                // without '?'
  std::vector<std::string> segments;    // decoded path segments
  std::optional<Fault> response_fault;  // drop_after / corrupt / trickle
  bool body_consumed = false;
  std::optional<QuotaState> quota;  // its bucket's count, told in the RateLimit headers

  std::optional<std::string> param(const std::string& name) const;
  // Every value of a repeated parameter (expand=a&expand=b), in order.
  std::vector<std::string> params(const std::string& name) const;
};

// One change of an NDJSON commit.
struct Operation {
  enum class Kind { Put, Delete, DeleteFolder };
  Kind kind = Kind::Put;
  std::string path;
  FileEntry entry;  // Put
};

struct CommitPayload {
  nlohmann::json header;
  std::vector<Operation> operations;
};

// Applies the operations to a copy of the branch's files: 404 EntryNotFound for a missing delete,
// 400 when a file and a folder would share a path.
void apply_operations(FileTree& files, const std::vector<Operation>& operations);

struct Identity {
  const Token* token = nullptr;
  const User* user = nullptr;
};

class Server {
 public:
  Server(Options options, Config config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds both listeners (port 0 picks a free one); throws with the reason on failure.
  void bind();
  int port() const { return port_; }
  int cdn_port() const { return cdn_port_; }
  // Serves until stop() is called from another thread.
  void run();
  void stop();
  // Requests between routing and the end of their response body.
  int active_requests() const { return active_requests_.load(); }
  // Blocks writers of the repo state (used before exiting so no save is cut short).
  std::unique_lock<std::mutex> lock_state() { return std::unique_lock(state_mutex_); }

 private:
  // server.cpp: plumbing
  void install_routes(httplib::Server& server, Listener listener);
  void handle(Listener listener, const httplib::Request& req, httplib::Response& res,
              const httplib::ContentReader* reader);
  void log_request(Listener listener, const httplib::Request& req, const httplib::Response& res);
  void route_hub(Call& call);
  void route_api(Call& call);
  void route_repo_api(Call& call, const std::string& type, const std::string& id,
                      const std::vector<std::string>& rest);
  void route_web(Call& call);
  void route_cdn(Call& call);
  void route_admin(Call& call);
  void send_error(Call& call, const HttpError& error);
  // Counts the request in its quota bucket and sets the RateLimit headers; throws the Hub's 429
  // when none is left.
  void count_quota(Call& call);
  // 429 when `repo` used up its commits (the caller holds state_mutex_).
  void check_commit_quota(const Repo& repo);
  void send_fault_status(Call& call, const Fault& fault);
  // Waits `ms` milliseconds (forever when empty), or until the server stops.
  void wait_fault(std::optional<uint64_t> ms);

  // Bodies in and out.
  std::string read_body(Call& call, uint64_t limit = 64 * kMiB);
  uint64_t receive_body(Call& call, const std::function<void(std::string_view)>& sink);
  void drain_body(Call& call);
  void send_json(Call& call, int status, const nlohmann::json& body,
                 const std::string& content_type = "application/json; charset=utf-8");
  void send_text(Call& call, int status, std::string body, const std::string& content_type);
  void send_file(Call& call, int status, const std::filesystem::path& file, uint64_t offset,
                 uint64_t length, const std::string& content_type);
  // Answers with the whole content or the requested range (206/416).
  void send_ranged(Call& call, std::optional<std::filesystem::path> file, std::string text,
                   uint64_t size, const std::string& content_type);

  // Auth and repo lookup (caller holds state_mutex_ for the repo functions).
  Identity identify(const Call& call, ErrorStyle style) const;
  std::vector<std::string> namespaces_of(const User& user) const;
  bool can_read(const Identity& who, const Repo& repo) const;
  void require_write(const Identity& who, const std::string& ns, ErrorStyle style) const;
  std::map<std::string, Repo>::iterator find_in_any_case(const std::string& key);
  Repo& find_repo(const Identity& who, const std::string& type, const std::string& id,
                  ErrorStyle style = ErrorStyle::Hub);
  const Commit& find_revision(const Repo& repo, const std::string& revision) const;
  Repo& create_repo_locked(const std::string& type, const std::string& id, bool is_private,
                           const std::string& author, const std::vector<SeedFile>& files);
  FileEntry store_seed_file(const std::string& gitattributes, const SeedFile& file);
  void save(const Repo& repo);
  void load_repos();
  std::filesystem::path repo_file(const std::string& type, const std::string& id) const;

  // URLs
  std::string hub_base() const;
  std::string cdn_base() const;
  std::string upload_base() const;  // cdn_base(), or hub_base() with --storage-on-hub
  std::string repo_url(const Repo& repo) const;
  std::string signed_url(const std::string& base, const std::string& method,
                         const std::string& path, const std::string& query) const;
  void check_signature(const Call& call) const;
  void refuse_hub_auth(const Call& call) const;
  std::string next_link(const Call& call, size_t offset) const;

  // handlers_repo.cpp
  void whoami(Call& call);
  // The caller and the repo named in a create/delete body ({name, organization, type}).
  struct RepoRequest {
    Identity who;
    nlohmann::json body;
    std::string type;
    std::string id;
  };
  RepoRequest read_repo_request(Call& call);
  void create_repo(Call& call);
  void delete_repo(Call& call);
  void repo_info(Call& call, const std::string& type, const std::string& id,
                 const std::string& revision);
  void list_tree(Call& call, const std::string& type, const std::string& id,
                 const std::string& revision, const std::string& path);
  void paths_info(Call& call, const std::string& type, const std::string& id,
                  const std::string& revision);
  void list_commits(Call& call, const std::string& type, const std::string& id,
                    const std::string& revision);
  void list_refs(Call& call, const std::string& type, const std::string& id);
  nlohmann::json entry_json(const Repo& repo, const Commit& commit, const TreeEntry& entry,
                            bool expand) const;

  // handlers_files.cpp
  void resolve(Call& call, const std::string& type, const std::string& id,
               const std::string& revision, const std::string& path, bool raw);
  void resolve_cache(Call& call, const std::string& type, const std::string& id,
                     const std::string& commit, const std::string& path);
  // The file `path` at `revision` of a repo the caller may read, and the commit it resolved to;
  // throws the Hub's 404 (with X-Repo-Commit) when the commit lacks it.
  std::pair<FileEntry, std::string> find_file(Call& call, const std::string& type,
                                              const std::string& id, const std::string& revision,
                                              const std::string& path);
  void serve_blob(Call& call, const FileEntry& entry, const std::string& commit_oid, bool raw);
  // A body fault this bodiless answer matched is left to the next matching request (server.cpp).
  void leave_body_fault(Call& call);
  void cdn_download(Call& call, const std::string& sha256);

  // handlers_upload.cpp
  void preupload(Call& call, const std::string& type, const std::string& id,
                 const std::string& revision);
  void lfs_batch(Call& call, const std::string& type, const std::string& id);
  void lfs_verify(Call& call, const std::string& type, const std::string& id);
  void cdn_upload(Call& call, const std::string& sha256);
  void cdn_upload_part(Call& call, const std::string& sha256, const std::string& part);
  void complete_multipart(Call& call);
  // POST /api/{type}s/{id}/super-squash/{branch}: the branch becomes one root commit of its
  // files; commits no branch reaches any more are forgotten (and their LFS storage freed).
  void super_squash(Call& call, const std::string& type, const std::string& id,
                    const std::string& branch);
  void commit(Call& call, const std::string& type, const std::string& id,
              const std::string& revision);
  nlohmann::json upload_action(const std::string& sha256, uint64_t size) const;
  CommitPayload read_commit_payload(Call& call);
  void parse_commit_line(std::string_view text, size_t line_number, CommitPayload& payload);
  FileEntry regular_file(const nlohmann::json& value);
  FileEntry lfs_file(const nlohmann::json& value) const;
  void track_lfs_files(FileTree& files, const std::vector<Operation>& operations);

  Options options_;
  Config config_;
  BlobStore blobs_;
  std::string secret_;  // signs CDN URLs
  httplib::Server hub_;
  httplib::Server cdn_;
  int port_ = 0;
  int cdn_port_ = 0;
  AccessLog log_;
  FaultTable faults_;
  Quotas quotas_;
  // Delay and hang faults wait on this; stop() wakes them so the server can end.
  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
  bool stopping_ = false;

  std::atomic<int> active_requests_{0};
  std::atomic<uint64_t> sequence_{0};
  std::mutex state_mutex_;
  std::map<std::string, Repo> repos_;  // by Repo::key()
  // Part ETags of multipart uploads in progress, by sha256 then part number.
  std::map<std::string, std::map<int, std::string>> part_etags_;
};

// "namespace/name" with both halves as the Hub allows them: letters, digits, -_., at most 96
// characters, alphanumeric at both ends, no "--" or "..".
bool valid_repo_id(const std::string& id);

}  // namespace neuron_cache::hub_server
