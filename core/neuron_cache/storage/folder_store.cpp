#include "neuron_cache/storage/folder_store.h"

#include "neuron_cache/format/store_name.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/sys/duration.h"
#include "neuron_cache/sys/file_lock.h"
#include "neuron_cache/sys/mounts.h"
#include "neuron_cache/sys/random.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::storage {
namespace {

namespace fs = std::filesystem;

constexpr size_t kCopyChunk = 8 << 20;   // bytes per copy_file_range call
constexpr size_t kHashBuffer = 1 << 20;  // bytes per read when hashing

// A '/'-separated store path as plain names; throws an input Error for "..", "." or empty parts.
std::vector<std::string> plain_parts(std::string_view path) {
  if (path.empty()) return {};
  std::vector<std::string> parts = layout::split_path(path);
  for (const auto& part : parts) sys::check_plain_name(part);
  return parts;
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "/" + name;
}

// The '/'-path of the first `count` of `parts`.
std::string folders_of(const std::vector<std::string>& parts, size_t count) {
  std::string folders;
  for (size_t i = 0; i < count; ++i) folders = join(folders, parts[i]);
  return folders;
}

// The folder named by the first `count` of `parts` below `root`, or nothing when one is missing,
// a symlink or a file.
std::optional<sys::SafeDir> open_parts(const sys::SafeDir& root,
                                       const std::vector<std::string>& parts, size_t count) {
  return root.open_path(folders_of(parts, count));
}

std::string errno_text() {
  return std::strerror(errno);
}

std::string sha256_of_fd(int fd, const std::string& what) {
  Hasher hasher(HashAlgorithm::Sha256);
  std::string buffer(kHashBuffer, '\0');
  for (off_t offset = 0;;) {
    ssize_t n = pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw operational_error("cannot read " + what + ": " + errno_text());
    if (n == 0) return hasher.hex_digest();
    hasher.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    offset += n;
  }
}

// Copies `size` bytes of `in` into `out`, both from offset 0: copy_file_range (a server-side
// copy on NFS 4.2, a reflink where the file system can), else pread/pwrite.
void copy_fd(int in, int out, uint64_t size, const std::string& what) {
  loff_t in_offset = 0, out_offset = 0;
  while (static_cast<uint64_t>(in_offset) < size) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(kCopyChunk, size - in_offset));
    ssize_t n = copy_file_range(in, &in_offset, out, &out_offset, chunk, 0);
    if (n > 0) {
      net::meter().add_bytes(static_cast<uint64_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw operational_error(what + " ended early: it shrank while being copied");
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP &&
        errno != EBADF) {
      throw operational_error("cannot copy " + what + ": " + errno_text());
    }
    break;  // this pair of file systems cannot: copy through a buffer
  }
  std::string buffer(kHashBuffer, '\0');
  while (static_cast<uint64_t>(in_offset) < size) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - in_offset));
    ssize_t n = pread(in, buffer.data(), chunk, in_offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw operational_error("cannot read " + what + ": " + errno_text());
    if (n == 0) throw operational_error(what + " ended early: it shrank while being copied");
    net::meter().add_bytes(static_cast<uint64_t>(n));
    for (ssize_t done = 0; done < n;) {
      ssize_t w = pwrite(out, buffer.data() + done, static_cast<size_t>(n - done), out_offset);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw operational_error("cannot write " + what + ": " + errno_text());
      done += w;
      out_offset += w;
    }
    in_offset += n;
  }
}

// The sha256 a download must match: the store's, else the index's, else our own oid (a sha256).
std::string expected_sha256(const RemoteEntry& entry) {
  if (!entry.listed_sha256.empty()) return entry.listed_sha256;
  if (!entry.content_sha256.empty()) return entry.content_sha256;
  bool hex64 = entry.oid.size() == 64 &&
               entry.oid.find_first_not_of("0123456789abcdef") == std::string::npos;
  return hex64 ? entry.oid : std::string();
}

