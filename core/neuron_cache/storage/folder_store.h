// A shared folder as a store (file:///path): an NFS or FSx mount that many machines read and
// write, with the same tree as the Hub and S3 stores (neuronxcc-<v>/MODULE_<key>/..., 0_REGISTRY,
// the artifact index files).
//
// Safety: every name below the root is opened with openat(O_NOFOLLOW) through SafeDir, so a
// symlink or a hostile name ("..", "a/../../b") in the store or in a request never reads or
// writes outside the root; symlinks, FIFOs and devices in the store are left out of listings and
// read as missing. A missing root is never created, and an existing one is written only once it
// is proven to be the store (kFolderStoreMarker): an unmounted NFS share would otherwise be
// filled on the local disk under its empty mount point.
//
// Guarantees relied on, and why they hold on NFS (v3 and v4) as on a local file system:
// - rename(2) within one folder is atomic: a reader sees the old file or the whole new one. Every
//   file is written as a dot-file ending in ".tmp" in its destination folder (never listed:
//   layout::is_temporary_file), fsync-ed, then renamed; the folder is fsync-ed after. NFS
//   clients send the rename as one RPC, and close-to-open consistency makes another client that
//   opens the file after the rename see the complete content.
// - fcntl(F_SETLK) record locks reach the server: NLM for NFSv3 (rpc.statd/lockd must run on
//   client and server), in-protocol for NFSv4. flock() is NOT used: kernels before 2.6.12 kept it
//   local to the client, and some mounts (local_lock=flock) still do. POSIX locks are per process
//   and dropped when the process closes ANY descriptor of the file, so in-process callers are
//   serialized by a mutex first and only the lock holder opens the lock file. A holder killed
//   with kill -9 loses the lock (the kernel, or the NFS server's lease/NLM recovery, frees it).
// - Index files and leases (operations with an expectation) are replaced under that lock only,
//   after checking each is still the version the writer read (read_versioned's version: the
//   sha256 of its content) or still absent: two machines merging the same index file cannot lose
//   an entry, one gets CommitConflict and merges again. Artifacts are written before the lock,
//   without it: their paths are content-addressed by the cache key, so two writers write the same
//   bytes.
// - A writer killed at any point leaves at most a dot-file ".<name>.<random>.tmp": never listed,
//   never a partial file under a real name.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::storage {

// Files at most this large get their sha256 as oid in listings (index shards, registry files,
// flags); larger ones (NEFFs) are not read to be listed.
inline constexpr uint64_t kFolderSmallFileBytes = 1 << 20;
// A listing stops with an error beyond this many entries: a cache tree holds a few entries per
// compiled graph, so more means a wrong root (a whole file system), not a cache.
inline constexpr size_t kFolderMaxListedEntries = 500'000;
// Deeper trees are not cache trees (MODULE_ folders and 0_REGISTRY are at most ~8 levels).
inline constexpr int kFolderMaxDepth = 32;
// Downloads copied at once (each one a copy_file_range stream, server-side on NFS 4.2).
inline constexpr size_t kFolderParallelCopies = 4;
// How long a commit waits for another machine's index lock before giving up.
inline constexpr std::chrono::milliseconds kFolderLockWait{60'000};
// The lock file of the index merge, at the root; a dot-file, so never listed nor synchronized.
inline constexpr std::string_view kFolderLockFile = ".neuron-cache.lock";

// The file `neuron-cache create -n file:///path` writes at a store's root. A root is taken for the
// store when it holds this file, is a mount point (the share itself) or already holds a store
// tree (a store filled before this file existed); the first write then leaves the file. A
// dot-file: never listed nor synchronized.
inline constexpr std::string_view kFolderStoreMarker = ".neuron-cache-store";

struct FolderOptions {
  bool offline = false;  // NEURON_CACHE_OFFLINE: the folder is not read nor written
  // The one wait a timeout bounds: file reads and writes are system calls it cannot interrupt.
  std::chrono::milliseconds lock_wait = kFolderLockWait;
};

class FolderStore : public Store {
 public:
  // `root`: an absolute path to an existing folder (its own path may go through symlinks).
  explicit FolderStore(std::filesystem::path root, FolderOptions options = {});
  // NEURON_CACHE_OFFLINE, and NEURON_CACHE_TIMEOUT_MS for the lock wait when it is set.
  static FolderOptions options_from(const config::Settings& settings);

  Kind kind() const override { return Kind::Folder; }
  std::string location() const override;
  std::string head() override { return {}; }
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  SmallFile read_versioned(const std::string& path, const std::string& revision,
                           uint64_t max_bytes) override;
  // The file's mtime and that of a probe file written and removed beside it: both set by the
  // file server's clock on NFS (by the kernel's on a local disk), never by the writers' clocks.
  std::optional<StoreTimes> write_times(const std::string& path,
                                        const std::string& revision) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  // Temporary copies and probes a killed writer left anywhere below the root, and empty MODULE_
  // folders (folder_leftovers.cpp); never through a symlink.
  std::vector<Leftover> leftovers(const LeftoverAges& ages) override;
  LeftoverRemoval remove_leftovers(const std::vector<Leftover>& found,
                                   const LeftoverAges& ages) override;
  std::string why_not_writable() override;
  bool checks_conditional_writes() override { return true; }  // under the index lock
  Url download_url(const std::string& revision, const std::string& path) const override;
  uint64_t requests() const override { return files_touched_; }
  std::string unreachable() const override;
  bool offline() const override { return options_.offline; }

  const std::filesystem::path& root() const { return root_; }

 private:
  DownloadResult download_one(DownloadRequest& request);  // copy_one, logged
  DownloadResult copy_one(DownloadRequest& request);
  // Why the root cannot be taken for the store (see kFolderStoreMarker), or "" when it can.
  std::string why_not_the_store(const sys::SafeDir& root) const;
  // The sha256 of the regular file at `path` now, or nothing when there is none.
  std::optional<std::string> current_sha256(const std::string& path) const;

  std::filesystem::path root_;
  FolderOptions options_;
  std::atomic<uint64_t> files_touched_{0};
};

// Makes `root` a folder store (`neuron-cache create -n file:///path`): creates the folder when its
// parent exists, then writes kFolderStoreMarker. False when the marker was already there.
bool create_folder_store(const std::filesystem::path& root);

// The folder of a "file:///abs/path" URL (percent-decoded); throws an input Error for another
// host ("file://host/...") or a relative path.
std::filesystem::path folder_root_from_url(std::string_view url);

}  // namespace neuron_cache::storage
