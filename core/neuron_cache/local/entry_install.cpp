#include "neuron_cache/local/entry_install.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/sys/duration.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::local {
namespace {

namespace fs = std::filesystem;

// Splits "a/b/c" into the folder part and the file name.
std::pair<std::string, std::string> split_parent(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {"", std::string(path)};
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

void write_all(int out, const char* data, size_t size, const fs::path& path) {
  for (size_t done = 0; done < size;) {
    ssize_t written = write(out, data + done, size - done);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) throw sys::io_failure("cannot write", path, errno);
    done += static_cast<size_t>(written);
  }
}

void copy_into(int source_fd, const sys::SafeDir& dir, const std::string& name,
               const fs::path& source) {
  sys::UniqueFd out = dir.create_new(name);
  std::vector<char> buffer(1 << 20);
  while (true) {
    ssize_t n = read(source_fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw operational_error("cannot read " + source.string() + ": " + std::strerror(errno));
    if (n == 0) return;
    write_all(out.get(), buffer.data(), static_cast<size_t>(n), dir.path() / name);
  }
}

// What a file's bytes hash to: their sha256, and their git blob id when it was asked for.
struct Digests {
  std::string sha256;
  std::string git_blob_id;
};

// The digests of the first `size` bytes of `fd` (the git blob id too when `blob_id`), each block
// also written to `out` when it is open; nothing when the file holds more or fewer bytes, or
// cannot be read. Reads at most size + 1 bytes, whatever the file holds.
std::optional<Digests> hash_exactly(int fd, uint64_t size, int out, const fs::path& out_path,
                                    bool blob_id) {
  Hasher hasher(HashAlgorithm::Sha256);
  std::optional<Hasher> blob;
  if (blob_id) {
    blob.emplace(HashAlgorithm::Sha1);
    blob->update(git_blob_header(size));
  }
  std::vector<char> buffer(1 << 20);
  for (uint64_t offset = 0;;) {
    // One byte more than is left: a longer file shows.
    size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - offset + 1));
    ssize_t n = pread(fd, buffer.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || offset + static_cast<uint64_t>(n) > size) return std::nullopt;
    if (n == 0) {
      if (offset != size) return std::nullopt;
      return Digests{hasher.hex_digest(), blob ? blob->hex_digest() : ""};
    }
    hasher.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    if (blob) blob->update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    if (out >= 0) write_all(out, buffer.data(), static_cast<size_t>(n), out_path);
    offset += static_cast<uint64_t>(n);
  }
}

