// The Hugging Face Hub client: the subset of the HTTP API a cache needs (whoami, repos, tree
// listings, verified parallel downloads, one-commit uploads), in the Hub's own words (repos,
// LFS, commits). storage/hub_store.h turns them into the storage seam's. Every call returns
// values or throws an Error whose message says what failed and what to do.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/hub/failures.h"
#include "neuron_cache/net/byte_range.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::hub {

struct WhoAmI {
  std::string name;
  std::string type;  // user, org, app
  std::vector<std::string> orgs;
  std::string token_name;
  std::string role;  // read, write, ...
};

struct RepoInfo {
  std::string id;
  std::string sha;  // head commit of the revision
  bool is_private = false;
};

// One file (or folder) of a repo's tree, as the tree and paths-info APIs list it.
struct TreeEntry {
  std::string path;  // in the repo, '/'-separated
  bool is_directory = false;
  uint64_t size = 0;
  std::string oid;         // the git blob id (of the LFS pointer for LFS files)
  std::string lfs_sha256;  // the content's sha256, for LFS files
  // When the Hub lists no sha256 (a file known from an artifact index): the sha256 of its
  // content, which downloads verify instead.
  std::string content_sha256;
  // When the last commit touching it was made (seconds since 1970): listed only when asked
  // (`expand`), else 0.
  int64_t last_commit_time = 0;
  bool is_lfs() const { return !lfs_sha256.empty(); }
};

struct DownloadRequest {
  std::string path_in_repo;
  int fd = -1;         // destination, written from offset 0; the caller owns it
  TreeEntry expected;  // from a listing or an index: size and ids to verify against
  std::vector<net::ByteRange> on_disk = {};  // already in `fd`: net::RangedFile::on_disk
  std::function<void(const std::vector<net::ByteRange>&)> on_progress = {};
};

struct DownloadResult {
  bool ok = false;
  std::string error;
  uint64_t bytes = 0;
  std::string commit;  // X-Repo-Commit of the answer, or empty
  int disk_errno = 0;  // writing to the destination failed with this errno (net::RangedResult)
  uint64_t bytes_resumed = 0;  // of DownloadRequest::on_disk, kept in the verified file
};

struct CommitOperation {
  enum class Kind { Add, Delete } kind = Kind::Add;
  std::string path_in_repo;
  std::filesystem::path local;  // content to upload for Add
};

struct CommitResult {
  bool committed = false;  // false when nothing changed: no commit was made
  std::string commit_oid;
  std::string commit_url;
  size_t regular_files = 0;  // sent inline in the commit
  size_t lfs_uploaded = 0;
  size_t lfs_already_stored = 0;
  size_t unchanged = 0;
  size_t deleted = 0;
  uint64_t bytes_uploaded = 0;
  // Set when the commit's answer was lost (no answer, 5xx) but reading the head back showed
  // every file in place: what happened, for the user.
  std::string landed_unanswered;
};

struct ClientOptions {
  std::string endpoint = "https://huggingface.co";
  std::string token;
  bool offline = false;
  net::RetryPolicy retry;
  size_t parallel = 8;               // simultaneous transfers
  uint64_t part_size = 64ull << 20;  // ranged parallel download part size
  // How long the Hub may fail to answer (no connection, no answer, 5xx) before it is taken as
  // unreachable for the rest of the run; also the wait for an answer's first byte. A commit's
  // answer may take kCommitAnswerFactor times as long. NEURON_CACHE_HUB_TIMEOUT_MS sets it.
  std::chrono::milliseconds hub_timeout{kDefaultHubTimeout};
  // Who reads the advice of failures (hub/failures.h): the Action sets Audience::Action.
  Audience audience = Audience::CommandLine;

  static constexpr std::chrono::milliseconds kDefaultHubTimeout{15000};
  static constexpr int kCommitAnswerFactor = 4;
};

class HubClient {
 public:
  explicit HubClient(ClientOptions options);
  // The endpoint, token, offline mode, retries (6 attempts) and Hub timeout of the settings;
  // throws an input Error when a knob has a bad value.
  static ClientOptions options_from(const config::Settings& settings);

