// The Hugging Face Hub backend: a cache repo in optimum-neuron's layout, read at a commit and
// written one commit at a time. Every call is the Hub client's (hub/client.h); this file binds
// the client to one repo and translates the Hub's words (LFS, path in repo, commit oid) into the
// seam's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

class HubStore : public Store {
 public:
  // `client` outlives the store; `repo` is checked as a Hub repo id (an input Error otherwise).
  HubStore(hub::HubClient& client, std::string repo);

  Kind kind() const override { return Kind::Hub; }
  // "hf://org/name" (what `--repo hf://org/name` also accepts).
  std::string location() const override;
  // The repo id, as optimum-cli names it.
  std::string name() const override { return repo_; }
  // The head commit of main.
  std::string head() override;
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  SmallFile read_versioned(const std::string& path, const std::string& revision,
                           uint64_t max_bytes) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  // sha256 for LFS files, the git blob id otherwise.
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  // One commit on top of `parent` (the head when there is none and an operation expects a
  // version); CommitConflict when main moved or a file is no longer as an operation expects.
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  // Asks whoami once: a read-only token cannot push.
  std::string squash_history(const std::string& message) override;
  bool has_revision(const std::string& revision) override;
  // paths-info with `expand`: each path's last commit.
  std::vector<RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                      const std::string& revision) override;
  std::string why_not_writable() override;
  bool checks_conditional_writes() override { return true; }  // the parent commit
  // The resolve URL at `revision`, which needs the token (the repo may be private).
  Url download_url(const std::string& revision, const std::string& path) const override;
  uint64_t requests() const override;
  std::string unreachable() const override { return client_.unreachable(); }
  void look_again() override { client_.http().look_again(); }
  bool offline() const override { return client_.options().offline; }

  hub::HubClient& client() { return client_; }

 private:
  // Files larger than this are never an index or a lease: not read to check their version.
  static constexpr uint64_t kMaxCheckedBytes = 64ull << 20;

  std::map<std::string, std::string> blob_ids(const std::vector<std::string>& paths,
                                              const std::string& revision);
  void check_expected(const std::vector<CommitOperation>& operations, const std::string& parent);

  hub::HubClient& client_;
  std::string repo_;
};

}  // namespace neuron_cache::storage