std::string small_file_sha256(const sys::SafeDir& dir, const std::string& name) {
  try {
    return sha256_hex(dir.read_small_file(name, kFolderSmallFileBytes));
  } catch (const Error&) {
    return {};  // grew or vanished meanwhile: listed without an id
  }
}

RemoteEntry folder_entry(const std::string& path) {
  RemoteEntry entry;
  entry.path = path;
  entry.is_directory = true;
  return entry;
}

RemoteEntry file_entry(const sys::SafeDir& dir, const sys::DirEntry& item,
                       const std::string& path) {
  RemoteEntry entry;
  entry.path = path;
  entry.size = item.size;
  entry.modified = static_cast<int64_t>(item.mtime);
  if (item.size <= kFolderSmallFileBytes) entry.oid = small_file_sha256(dir, item.name);
  return entry;
}

void list_into(const sys::SafeDir& dir, const std::string& prefix, bool recursive, int depth,
               std::vector<RemoteEntry>& out) {
  if (depth > kFolderMaxDepth) {
    throw operational_error(dir.path().string() + " is more than " +
                            std::to_string(kFolderMaxDepth) +
                            " folders deep: not a cache tree; check the store's root");
  }
  for (const sys::DirEntry& item : dir.list()) {
    // Dot-files and *.tmp are writers' temporary files (and the lock file): never listed.
    if (layout::is_temporary_file(item.name)) continue;
    if (out.size() >= kFolderMaxListedEntries) {
      throw operational_error("more than " + std::to_string(kFolderMaxListedEntries) +
                              " entries below " + dir.path().string() +
                              ": not a cache tree; check the store's root");
    }
    std::string path = join(prefix, item.name);
    if (item.type == sys::NodeType::File) {
      out.push_back(file_entry(dir, item, path));
    } else if (item.type == sys::NodeType::Directory) {
      if (!recursive) {
        out.push_back(folder_entry(path));
        continue;
      }
      if (auto sub = dir.open_subdir(item.name)) list_into(*sub, path, true, depth + 1, out);
    }
    // Symlinks, FIFOs, devices: not followed, not listed.
  }
}

// True when the root already holds what only a store holds: a compiler folder, the registry or the
// artifact index (a store written before kFolderStoreMarker existed).
bool holds_store_tree(const sys::SafeDir& root) {
  for (const sys::DirEntry& item : root.list()) {
    if (item.type != sys::NodeType::Directory) continue;
    if (layout::compiler_version_of(item.name) || item.name == layout::kRegistryDir ||
        item.name == artifact_index::kRemoteDir) {
      return true;
    }
  }
  return false;
}

bool holds_marker(const sys::SafeDir& root) {
  std::optional<sys::DirEntry> marker = root.entry(kFolderStoreMarker);
  return marker && marker->type == sys::NodeType::File;
}

void write_marker(const sys::SafeDir& root) {
  root.publish_file(kFolderStoreMarker,
                    "A neuron-cache store: neuron-cache writes to this folder because this file "
                    "is here (see `neuron-cache create`).\n",
                    true);
  root.sync();
}

sys::SafeDir open_root(const fs::path& root) {
  try {
    return sys::SafeDir::open(root);
  } catch (const Error& e) {
    throw operational_error(std::string(e.what()) +
                            ": the shared folder store is not there; mount it (or create the "
                            "folder) and run again");
  }
}

// A temporary copy of `name` ("." + name + ".<12 random>.tmp") a writer killed mid-copy left: no
// live writer leaves one unchanged for an hour (copies take seconds), so it is deleted by the
// next writer of that name. Up to a NEFF's size each: nothing else would ever sweep them.
constexpr auto kAbandonedCopyAge = std::chrono::hours(1);

void sweep_abandoned_copies(const sys::SafeDir& dir, const std::string& name) {
  const std::string prefix = "." + name + ".";
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& item : dir.list()) {
    if (item.type != sys::NodeType::File || !item.name.starts_with(prefix) ||
        !item.name.ends_with(".tmp") || item.name.size() != prefix.size() + 12 + 4 ||
        now - item.mtime < std::chrono::duration<double>(kAbandonedCopyAge).count()) {
      continue;
    }
    unlinkat(dir.fd(), item.name.c_str(), 0);  // best effort: another writer may sweep it too
  }
}