  // Asked once per client, then remembered: the Hub rate-limits whoami heavily.
  const WhoAmI& whoami();
  // Throws before any write when whoami says the token is read-only: `what` needs a write
  // token, and nothing was sent. A token whoami cannot describe is left to the Hub to judge.
  void require_write_token(const std::string& what);
  // Creates a model repo in `namespace_` (the caller's when empty); returns its id.
  std::string create_repo(const std::string& name, const std::string& namespace_, bool is_private);
  // With `answer_wait`: asked once, its answer waited for that long at most (the caller has
  // another answer to fall back to).
  RepoInfo repo_info(const std::string& repo, const std::string& revision = "main",
                     std::optional<std::chrono::milliseconds> answer_wait = std::nullopt);
  // Whether `revision` resolves in `repo` (false after a super-squash forgot it); throws on any
  // other failure than the Hub's RevisionNotFound.
  bool revision_exists(const std::string& repo, const std::string& revision);
  bool repo_exists(const std::string& repo);
  // Files (and folders) below `path`, following every page. A missing folder gives nothing.
  std::vector<TreeEntry> list_tree(const std::string& repo, const std::string& path = "",
                                   bool recursive = true, const std::string& revision = "main");
  // The entries of these paths that exist; `expand` adds each one's last commit (costly for the
  // Hub: asked in smaller batches).
  std::vector<TreeEntry> paths_info(const std::string& repo, const std::vector<std::string>& paths,
                                    const std::string& revision = "main", bool expand = false);
  // The content of a small file (JSON), or nothing when the repo has no such file. One larger
  // than `max_bytes` is cut off while it streams in and refused.
  std::optional<std::string> read_file(const std::string& repo, const std::string& path,
                                       const std::string& revision = "main",
                                       uint64_t max_bytes = net::kMaxAnswerBytes);
  // Downloads every request in parallel; each file is verified while it streams (sha256 for LFS
  // files, git blob id otherwise) and resumed with Range after a dropped connection.
  std::vector<DownloadResult> download(const std::string& repo, const std::string& revision,
                                       std::vector<DownloadRequest>& requests);
  // Uploads as ONE commit: preupload, LFS batch, PUT or multipart, NDJSON commit. Files the
  // Hub already has (same oid) are not sent again. Throws CommitConflict on 409/412.
  CommitResult commit(const std::string& repo, const std::vector<CommitOperation>& operations,
                      const std::string& message, const std::optional<std::string>& parent_commit,
                      const std::string& revision = "main");

  // Replaces the history of `branch` with one commit of its current files (the Hub's
  // super-squash); returns the new commit id. The only way the Hub frees the LFS storage of
  // deleted files. Irreversible: older revisions no longer resolve.
  std::string super_squash(const std::string& repo, const std::string& branch,
                           const std::string& message);

  // The resolve URL a download of `path_in_repo` asks for (what `download` and `read_file` use;
  // `plan --files` hands it to build systems, so its quoting is the same).
  std::string resolve_url(const std::string& repo, const std::string& revision,
                          const std::string& path_in_repo) const;

  net::HttpEngine& http() { return http_; }
  const net::HttpEngine& http() const { return http_; }
  // Why the Hub was found unreachable in this run (no further request is made), or empty.
  std::string unreachable() const { return http_.unreachable(); }
  const ClientOptions& options() const { return options_; }
  // What the advice of a failed answer of this client depends on: whether a token is sent, who
  // reads it, and the token's namespaces once whoami was asked.
  AdviceContext advice() const;

  // One API request, retried on transient failures; refuses to run offline.
  net::HttpResponse call(net::HttpRequest request, const std::string& what);
  net::HttpResponse call(net::HttpRequest request, const std::string& what,
                         const net::RetryPolicy& retry);
  std::string api(const std::string& path) const;

 private:
  void refuse_missing_route(const std::string& repo, const std::string& what);
  void check_online(const std::string& what) const;
  // Throws an input Error unless `repo` is a Hub repo id: a name like "../api/whoami-v2" would
  // otherwise become another API path, sent with the token.
  static void check_repo(const std::string& repo);

  ClientOptions options_;
  net::HttpEngine http_;
  // Asked once; read by advice() from any thread (a lease's renewal runs on its own).
  mutable std::mutex whoami_mutex_;
  std::optional<WhoAmI> whoami_;
};

// Parses one tree/paths-info entry.
TreeEntry parse_entry(const nlohmann::json& item);

}  // namespace neuron_cache::hub
