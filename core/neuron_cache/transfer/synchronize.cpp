#include "neuron_cache/transfer/synchronize.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/remote/commit_on_head.h"

namespace neuron_cache::transfer {
namespace {

namespace fs = std::filesystem;

bool excluded(const std::string& path) {
  if (path == layout::kRootLock || layout::is_lock_file(path)) return true;
  return path.starts_with(".cache/huggingface/") || path == ".git" || path.starts_with(".git/");
}

void walk(const local::LocalCache& cache, const sys::SafeDir& dir, const std::string& prefix,
          std::vector<LocalCacheFile>& out, std::vector<std::string>& skipped) {
  for (const auto& item : dir.list()) {
    std::string path = prefix.empty() ? item.name : prefix + "/" + item.name;
    if (excluded(path)) continue;
    // Half-written by a writer still running or killed: never something to share.
    if (item.type != sys::NodeType::Directory && layout::is_temporary_file(item.name)) continue;
    if (item.type == sys::NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) walk(cache, *sub, path, out, skipped);
    } else if (item.type == sys::NodeType::File) {
      out.push_back({path, dir.path() / item.name, item.size});
    } else if (auto target = item.type == sys::NodeType::Symlink ? cache.link_target(dir, item.name)
                                                                 : std::nullopt) {
      std::error_code error;
      if (fs::is_regular_file(*target, error)) {
        out.push_back({path, *target, static_cast<uint64_t>(fs::file_size(*target, error))});
      } else {
        skipped.push_back(path + " (a symlink to a folder: not uploaded)");
      }
    } else {
      skipped.push_back(path + " (a symlink to a place outside the cache, or not a file)");
    }
  }
}

std::string local_hash(const LocalCacheFile& file, bool lfs) {
  return lfs ? sha256_of_file(file.read_from) : git_blob_id_of_file(file.read_from);
}

bool same_on_hub(const LocalCacheFile& file,
                 const std::map<std::string, storage::RemoteEntry>& remote) {
  auto it = remote.find(file.path);
  if (it == remote.end() || it->second.is_directory || it->second.size != file.size) return false;
  const storage::RemoteEntry& entry = it->second;
  return local_hash(file, !entry.listed_sha256.empty()) == entry.content_id();
}

void pre_sync_cleanup(const local::LocalCache& cache, const SyncOptions& options,
                      SyncResult& result) {
  if (options.compiler_running) {
    result.cleanup_skipped = true;  // failed entries may then be uploaded, as in optimum-neuron
    return;
  }
  local::CleanupOptions cleanup;
  result.cleanup = local::cleanup_cache(cache, cleanup);
}

}  // namespace

std::vector<LocalCacheFile> publishable_files(const local::LocalCache& cache,
                                              std::vector<std::string>& skipped) {
  std::vector<LocalCacheFile> files;
  if (!cache.exists()) return files;
  walk(cache, sys::SafeDir::open(cache.root()), "", files, skipped);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

SyncResult synchronize(storage::Store& store, const local::LocalCache& cache,
                       const SyncOptions& options) {
  if (!cache.exists()) {
    throw input_error("the " + cache.root().string() +
                      " directory does not exist, cannot synchronize: check --cache-dir");
  }
  SyncResult result;
  pre_sync_cleanup(cache, options, result);
  std::vector<LocalCacheFile> files = publishable_files(cache, result.skipped);
  result.local_files = files.size();
  remote::commit_on_head(
      store, options.conflicts, "Hub cache synchronization", result.attempts,
      [&](const std::string& head) {
        std::map<std::string, storage::RemoteEntry> remote;
        for (auto& entry : store.list("", true, head)) remote[entry.path] = entry;
        std::vector<storage::CommitOperation> operations;
        result.already_stored = 0;
        result.bytes_to_upload = 0;
        for (const auto& file : files) {
          if (same_on_hub(file, remote)) {
            ++result.already_stored;
            continue;
          }
          operations.push_back({storage::CommitOperation::Kind::Add, file.path, file.read_from});
          result.bytes_to_upload += file.size;
        }
        result.to_upload = operations.size();
        if (operations.empty()) return;
        net::TransferPhase phase("Uploading");
        result.commit = store.commit(operations, kSyncCommitMessage, head);
      });
  return result;
}

}  // namespace neuron_cache::transfer