bool same_times(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// Whether the entry may share the inode of `source` (its content verified): on the staging
// folder's filesystem, owned by this user and writable by nobody else, so that nothing but this
// user can change the entry's bytes afterwards.
bool may_share(const struct stat& source, const sys::SafeDir& dir) {
  struct stat here {};
  return fstat(dir.fd(), &here) == 0 && here.st_dev == source.st_dev &&
         source.st_uid == geteuid() && (source.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// Links the very inode that was opened and checked, so a file swapped for a symlink after the
// check is never what gets linked.
void link_or_copy(int source_fd, const sys::SafeDir& dir, const std::string& name,
                  const fs::path& source) {
  if (dir.link_fd(source_fd, name)) return;
  // ENOENT: no /proc mounted.
  if (errno != EXDEV && errno != EMLINK && errno != EPERM && errno != ENOENT) {
    throw operational_error("cannot link " + source.string() + " into " + dir.path().string() +
                            ": " + std::strerror(errno));
  }
  copy_into(source_fd, dir, name, source);
}

// The staging folder names the constructor makes: "<stem>.<pid>.<12 chars>".
bool is_staging_folder_of(std::string_view name, std::string_view stem) {
  if (name.size() <= stem.size() + 1 || !name.starts_with(stem) || name[stem.size()] != '.')
    return false;
  std::string_view rest = name.substr(stem.size() + 1);
  size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  for (char c : rest.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
  }
  return rest.size() - dot - 1 == 12;
}

// The staged file `file.name` below `dir`, open for reading, when it is a regular file with the
// expected size and sha256: a killed writer's file may be cut short or hold any bytes.
std::optional<sys::UniqueFd> open_if_whole(const sys::SafeDir& dir,
                                           const EntryInstall::ExpectedFile& file) {
  try {
    std::optional<sys::SafeDir> sub;
    if (file.name.find('/') != std::string::npos) {
      sub = dir.open_path(file.name.substr(0, file.name.rfind('/')));
      if (!sub) return std::nullopt;
    }
    const sys::SafeDir& parent = sub ? *sub : dir;
    std::string name = split_parent(file.name).second;
    auto node = parent.entry(name);
    if (!node || node->type != sys::NodeType::File || node->size != file.size) return std::nullopt;
    sys::UniqueFd fd = parent.open_read(name);
    Hasher hasher(HashAlgorithm::Sha256);
    std::vector<char> buffer(1 << 20);
    for (off_t offset = 0;;) {
      ssize_t n = pread(fd.get(), buffer.data(), buffer.size(), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::nullopt;
      if (n == 0) break;
      hasher.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
      offset += n;
    }
    if (hasher.hex_digest() != file.sha256) return std::nullopt;
    return fd;
  } catch (const Error&) {
    return std::nullopt;  // unreadable: downloaded again
  }
}

// The journal folder is the installer's own: a file staged there would never be installed.
void refuse_journal_path(std::string_view relative_path) {
  if (relative_path.substr(0, relative_path.find('/')) != layout::kDownloadJournalDir) return;
  throw input_error("cannot stage " + std::string(relative_path) + ": " +
                    std::string(layout::kDownloadJournalDir) +
                    " is where neuron-cache keeps download journals in a staging folder, so no "
                    "file of an entry may be under that name");
}

// The spans the journal of `file` in the staging folder `dir` claims, or nothing when there is
// no such journal, or it is not a regular file, too large, or not a journal of this file.
std::optional<std::vector<Span>> read_journal(const sys::SafeDir& dir, const ExpectedFile& file) {
  try {
    std::optional<sys::SafeDir> journals = dir.open_subdir(layout::kDownloadJournalDir);
    if (!journals) return std::nullopt;
    return parse_journal(journals->read_small_file(journal_name(file.name), kMaxJournalBytes),
                         file);
  } catch (const Error&) {
    return std::nullopt;
  }
}

bool covers_whole(const std::vector<Span>& written, uint64_t size) {
  return written.size() == 1 && written.front().start == 0 && written.front().end == size;
}

// `name` in `parent`, open for writing, when the rest of `file` can be written into it: a regular
// file (never through a symlink) that no other path links to (writing into it must change
// nothing else), no longer than the file and at least as long as the last span `written` claims.
std::optional<sys::UniqueFd> open_resumable(const sys::SafeDir& parent, const std::string& name,
                                            const ExpectedFile& file,
                                            const std::vector<Span>& written) {
  sys::check_plain_name(name);
  // O_NONBLOCK: a FIFO planted under the name must not block the open.
  int fd = openat(parent.fd(), name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  sys::UniqueFd guard(fd);
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1) return std::nullopt;
  auto size = static_cast<uint64_t>(info.st_size);
  if (size > file.size || written.empty() || written.back().end > size) return std::nullopt;
  return guard;
}

}  // namespace

std::string staging_stem(std::string_view compiler_dir, std::string_view module) {
  return sha256_hex(std::string(compiler_dir) + "/" + std::string(module)).substr(0, 24);
}

std::optional<EntryLock> EntryLock::try_acquire(const sys::SafeDir& entry_dir) {
  const std::string name(layout::kEntryLock);
  while (true) {
    int fd = openat(entry_dir.fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw sys::io_failure("cannot open the lock file", entry_dir.path() / name, errno);
    }
    sys::UniqueFd lock_fd(fd);
    if (!sys::try_lock_both_kinds(fd, entry_dir.path() / name)) return std::nullopt;
    // The previous holder may have deleted the file after we opened it: lock the live one.
    if (sys::same_file(fd, entry_dir.fd(), name.c_str())) {
      return EntryLock(sys::UniqueFd(fcntl(entry_dir.fd(), F_DUPFD_CLOEXEC, 0)),
                       std::move(lock_fd));
    }
  }
}

EntryLock EntryLock::acquire(const sys::SafeDir& entry_dir, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (std::optional<EntryLock> lock = try_acquire(entry_dir)) return std::move(*lock);
    if (std::chrono::steady_clock::now() >= deadline) {
      // A lock file left by a dead process never blocks (its locks died with it), so a live
      // process holds this one: deleting the file would only let two writers in.
      const std::string name(layout::kEntryLock);
      const std::string lock_path = (entry_dir.path() / name).string();
      throw operational_error(
          entry_dir.path().string() + " is locked by another process (" + name +
          "): a compilation or download of this entry is running; wait for it to finish, or "
          "stop that process (`fuser -v " +
          lock_path + "` shows it)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

EntryLock::~EntryLock() = default;

void EntryLock::release_and_remove() {
  if (!fd_) return;
  unlinkat(dir_fd_.get(), std::string(layout::kEntryLock).c_str(), 0);
  fd_ = sys::UniqueFd();
}

PrefetchLock PrefetchLock::acquire(const fs::path& cache_root,
                                   const std::function<void(const std::string&)>& on_wait,
                                   std::chrono::milliseconds wait) {
  sys::SafeDir area = sys::SafeDir::open_or_create(cache_root).make_path(layout::kWorkAreaDir);
  // The lock file is never deleted, so every process locks the same inode.
  std::string holder;
  auto waiting = [&](const std::string& pid) {
    holder = pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos
                 ? ""
                 : " (pid " + pid + ")";
    if (on_wait) {
      on_wait("another neuron-cache prefetch into " + cache_root.string() + " is running" + holder +
              ": waiting for it to finish (at most " + sys::duration_text(wait) +
              "); what it installs is not downloaded again");
    }
  };
  std::optional<sys::FileLock> lock =
      sys::FileLock::acquire(area, std::string(layout::kPrefetchLock), sys::LockKind::Flock,
                             sys::FileLock::Clock::now() + wait, waiting);
  if (!lock) {
    // The lock only saves downloads: each entry is installed under its own lock (EntryLock).
    if (on_wait) {
      on_wait("the prefetch" + holder + " into " + cache_root.string() + " still runs after " +
              sys::duration_text(wait) +
              ": prefetching beside it; an entry both fetch is installed "
              "once");
    }
    return PrefetchLock(std::nullopt);
  }
  // The pid only names the holder in the next waiter's message: the lock decides ownership.
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock->fd(), 0) != 0 || pwrite(lock->fd(), pid.data(), pid.size(), 0) < 0) {
    // Only the message of a waiter would lack the pid.
  }
  return PrefetchLock(std::move(lock));
}

void check_root_is_safe(const fs::path& root) {
  struct stat info {};
  if (stat(root.c_str(), &info) != 0) return;
  if ((info.st_mode & S_IWOTH) && !(info.st_mode & S_ISVTX)) {
    throw operational_error("the cache root " + root.string() +
                            " is writable by every user without the sticky bit: anyone could "
                            "replace entries; run `chmod o-w " +
                            root.string() + "` or choose another --cache-dir");
  }
}

EntryInstall::EntryInstall(const fs::path& cache_root, std::string compiler_dir,
                           std::string module_name)
    : root_(cache_root),
      compiler_dir_(std::move(compiler_dir)),
      module_name_(std::move(module_name)) {
  sys::check_plain_name(compiler_dir_);
  sys::check_plain_name(module_name_);
  sys::SafeDir root = sys::SafeDir::open_or_create(root_);
  check_root_is_safe(root_);
  staging_area_.emplace(root.make_path(layout::kStagingDir));
  // Locked before it is visible under its name, so cleanup never takes it for abandoned.
  sys::LockedDir made = staging_area_->make_locked_subdir([&] {
    return staging_stem(compiler_dir_, module_name_) + "." + std::to_string(getpid()) + "." +
           sys::random_hex(12);
  });
  staging_name_ = made.name;
  staging_lock_ = std::move(made.lock);
  staging_.emplace(std::move(made.dir));
}

EntryInstall::~EntryInstall() {
  if (staging_area_ && !staging_name_.empty()) {
    try {
      staging_area_->remove_tree(staging_name_);
    } catch (const Error&) {
      // Best effort: `neuron-cache cleanup` removes abandoned staging folders later.
    }
  }
}

sys::UniqueFd EntryInstall::create_file(std::string_view relative_path) {
  refuse_journal_path(relative_path);
  auto [parent, name] = split_parent(relative_path);
  if (parent.empty()) return staging_->create_new(name);
  return staging_->make_path(parent).create_new(name);
}

void EntryInstall::add_file(std::string_view relative_path, std::string_view content) {
  refuse_journal_path(relative_path);
  auto [parent, name] = split_parent(relative_path);
  if (parent.empty()) {
    staging_->write_new_file(name, content);
  } else {
    staging_->make_path(parent).write_new_file(name, content);
  }
}

void EntryInstall::link_file(std::string_view relative_path, const fs::path& source) {
  refuse_journal_path(relative_path);
  int fd = ::open(source.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    throw operational_error("cannot open " + source.string() + ": " + std::strerror(error) +
                            (error == ELOOP ? " (a symlink: only regular files are staged)" : ""));
  }
  sys::UniqueFd source_fd(fd);
  sys::require_regular_file(fd, source);
  auto [parent, name] = split_parent(relative_path);
  sys::check_plain_name(name);
  if (parent.empty()) {
    link_or_copy(fd, *staging_, name, source);
  } else {
    link_or_copy(fd, staging_->make_path(parent), name, source);
  }
}

bool EntryInstall::stage_verified(int fd, const ExpectedFile& file) {
  return stage_matching(fd, file.name, file.size, file.sha256, "").has_value();
}

std::optional<std::string> EntryInstall::stage_verified_blob(int fd, const std::string& name,
                                                             uint64_t size,
                                                             const std::string& git_blob_id) {
  if (git_blob_id.empty()) return std::nullopt;
  return stage_matching(fd, name, size, "", git_blob_id);
}

std::optional<std::string> EntryInstall::stage_matching(int fd, const std::string& path,
                                                        uint64_t size, const std::string& sha256,
                                                        const std::string& git_blob_id) {
  refuse_journal_path(path);
  auto [parent, name] = split_parent(path);
  sys::check_plain_name(name);
  sys::SafeDir dir = parent.empty() ? *staging_->open_path("") : staging_->make_path(parent);
  struct stat before {};
  if (fstat(fd, &before) != 0 || !S_ISREG(before.st_mode) ||
      static_cast<uint64_t>(before.st_size) != size) {
    return std::nullopt;
  }
  bool by_blob_id = sha256.empty();
  auto matches = [&](const std::optional<Digests>& got) {
    return got && (by_blob_id ? got->git_blob_id == git_blob_id : got->sha256 == sha256);
  };
  if (may_share(before, dir)) {
    std::optional<Digests> got = hash_exactly(fd, size, -1, {}, by_blob_id);
    if (!matches(got)) return std::nullopt;
    struct stat after {};
    // Changed while it was read: what was hashed is not what would be linked.
    if (fstat(fd, &after) != 0 || !same_times(before, after)) return std::nullopt;
    if (dir.link_fd(fd, name)) return got->sha256;
  }
  sys::UniqueFd out = dir.create_new(name);
  std::optional<Digests> copied = hash_exactly(fd, size, out.get(), dir.path() / name, by_blob_id);
  if (matches(copied)) return copied->sha256;
  out = sys::UniqueFd();
  dir.remove_file(name);
  return std::nullopt;
}

std::vector<std::pair<std::string, sys::SafeDir>> EntryInstall::lock_abandoned(
    const std::vector<std::string>& staging_folders) {
  const std::string stem = staging_stem(compiler_dir_, module_name_);
  std::vector<std::pair<std::string, sys::SafeDir>> abandoned;
  for (const auto& folder : staging_folders) {
    if (folder == staging_name_ || !is_staging_folder_of(folder, stem)) continue;
    // Its writer is gone when its flock is free; held until the folder is deleted, so a cleanup
    // or another prefetch cannot take it meanwhile. Gone or not a folder: skipped.
    std::optional<sys::SafeDir> dir = staging_area_->open_subdir(folder);
    if (!dir || flock(dir->fd(), LOCK_EX | LOCK_NB) != 0 ||
        !sys::same_file(dir->fd(), staging_area_->fd(), folder.c_str())) {
      continue;
    }
    abandoned.emplace_back(folder, std::move(*dir));
  }
  return abandoned;
}

bool EntryInstall::reuse_whole(const sys::SafeDir& dir, const ExpectedFile& file) {
  // A journal saying part of it is missing spares reading a large file through to learn that.
  std::optional<std::vector<Span>> written = read_journal(dir, file);
  if (written && !covers_whole(*written, file.size)) return false;
  std::optional<sys::UniqueFd> fd = open_if_whole(dir, file);
  if (!fd) return false;
  auto [parent, name] = split_parent(file.name);
  sys::check_plain_name(name);
  if (parent.empty()) {
    link_or_copy(fd->get(), *staging_, name, dir.path() / file.name);
  } else {
    link_or_copy(fd->get(), staging_->make_path(parent), name, dir.path() / file.name);
  }
  return true;
}

EntryInstall::Reused EntryInstall::reuse_abandoned(
    const std::vector<ExpectedFile>& wanted, const std::vector<std::string>& staging_folders) {
  Reused reused;
  std::vector<std::pair<std::string, sys::SafeDir>> abandoned = lock_abandoned(staging_folders);
  auto taken = [&](const ExpectedFile& file) {
    return std::find(reused.files.begin(), reused.files.end(), file.name) != reused.files.end() ||
           std::any_of(reused.partial.begin(), reused.partial.end(),
                       [&](const Partial& p) { return p.name == file.name; });
  };
  // Whole files first, from any folder: a partial copy in one folder must not shadow a whole one
  // in another.
  for (const auto& [folder, dir] : abandoned) {
    for (const auto& file : wanted) {
      if (taken(file) || !reuse_whole(dir, file)) continue;
      reused.files.push_back(file.name);
      reused.bytes += file.size;
    }
  }
  for (const auto& [folder, dir] : abandoned) {
    for (const auto& file : wanted) {
      if (taken(file)) continue;
      std::optional<std::vector<Span>> written = read_journal(dir, file);
      if (!written || written->empty() || covers_whole(*written, file.size)) continue;
      if (auto partial = adopt_partial(dir, file, std::move(*written))) {
        reused.partial.push_back(std::move(*partial));
      }
    }
  }
  for (const auto& [folder, dir] : abandoned) {
    try {
      staging_area_->remove_tree(folder);
    } catch (const Error&) {
      // What is left is deleted by the end of the prefetch or by `neuron-cache cleanup`.
    }
  }
  return reused;
}

// Moved, not copied: the very inode that was opened and checked becomes the staged file, so the
// bytes the journal describes are the bytes that stay.
std::optional<EntryInstall::Partial> EntryInstall::adopt_partial(const sys::SafeDir& dir,
                                                                 const ExpectedFile& file,
                                                                 std::vector<Span> written) {
  try {
    auto [parent, name] = split_parent(file.name);
    std::optional<sys::SafeDir> from = dir.open_path(parent);
    if (!from) return std::nullopt;
    std::optional<sys::UniqueFd> fd = open_resumable(*from, name, file, written);
    if (!fd) return std::nullopt;
    // Before the move: a kill in between leaves a journal of a missing file, which is ignored.
    record_progress(file, written);
    sys::SafeDir to = parent.empty() ? *staging_->open_path("") : staging_->make_path(parent);
    bool moved = from->move_to(name, to, name, true);
    if (moved && sys::same_file(fd->get(), to.fd(), name.c_str())) {
      return Partial{file.name, std::move(*fd), std::move(written)};
    }
    if (moved) to.remove_file(name);  // swapped meanwhile: not what was checked
  } catch (const Error&) {
  }
  record_progress(file, {});  // downloaded from its start: no span of it is on disk
  return std::nullopt;
}

void EntryInstall::record_progress(const ExpectedFile& file,
                                   const std::vector<Span>& written) noexcept {
  try {
    if (!journals_) journals_.emplace(staging_->make_subdir(layout::kDownloadJournalDir));
    journals_->replace_unflushed(journal_name(file.name), journal_text(file, written));
  } catch (...) {
    // Only a resume after a kill is lost; the download itself goes on.
  }
}

void EntryInstall::step(std::string_view name) {
  if (on_step) on_step(name);
}

void EntryInstall::sync_staged(const sys::SafeDir& dir) {
  for (const auto& item : dir.list()) {
    if (item.name == layout::kDownloadJournalDir) continue;  // never installed
    if (item.type == sys::NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) sync_staged(*sub);
    } else if (item.type == sys::NodeType::File) {
      sys::UniqueFd fd = dir.open_read(item.name);
      fsync(fd.get());
    }
  }
  dir.sync();
}

struct EntryInstall::Locked {
  sys::SafeDir entry;
  EntryLock lock;
};

std::optional<EntryInstall::Locked> EntryInstall::lock_entry(
    std::chrono::milliseconds lock_timeout) {
  sys::SafeDir root = sys::SafeDir::open(root_);
  sys::SafeDir entry = root.make_subdir(compiler_dir_).make_subdir(module_name_);
  EntryLock lock = EntryLock::acquire(entry, lock_timeout);
  step("locked");
  // optimum-neuron's rule, from regular files alone (cache_tree's state_of_written_folder).
  if (state_of_written_folder(entry, module_name_) == layout::EntryState::Success) {
    lock.release_and_remove();
    return std::nullopt;
  }
  return Locked{std::move(entry), std::move(lock)};
}

void EntryInstall::move_content(const sys::SafeDir& entry) {
  // A done marker without its NEFF would turn SUCCESS the moment the NEFF lands: drop it first.
  entry.remove_file(layout::kDone);
  for (const auto& item : staging_->list()) {
    // The installer's own: model.done is written last, the journals stay behind.
    if (item.name == layout::kDone || item.name == layout::kDownloadJournalDir) continue;
    // rename() replaces a file atomically but cannot replace a folder, nor a file by a folder.
    auto existing = entry.entry(item.name);
    if (existing &&
        (item.type == sys::NodeType::Directory || existing->type == sys::NodeType::Directory)) {
      entry.remove_tree(item.name);
    }
    staging_->move_to(item.name, entry, item.name, false);
    step("moved " + item.name);
  }
  entry.remove_file(layout::kLog);  // a cached failure replaced by a NEFF
}

// model.done is only ever written here, empty as libneuronxla writes it, once the staged folder
// holds model.neff: whatever a caller or a store staged under that name is replaced, and a folder
// staged without its NEFF is refused rather than installed as less than it claims.
void EntryInstall::stage_done_marker() {
  auto neff = staging_->entry(layout::kNeff);
  if (!neff || neff->type != sys::NodeType::File) {
    throw operational_error("refusing to install " + compiler_dir_ + "/" + module_name_ +
                            ": no model.neff was staged, so it would not be a compiled graph");
  }
  staging_->remove_file(layout::kDone);
  // Empty, and flushed with the rest of the staged folder by the commit that follows: an fsync
  // of its own cost more than the small entries it marks (one per MODULE folder).
  staging_->create_new(std::string(layout::kDone));
}

bool EntryInstall::is_traced() const {
  return layout::is_traced_module_name(module_name_);
}

// A traced export has no marker written last, so it must never be seen half-made under its
// name: the staged folder, every file in place, is renamed to it at once. One already complete
// there is kept; anything else there (a copy killed half-way) is moved aside, then replaced.
InstallOutcome EntryInstall::rename_traced_into_place() {
  // The folder itself becomes the entry: the journals must not go with it.
  journals_.reset();
  staging_->remove_tree(layout::kDownloadJournalDir);
  if (state_of_written_folder(*staging_, module_name_) != layout::EntryState::Traced) {
    throw operational_error("refusing to install " + compiler_dir_ + "/" + module_name_ +
                            ": the staged traced export lacks its config.json (or "
                            "model_index.json) or a *.neuron file");
  }
  sys::SafeDir compiler = sys::SafeDir::open(root_).make_subdir(compiler_dir_);
  for (int attempt = 0;; ++attempt) {
    if (compiler.entry(module_name_)) {
      std::optional<sys::SafeDir> present = compiler.open_subdir(module_name_);
      if (present &&
          state_of_written_folder(*present, module_name_) == layout::EntryState::Traced) {
        return InstallOutcome::AlreadyComplete;
      }
      present.reset();
      const std::string aside =
          staging_stem(compiler_dir_, module_name_) + ".replaced." + sys::random_hex(12);
      if (compiler.move_to(module_name_, *staging_area_, aside, true)) {
        step("moved aside");
        staging_area_->remove_tree(aside);
      }
    }
    if (staging_area_->move_to(staging_name_, compiler, module_name_, true)) break;
    if (attempt >= 3) {
      throw operational_error("cannot install " + (compiler.path() / module_name_).string() +
                              ": other processes keep writing an incomplete folder there; stop "
                              "them and run the command again");
    }
  }
  step("renamed");
  staging_name_.clear();  // it is the entry now
  staging_lock_ = sys::UniqueFd();
  committed_ = true;
  return InstallOutcome::Installed;
}

InstallOutcome EntryInstall::commit(std::chrono::milliseconds lock_timeout) {
  if (!is_traced()) stage_done_marker();
  sync_staged(*staging_);
  step("staged");
  if (is_traced()) {
    InstallOutcome outcome = rename_traced_into_place();
    sys::SafeDir::open(root_ / compiler_dir_).sync();
    return outcome;
  }
  std::optional<Locked> locked = lock_entry(lock_timeout);
  if (!locked) return InstallOutcome::AlreadyComplete;
  move_content(locked->entry);
  locked->entry.sync();
  step("synced");
  staging_->move_to(layout::kDone, locked->entry, layout::kDone, false);
  locked->entry.sync();
  step("done");
  locked->lock.release_and_remove();
  locked->entry.sync();
  committed_ = true;
  step("unlocked");
  return InstallOutcome::Installed;
}

namespace {

// syncfs: every dirty page and inode of the cache's filesystem, in one journal commit.
void flush_filesystem(const sys::SafeDir& dir) {
  if (syncfs(dir.fd()) != 0) {
    throw sys::io_failure("cannot flush the filesystem of", dir.path(), errno);
  }
}

}  // namespace

void EntryInstall::commit_all(std::vector<BatchItem>& items,
                              std::chrono::milliseconds lock_timeout) {
  if (items.empty()) return;
  for (auto& item : items) {
    try {
      if (!item.install->is_traced()) item.install->stage_done_marker();
    } catch (const Error& error) {
      rethrow_local_disk(error);  // the disk fails every item alike
      item.error = error.what();
    }
  }
  flush_filesystem(*items.front().install->staging_area_);
  std::vector<std::pair<BatchItem*, Locked>> locked;
  bool renamed = false;
  for (auto& item : items) {
    if (!item.error.empty()) continue;
    try {
      item.install->step("staged");
      if (item.install->is_traced()) {
        item.outcome = item.install->rename_traced_into_place();
        renamed = true;
        continue;
      }
      std::optional<Locked> entry = item.install->lock_entry(lock_timeout);
      if (!entry) {
        item.outcome = InstallOutcome::AlreadyComplete;
        continue;
      }
      item.install->move_content(entry->entry);
      locked.emplace_back(&item, std::move(*entry));
    } catch (const Error& error) {
      rethrow_local_disk(error);  // the disk fails every item alike
      item.error = error.what();
    }
  }
  if (locked.empty()) {
    if (renamed) flush_filesystem(*items.front().install->staging_area_);
    return;
  }
  flush_filesystem(locked.front().second.entry);
  for (auto& [item, entry] : locked) {
    item->install->step("synced");
    item->install->staging_->move_to(layout::kDone, entry.entry, layout::kDone, false);
  }
  flush_filesystem(locked.front().second.entry);
  for (auto& [item, entry] : locked) {
    entry.lock.release_and_remove();
    item->install->committed_ = true;
    item->outcome = InstallOutcome::Installed;
  }
}

std::vector<std::string> list_staging_folders(const fs::path& cache_root) {
  std::error_code error;
  if (!fs::is_directory(cache_root / layout::kStagingDir, error)) return {};
  std::vector<std::string> names;
  for (const auto& item : sys::SafeDir::open(cache_root / layout::kStagingDir).list()) {
    if (item.type == sys::NodeType::Directory) names.push_back(item.name);
  }
  return names;
}

uint64_t remove_abandoned_staging(const fs::path& cache_root, bool dry_run, int* removed_count) {
  std::error_code error;
  if (!fs::is_directory(cache_root, error)) return 0;
  sys::SafeDir root = sys::SafeDir::open(cache_root);
  std::optional<sys::SafeDir> area = root.open_subdir(".cache");
  if (area) area = area->open_subdir("huggingface");
  if (area) area = area->open_subdir("neuron-cache-staging");
  if (!area) return 0;
  uint64_t freed = 0;
  for (const auto& item : area->list()) {
    std::optional<sys::SafeDir> held;
    if (!sys::claim_abandoned(*area, item, held)) continue;  // its writer is alive
    freed += dry_run ? area->tree_size(item.name) : area->remove_tree(item.name);
    if (removed_count) ++*removed_count;
  }
  return freed;
}

}  // namespace neuron_cache::local