// Writes `local` as `name` in `dir`: a dot-file ending in ".tmp", fsync, rename, fsync of the
// folder. Returns false when `name` already holds the same bytes (nothing written).
bool write_file(const sys::SafeDir& dir, const std::string& name, const fs::path& local,
                CommitResult& result) {
  sys::UniqueFd in(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) throw operational_error("cannot open " + local.string() + ": " + errno_text());
  struct stat info {};
  if (fstat(in.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw operational_error(local.string() + " is not a regular file: cannot publish it");
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  std::string what = (dir.path() / name).string();
  if (auto there = dir.entry(name);
      there && there->type == sys::NodeType::File && there->size == size) {
    sys::UniqueFd existing = dir.open_read(name);
    if (sha256_of_fd(existing.get(), what) == sha256_of_fd(in.get(), local.string())) {
      ++result.unchanged;
      return false;
    }
  }
  sweep_abandoned_copies(dir, name);
  net::meter().expect(size, 1);  // known only now: an unchanged file is not sent
  std::string temp = "." + name + "." + sys::random_hex(12) + ".tmp";
  try {
    sys::UniqueFd out = dir.create_new(temp);
    copy_fd(in.get(), out.get(), size, what);
    if (fsync(out.get()) != 0)
      throw operational_error("cannot flush " + what + ": " + errno_text());
    dir.move_to(temp, dir, name, false);
  } catch (...) {
    unlinkat(dir.fd(), temp.c_str(), 0);
    throw;
  }
  dir.sync();
  net::meter().add_file();
  (size > kFolderSmallFileBytes ? result.large_sent : result.small_files) += 1;
  result.bytes_sent += size;
  return true;
}

// Removes the folders of `parts` that the deletion emptied, deepest first, down to the second
// level (a MODULE_ folder; a compiler folder and the root stay): gc leaves no empty MODULE_
// folders behind. rmdir fails on a folder that is not empty, so a writer's new file wins. Lease
// and index folders stay: a lease is created in its folder without a retry.
void remove_empty_folders(const sys::SafeDir& root, const std::vector<std::string>& parts) {
  if (!layout::compiler_version_of(parts.front())) return;
  for (size_t depth = parts.size() - 1; depth >= 2; --depth) {
    auto parent = open_parts(root, parts, depth - 1);
    if (!parent || unlinkat(parent->fd(), parts[depth - 1].c_str(), AT_REMOVEDIR) != 0) return;
  }
}

bool delete_file(const sys::SafeDir& root, const std::vector<std::string>& parts) {
  auto dir = open_parts(root, parts, parts.size() - 1);
  if (!dir || !dir->entry(parts.back())) return false;
  dir->remove_file(parts.back());  // unlinkat: a symlink is removed itself, never followed
  dir->sync();
  remove_empty_folders(root, parts);
  return true;
}

sys::SafeDir parent_for_write(const sys::SafeDir& root, const std::vector<std::string>& parts) {
  if (parts.size() == 1) return sys::SafeDir::open(root.path());
  return root.make_path(folders_of(parts, parts.size() - 1));  // refuses a symlink or a file
}

// The index lock: one process-wide mutex (POSIX record locks are per process, and closing any
// descriptor of the file drops them), then fcntl(F_SETLK) on <root>/.neuron-cache.lock, polled
// until `wait` (FolderOptions::lock_wait).
class IndexLock {
 public:
  IndexLock(const sys::SafeDir& root, std::chrono::milliseconds wait) {
    auto deadline = sys::FileLock::Clock::now() + wait;
    if (!process_mutex().try_lock_until(deadline)) throw timeout(root, wait);
    try {
      lock_ = sys::FileLock::acquire(root, std::string(kFolderLockFile), sys::LockKind::Record,
                                     deadline);
    } catch (...) {
      process_mutex().unlock();
      throw;
    }
    if (!lock_) {
      process_mutex().unlock();
      throw timeout(root, wait);
    }
  }
  ~IndexLock() {
    lock_.reset();
    process_mutex().unlock();
  }
  IndexLock(const IndexLock&) = delete;
  IndexLock& operator=(const IndexLock&) = delete;

 private:
  // A flag under a mutex rather than a std::timed_mutex: its try_lock_until() on the steady
  // clock is pthread_mutex_clocklock, which ThreadSanitizer (gcc 12's) does not intercept, so it
  // saw every unlock as one of a mutex never locked, and no order between the committers.
  class ProcessLock {
   public:
    bool try_lock_until(std::chrono::steady_clock::time_point deadline) {
      std::unique_lock lock(mutex_);
      if (!free_.wait_until(lock, deadline, [this] { return !taken_; })) return false;
      taken_ = true;
      return true;
    }
    void unlock() {
      {
        std::lock_guard lock(mutex_);
        taken_ = false;
      }
      free_.notify_one();
    }

   private:
    std::mutex mutex_;
    std::condition_variable free_;
    bool taken_ = false;
  };
  static ProcessLock& process_mutex() {
    static ProcessLock lock;
    return lock;
  }
  static Error timeout(const sys::SafeDir& root, std::chrono::milliseconds wait) {
    return operational_error(
        "the index lock " + (root.path() / kFolderLockFile).string() + " stayed taken for " +
        sys::duration_text(wait) +
        ": another machine is publishing (or its NFS lock was not released); try again later, "
        "or wait longer with NEURON_CACHE_TIMEOUT_MS");
  }

  std::optional<sys::FileLock> lock_;
};

}  // namespace

FolderOptions FolderStore::options_from(const config::Settings& settings) {
  FolderOptions options;
  options.offline = settings.store_offline;
  if (auto wait = settings.timeout_if_set()) options.lock_wait = *wait;
  return options;
}

FolderStore::FolderStore(fs::path root, FolderOptions options)
    : root_(std::move(root)), options_(options) {
  if (!root_.is_absolute()) {
    throw input_error("the folder store " + root_.string() +
                      " is not an absolute path: give file:///absolute/path");
  }
  root_ = root_.lexically_normal();
  if (root_.filename().empty() && root_ != root_.root_path()) root_ = root_.parent_path();
}

namespace {

using Clock = std::chrono::steady_clock;

// The debug log's line for one operation on the folder, as the HTTP engine logs a request.
void log_operation(const std::string& what, const std::string& outcome, Clock::time_point start) {
  if (!log::enabled()) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  log::debug("folder", what + " -> " + outcome + ", " + std::to_string(ms) + " ms");
}

}  // namespace

std::string FolderStore::location() const {
  return "file://" + root_.string();
}

std::vector<RemoteEntry> FolderStore::list(const std::string& path, bool recursive,
                                           const std::string& /*revision*/) {
  auto start = Clock::now();
  std::vector<std::string> parts = plain_parts(path);
  sys::SafeDir root = open_root(root_);
  std::optional<sys::SafeDir> dir = open_parts(root, parts, parts.size());
  std::vector<RemoteEntry> out;
  if (dir) list_into(*dir, path, recursive, static_cast<int>(parts.size()), out);
  log_operation("list " + location() + "/" + path + (recursive ? " (recursive)" : ""),
                dir ? std::to_string(out.size()) + " items" : "absent", start);
  return out;
}

std::vector<RemoteEntry> FolderStore::stat(const std::vector<std::string>& paths,
                                           const std::string& /*revision*/) {
  sys::SafeDir root = open_root(root_);
  std::vector<RemoteEntry> out;
  for (const std::string& path : paths) {
    std::vector<std::string> parts = plain_parts(path);
    if (parts.empty()) continue;
    std::optional<sys::SafeDir> dir = open_parts(root, parts, parts.size() - 1);
    if (!dir) continue;
    std::optional<sys::DirEntry> item = dir->entry(parts.back());
    if (!item) continue;
    if (item->type == sys::NodeType::File) out.push_back(file_entry(*dir, *item, path));
    if (item->type == sys::NodeType::Directory) out.push_back(folder_entry(path));
    // What a writer of the store planted where a file belongs: never followed nor read, and
    // never passed over in silence (its configurations would quietly count as not cached).
    if (item->type == sys::NodeType::Symlink || item->type == sys::NodeType::Other) {
      throw operational_error(
          location() + "/" + path + " is " +
          (item->type == sys::NodeType::Symlink ? "a symbolic link"
                                                : "not a regular file (a FIFO or a device)") +
          ", which neuron-cache never follows or reads: replace it by the file it should be, or "
          "delete it (the next push writes it again)");
    }
  }
  log::debug("folder", "stat of " + std::to_string(paths.size()) + " paths in " + location() +
                           " -> " + std::to_string(out.size()) + " found");
  return out;
}

// The version is the content's sha256: a file rewritten with the same bytes meets the
// expectation, which is right for a merge (what was merged is what is there).
SmallFile FolderStore::read_versioned(const std::string& path, const std::string& /*revision*/,
                                      uint64_t max_bytes) {
  std::vector<std::string> parts = plain_parts(path);
  if (parts.empty()) throw input_error("read_versioned needs a file path, not the store's root");
  sys::SafeDir root = open_root(root_);
  std::optional<std::string> content;
  if (auto dir = open_parts(root, parts, parts.size() - 1)) {
    auto item = dir->entry(parts.back());
    if (item && item->type == sys::NodeType::File) {
      content = dir->read_small_file(parts.back(), static_cast<size_t>(max_bytes));
      ++files_touched_;
    }
  }
  log::debug("folder",
             "read " + location() + "/" + path + " -> " +
                 (content ? format::human_bytes(content->size()) : std::string("absent")));
  if (!content) return {};
  std::string version = sha256_hex(*content);
  return {std::move(content), std::move(version)};
}

// The probe is a dot-file ending in ".tmp": never listed, and swept like a writer's copy when a
// killed reader leaves it.
std::optional<StoreTimes> FolderStore::write_times(const std::string& path,
                                                   const std::string& /*revision*/) {
  if (options_.offline) return std::nullopt;
  try {
    std::vector<std::string> parts = plain_parts(path);
    if (parts.empty()) return std::nullopt;
    sys::SafeDir root = open_root(root_);
    auto dir = open_parts(root, parts, parts.size() - 1);
    auto item = dir ? dir->entry(parts.back()) : std::nullopt;
    if (!item || item->type != sys::NodeType::File) return std::nullopt;
    std::string probe = "." + parts.back() + "." + sys::random_hex(12) + ".tmp";
    struct stat info {};
    {
      sys::UniqueFd fd = dir->create_new(probe);
      int failed = fstat(fd.get(), &info);
      unlinkat(dir->fd(), probe.c_str(), 0);
      if (failed != 0) return std::nullopt;
    }
    ++files_touched_;
    return StoreTimes{static_cast<int64_t>(item->mtime), static_cast<int64_t>(info.st_mtime)};
  } catch (const Error& error) {
    // A read-only mount, a full disk: the reader judges the file by its own monotonic clock.
    log::debug("folder", "no store time for " + path + ": " + error.what());
    return std::nullopt;
  }
}

DownloadResult FolderStore::download_one(DownloadRequest& request) {
  auto start = Clock::now();
  DownloadResult result = copy_one(request);
  log_operation("copy " + location() + "/" + request.path,
                result.ok ? format::human_bytes(result.bytes) : "failed: " + result.error, start);
  return result;
}

DownloadResult FolderStore::copy_one(DownloadRequest& request) {
  DownloadResult result;
  try {
    std::vector<std::string> parts = plain_parts(request.path);
    if (parts.empty()) throw input_error("a download needs a file path");
    sys::SafeDir root = open_root(root_);
    auto dir = open_parts(root, parts, parts.size() - 1);
    auto item = dir ? dir->entry(parts.back()) : std::nullopt;
    if (!item || item->type != sys::NodeType::File) {
      result.error = request.path + " is not in " + location();
      return result;
    }
    sys::UniqueFd in = dir->open_read(parts.back());
    struct stat info {};
    if (fstat(in.get(), &info) != 0) throw operational_error("cannot stat " + request.path);
    uint64_t size = static_cast<uint64_t>(info.st_size);
    ++files_touched_;
    if (size != request.expected.size) {
      result.error = request.path + " has " + std::to_string(size) + " bytes in " + location() +
                     ", " + std::to_string(request.expected.size) + " expected";
      return result;
    }
    copy_fd(in.get(), request.fd, size, request.path);
    if (ftruncate(request.fd, static_cast<off_t>(size)) != 0 && errno != EINVAL) {
      throw operational_error("cannot size the copy of " + request.path + ": " + errno_text());
    }
    if (std::string want = expected_sha256(request.expected); !want.empty()) {
      // Hash what landed in the destination; a write-only destination: the source.
      std::string got;
      try {
        got = sha256_of_fd(request.fd, request.path);
      } catch (const Error&) {
        got = sha256_of_fd(in.get(), request.path);
      }
      if (got != want) {
        result.error = request.path + " has sha256 " + got + " in " + location() + ", " + want +
                       " expected: the file changed or is damaged";
        return result;
      }
    }
    result.ok = true;
    result.bytes = size;
    net::meter().add_file();
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  return result;
}

std::vector<DownloadResult> FolderStore::download(const std::string& /*revision*/,
                                                  std::vector<DownloadRequest>& requests) {
  std::vector<DownloadResult> results(requests.size());
  uint64_t bytes = 0;
  for (const auto& request : requests) bytes += request.expected.size;
  net::meter().expect(bytes, requests.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < requests.size(); i = next++) results[i] = download_one(requests[i]);
  };
  std::vector<std::thread> threads;
  size_t count = std::min(kFolderParallelCopies, requests.size());
  for (size_t i = 1; i < count; ++i) threads.emplace_back(worker);
  worker();
  for (auto& thread : threads) thread.join();
  return results;
}

bool FolderStore::content_matches(const RemoteEntry& entry, std::string_view content) const {
  std::string want = expected_sha256(entry);
  if (want.empty()) return true;
  return entry.size == content.size() && sha256_hex(content) == want;
}

std::optional<std::string> FolderStore::current_sha256(const std::string& path) const {
  std::vector<std::string> parts = plain_parts(path);
  sys::SafeDir root = open_root(root_);
  auto dir = open_parts(root, parts, parts.size() - 1);
  if (!dir) return std::nullopt;
  auto item = dir->entry(parts.back());
  if (!item || item->type != sys::NodeType::File) return std::nullopt;
  sys::UniqueFd fd = dir->open_read(parts.back());
  return sha256_of_fd(fd.get(), path);
}

CommitResult FolderStore::commit(const std::vector<CommitOperation>& operations,
                                 const std::string& /*message*/,
                                 const std::optional<std::string>& /*parent*/) {
  struct Planned {
    const CommitOperation* op;
    std::vector<std::string> parts;
  };
  std::vector<Planned> artifacts, index_files;
  for (const CommitOperation& op : operations) {
    Planned planned{&op, plain_parts(op.path)};
    if (planned.parts.empty()) throw input_error("a commit operation needs a file path");
    if (layout::is_temporary_file(planned.parts.back())) {
      throw input_error(op.path +
                        " has a temporary file's name (a dot-file or *.tmp), which a store never "
                        "lists: give it another name");
    }
    (op.expected.conditional() ? index_files : artifacts).push_back(std::move(planned));
  }
  CommitResult result;
  sys::SafeDir root = open_root(root_);
  if (std::string why = why_not_the_store(root); !why.empty()) throw operational_error(why);
  if (!holds_marker(root)) write_marker(root);  // proven by its mount or tree: now by the file
  auto apply = [&](const Planned& planned) {
    auto start = Clock::now();
    if (planned.op->kind == CommitOperation::Kind::Delete) {
      if (delete_file(root, planned.parts)) ++result.deleted;
      log_operation("delete " + location() + "/" + planned.op->path, "done", start);
      return;
    }
    sys::SafeDir dir = parent_for_write(root, planned.parts);
    write_file(dir, planned.parts.back(), planned.op->local, result);
    log_operation("write " + location() + "/" + planned.op->path, "done", start);
  };
  // Completion marks last (layout::is_completion_mark): each file is flushed and renamed before
  // the next, so a mark is published only once every other file is durable.
  std::stable_partition(artifacts.begin(), artifacts.end(), [](const Planned& planned) {
    return !layout::is_completion_mark(planned.op->path);
  });
  for (const Planned& planned : artifacts) {
    apply(planned);
    ++files_touched_;
  }
  if (!index_files.empty()) {
    IndexLock lock(root, options_.lock_wait);
    for (const Planned& planned : index_files) {
      if (!planned.op->expected.met_by(current_sha256(planned.op->path))) {
        throw CommitConflict(planned.op->path + " changed in " + location() +
                             " since it was read (another writer published meanwhile): read it "
                             "again, merge and commit again");
      }
    }
    for (const Planned& planned : index_files) {
      apply(planned);
      ++files_touched_;
    }
  }
  result.committed = result.small_files + result.large_sent + result.deleted > 0;
  return result;
}

std::string FolderStore::unreachable() const {
  struct stat info {};
  if (::stat(root_.c_str(), &info) != 0) {
    return "the shared folder " + root_.string() + " cannot be reached (" + errno_text() +
           "): mount it or create it";
  }
  if (!S_ISDIR(info.st_mode)) return "the shared folder " + root_.string() + " is not a folder";
  if (access(root_.c_str(), R_OK | X_OK) != 0) {
    return "the shared folder " + root_.string() + " cannot be read by this user (" + errno_text() +
           ")";
  }
  return {};
}

std::string FolderStore::why_not_writable() {
  if (std::string why = unreachable(); !why.empty()) return why;
  if (access(root_.c_str(), W_OK | X_OK) != 0) {
    return "the shared folder " + root_.string() + " is not writable by this user (" +
           errno_text() + ")";
  }
  return why_not_the_store(open_root(root_));
}

std::string FolderStore::why_not_the_store(const sys::SafeDir& root) const {
  if (holds_marker(root) || sys::is_mount_point(root_) || holds_store_tree(root)) return {};
  return "the shared folder " + root_.string() +
         " is not known to be a neuron-cache store: it holds no store tree and no " +
         std::string(kFolderStoreMarker) +
         " file and is not a mount point, so it may be the mount point of a share that is not "
         "mounted (its files would land on this machine's disk). Mount the share, or make this "
         "folder a store once with `neuron-cache create -n " +
         location() + "`";
}

Store::Url FolderStore::download_url(const std::string& /*revision*/,
                                     const std::string& path) const {
  std::vector<std::string> parts = plain_parts(path);  // no ".." can leave the root
  fs::path file = root_;
  for (const auto& part : parts) file /= part;
  return {url::file_url(file), false};
}

bool create_folder_store(const fs::path& root) {
  if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    throw operational_error("cannot create the shared folder " + root.string() + " (" +
                            errno_text() + "): its parent must exist (mount the share first)");
  }
  sys::SafeDir dir = open_root(root);
  if (holds_marker(dir)) return false;
  write_marker(dir);
  return true;
}

fs::path folder_root_from_url(std::string_view url) {
  if (url.substr(0, 7) != "file://") throw input_error(std::string(url) + " is not a file:// URL");
  return store_name::parse_store_name(std::string(url)).folder;  // the one rule of names
}

}  // namespace neuron_cache::storage
