#include "neuron_cache/sys/safe_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::sys {
namespace {

constexpr mode_t kDirMode = 0755;
constexpr mode_t kFileMode = 0644;
// The temporary name of a folder make_locked_subdir is making. Its owner renames it within
// microseconds; one this old was left by a process killed in between.
constexpr std::string_view kMakingPrefix = ".making-";
constexpr double kMakingSeconds = 3600;

std::string describe_errno() {
  return std::strerror(errno);
}

Error io_error(const std::string& what, const std::filesystem::path& path) {
  return io_failure(what, path, errno);
}

NodeType node_type(mode_t mode) {
  if (S_ISDIR(mode)) return NodeType::Directory;
  if (S_ISREG(mode)) return NodeType::File;
  if (S_ISLNK(mode)) return NodeType::Symlink;
  return NodeType::Other;
}

DirEntry to_entry(std::string name, const struct stat& info) {
  DirEntry entry{std::move(name), node_type(info.st_mode)};
  entry.size = entry.type == NodeType::File ? static_cast<uint64_t>(info.st_size) : 0;
  entry.owner = info.st_uid;
  entry.mtime = static_cast<double>(info.st_mtim.tv_sec) + info.st_mtim.tv_nsec / 1e9;
  return entry;
}

int open_dir_nofollow(int parent, std::string_view name) {
  return openat(parent, std::string(name).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void write_all(int fd, std::string_view content, const std::filesystem::path& path) {
  while (!content.empty()) {
    ssize_t n = write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot write", path);
    content.remove_prefix(static_cast<size_t>(n));
  }
}

bool rename_no_replace(int dir_fd, const std::string& from, const std::string& to) {
  return syscall(SYS_renameat2, dir_fd, from.c_str(), dir_fd, to.c_str(), RENAME_NOREPLACE) == 0;
}

}  // namespace

void check_plain_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." ||
      name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
    throw input_error("refusing the file name \"" + std::string(name) +
                      "\": names inside the cache cannot be empty, '.', '..' or contain '/'");
  }
}

SafeDir SafeDir::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error("cannot open the directory", path);
  return SafeDir(UniqueFd(fd), path);
}

void make_directories(const std::filesystem::path& path) {
  // Component by component with an explicit mode: create_directories uses 0777 & ~umask, which
  // under umask 0 gives a world-writable root that check_root_is_safe then refuses.
  std::filesystem::path current;
  for (const auto& part : path) {
    current /= part;
    struct stat info {};
    if (stat(current.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) continue;
    if (mkdir(current.c_str(), kDirMode) != 0 && errno != EEXIST) {
      if (is_disk_refusal(errno)) throw io_failure("cannot create the directory", current, errno);
      throw operational_error("cannot create the directory " + current.string() + ": " +
                              describe_errno() + ": check its parent is writable");
    }
  }
}

SafeDir SafeDir::open_or_create(const std::filesystem::path& path) {
  try {
    make_directories(path);
  } catch (const Error& e) {
    rethrow_local_disk(e);  // it says what to do already
    throw operational_error(std::string(e.what()) + " (or choose another --cache-dir)");
  }
  return open(path);
}

std::optional<SafeDir> SafeDir::open_subdir(std::string_view name) const {
  check_plain_name(name);
  int fd = open_dir_nofollow(fd_.get(), name);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) return std::nullopt;
    throw io_error("cannot open the directory", path_ / name);
  }
  return SafeDir(UniqueFd(fd), path_ / name);
}

SafeDir SafeDir::make_subdir(std::string_view name) const {
  check_plain_name(name);
  // Open first: the folder is usually there already (a prefetch made 8,800 failing mkdirat).
  int fd = open_dir_nofollow(fd_.get(), name);
  if (fd < 0 && errno == ENOENT) {
    if (mkdirat(fd_.get(), std::string(name).c_str(), kDirMode) != 0 && errno != EEXIST) {
      throw io_error("cannot create the directory", path_ / name);
    }
    fd = open_dir_nofollow(fd_.get(), name);
  }
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw operational_error(
          (path_ / name).string() +
          " is a symlink or a file, not a directory: refusing to write through it; remove it "
          "if you did not create it");
    }
    throw io_error("cannot open the directory", path_ / name);
  }
  return SafeDir(UniqueFd(fd), path_ / name);
}

SafeDir SafeDir::make_path(std::string_view relative) const {
  std::optional<SafeDir> current;
  size_t start = 0;
  while (start < relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string_view::npos) slash = relative.size();
    std::string_view part = relative.substr(start, slash - start);
    current.emplace(current ? current->make_subdir(part) : make_subdir(part));
    start = slash + 1;
  }
  if (!current) throw input_error("an empty path cannot name a directory inside the cache");
  return std::move(*current);
}

std::optional<SafeDir> SafeDir::open_path(std::string_view relative) const {
  std::optional<SafeDir> at = SafeDir(UniqueFd(fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0)), path_);
  for (size_t start = 0; at && start < relative.size();) {
    size_t end = std::min(relative.find('/', start), relative.size());
    at = at->open_subdir(relative.substr(start, end - start));
    start = end + 1;
  }
  return at;
}

LockedDir SafeDir::make_locked_subdir(const std::function<std::string()>& next_name) const {
  std::string temp = std::string(kMakingPrefix) + random_hex(12);
  while (mkdirat(fd_.get(), temp.c_str(), kDirMode) != 0) {
    if (errno != EEXIST) throw io_error("cannot create the directory", path_ / temp);
    temp = std::string(kMakingPrefix) + random_hex(12);
  }
  UniqueFd lock(open_dir_nofollow(fd_.get(), temp));
  // No sweep removes a young ".making-" folder and nobody else locks it: a failure here means
  // something foreign in the work area.
  if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    Error error = io_error("cannot lock the new directory", path_ / temp);
    unlinkat(fd_.get(), temp.c_str(), AT_REMOVEDIR);
    throw error;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = next_name();
    check_plain_name(name);
    if (rename_no_replace(fd_.get(), temp, name)) {
      UniqueFd dir(fcntl(lock.get(), F_DUPFD_CLOEXEC, 0));
      if (!dir) throw io_error("cannot open the directory", path_ / name);
      return LockedDir{name, SafeDir(std::move(dir), path_ / name), std::move(lock)};
    }
    if (errno != EEXIST) break;
  }
  Error error = io_error("cannot name the new directory", path_ / temp);
  unlinkat(fd_.get(), temp.c_str(), AT_REMOVEDIR);
  throw error;
}

bool claim_abandoned(const SafeDir& area, const DirEntry& item, std::optional<SafeDir>& held) {
  if (item.type != NodeType::Directory) return true;
  if (item.name.starts_with(kMakingPrefix)) {
    double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (now - item.mtime < kMakingSeconds) return false;
  }
  held = area.open_subdir(item.name);
  if (!held) return true;  // gone already, or replaced by a symlink: not anybody's folder
  return flock(held->fd(), LOCK_EX | LOCK_NB) == 0;
}

std::vector<DirEntry> SafeDir::list() const {
  // getdents64 on the folder's own descriptor, from its start: a duplicate for a DIR stream
  // shared the offset anyway, and cost five more system calls per folder (status lists every
  // MODULE_ folder of the cache).
  if (lseek(fd_.get(), 0, SEEK_SET) != 0) throw io_error("cannot list", path_);
  std::vector<char> buffer(32768);
  std::vector<DirEntry> entries;
  while (true) {
    ssize_t n = getdents64(fd_.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot list", path_);
    if (n == 0) return entries;
    for (ssize_t at = 0; at < n;) {
      const char* record = buffer.data() + at;
      unsigned short length = 0;
      std::memcpy(&length, record + offsetof(dirent64, d_reclen), sizeof length);
      std::string name(record + offsetof(dirent64, d_name));  // the kernel ends it with NUL
      at += length == 0 ? n : length;
      if (name == "." || name == "..") continue;
      struct stat info {};
      if (fstatat(fd_.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
      entries.push_back(to_entry(std::move(name), info));
    }
  }
}

std::optional<DirEntry> SafeDir::entry(std::string_view name) const {
  check_plain_name(name);
  struct stat info {};
  if (fstatat(fd_.get(), std::string(name).c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw io_error("cannot stat", path_ / name);
  }
  return to_entry(std::string(name), info);
}

UniqueFd SafeDir::open_read(std::string_view name) const {
  check_plain_name(name);
  // O_NONBLOCK: opening a FIFO planted under a cache file name would otherwise block forever.
  int fd =
      openat(fd_.get(), std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) {
      throw operational_error((path_ / name).string() +
                              " is a symlink: refusing to read through it from inside the cache");
    }
    throw io_error("cannot open", path_ / name);
  }
  UniqueFd guard(fd);
  require_regular_file(fd, path_ / name);
  return guard;
}

void write_whole_file(const std::filesystem::path& file, std::string_view content) {
  // An explicit mode: std::ofstream creates 0666 & ~umask. A file already there keeps its mode
  // (it may be /dev/stdout given as a report file).
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode));
  if (!fd) throw io_error("cannot write", file);
  write_all(fd.get(), content, file);
}

void replace_file(const std::filesystem::path& file, std::string_view content) {
  std::filesystem::path parent = file.has_parent_path() ? file.parent_path() : ".";
  SafeDir::open_or_create(parent).publish_file(file.filename().string(), content, false);
}

RootedFile::RootedFile(std::filesystem::path root, std::string relative)
    : root_(std::move(root)), relative_(std::move(relative)) {
  for (size_t start = 0; start <= relative_.size();) {
    size_t slash = std::min(relative_.find('/', start), relative_.size());
    check_plain_name(std::string_view(relative_).substr(start, slash - start));
    start = slash + 1;
  }
}

RootedFile RootedFile::child(std::string_view relative) const {
  return RootedFile(root_, relative_ + "/" + std::string(relative));
}

std::string RootedFile::name() const {
  return relative_.substr(relative_.rfind('/') + 1);
}

std::optional<SafeDir> RootedFile::parent(bool make) const {
  size_t slash = relative_.rfind('/');
  std::string_view folders = slash == std::string::npos
                                 ? std::string_view()
                                 : std::string_view(relative_).substr(0, slash);
  if (make) {
    SafeDir root = SafeDir::open_or_create(root_);
    return folders.empty() ? std::move(root) : root.make_path(folders);
  }
  std::error_code error;
  if (!std::filesystem::is_directory(root_, error)) return std::nullopt;
  return SafeDir::open(root_).open_path(folders);
}

std::optional<std::string> RootedFile::read(size_t max_bytes) const {
  if (empty()) return std::nullopt;
  try {
    std::optional<SafeDir> dir = parent(false);
    auto item = dir ? dir->entry(name()) : std::nullopt;
    if (!item || item->type != NodeType::File || item->size > max_bytes) return std::nullopt;
    return dir->read_small_file(name(), max_bytes);
  } catch (const Error&) {
    return std::nullopt;  // swapped for something else meanwhile, unreadable, grown too large
  }
}

void RootedFile::replace(std::string_view content) const {
  if (empty()) return;
  parent(true)->publish_file(name(), content, false);
}

void RootedFile::replace_unflushed(std::string_view content) const {
  if (empty()) return;
  parent(true)->replace_unflushed(name(), content);
}

void RootedFile::remove() const {
  if (empty()) return;
  std::optional<SafeDir> dir = parent(false);
  if (dir && dir->entry(name())) dir->remove_tree(name());
}

std::optional<std::filesystem::path> real_path(const std::filesystem::path& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return std::filesystem::path(buffer);
}

UniqueFd SafeDir::create_new(std::string_view name) const {
  check_plain_name(name);
  int fd = openat(fd_.get(), std::string(name).c_str(),
                  O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
  if (fd < 0) throw io_error("cannot create", path_ / name);
  return UniqueFd(fd);
}

void SafeDir::write_new_file(std::string_view name, std::string_view content) const {
  UniqueFd fd = create_new(name);
  write_all(fd.get(), content, path_ / name);
  if (fsync(fd.get()) != 0) throw io_error("cannot flush", path_ / name);
}

bool SafeDir::publish_file(std::string_view name, std::string_view content, bool no_replace) const {
  check_plain_name(name);
  // A dot-name ending in .tmp: layout::is_temporary_file, so never synchronized nor pushed.
  std::string temp = "." + std::string(name) + "." + random_hex(12) + ".tmp";
  try {
    write_new_file(temp, content);
    if (move_to(temp, *this, name, no_replace)) return true;
  } catch (...) {
    unlinkat(fd_.get(), temp.c_str(), 0);
    throw;
  }
  remove_file(temp);
  return false;
}

void SafeDir::replace_unflushed(std::string_view name, std::string_view content) const {
  check_plain_name(name);
  std::string temp = "." + std::string(name) + "." + random_hex(12) + ".tmp";
  try {
    UniqueFd fd = create_new(temp);
    write_all(fd.get(), content, path_ / temp);
    move_to(temp, *this, name, false);
  } catch (...) {
    unlinkat(fd_.get(), temp.c_str(), 0);
    throw;
  }
}

bool SafeDir::link_fd(int fd, std::string_view name) const {
  check_plain_name(name);
  std::string fd_path = "/proc/self/fd/" + std::to_string(fd);
  return linkat(AT_FDCWD, fd_path.c_str(), fd_.get(), std::string(name).c_str(),
                AT_SYMLINK_FOLLOW) == 0;
}

std::string SafeDir::read_small_file(std::string_view name, size_t max_bytes) const {
  UniqueFd fd = open_read(name);
  std::string content;
  char buffer[65536];
  while (true) {
    ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot read", path_ / name);
    if (n == 0) return content;
    content.append(buffer, static_cast<size_t>(n));
    if (content.size() > max_bytes) {
      throw input_error((path_ / name).string() + " is larger than expected (" +
                        std::to_string(max_bytes) + " bytes at most)");
    }
  }
}

bool SafeDir::move_to(std::string_view name, const SafeDir& target, std::string_view new_name,
                      bool no_replace) const {
  check_plain_name(name);
  check_plain_name(new_name);
  unsigned flags = no_replace ? RENAME_NOREPLACE : 0;
  if (syscall(SYS_renameat2, fd_.get(), std::string(name).c_str(), target.fd(),
              std::string(new_name).c_str(), flags) == 0) {
    return true;
  }
  if (no_replace && errno == EEXIST) return false;
  throw io_error("cannot move " + (path_ / name).string() + " to", target.path() / new_name);
}

void SafeDir::remove_file(std::string_view name) const {
  check_plain_name(name);
  if (unlinkat(fd_.get(), std::string(name).c_str(), 0) != 0 && errno != ENOENT) {
    throw io_error("cannot delete", path_ / name);
  }
}

uint64_t SafeDir::remove_tree(std::string_view name) const {
  auto node = entry(name);
  if (!node) return 0;
  uint64_t freed = node->size;
  if (node->type == NodeType::Directory) {
    std::optional<SafeDir> sub = open_subdir(name);
    if (sub) {
      for (const auto& child : sub->list()) freed += sub->remove_tree(child.name);
    }
    if (unlinkat(fd_.get(), std::string(name).c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      throw io_error("cannot delete the directory", path_ / name);
    }
    return freed;
  }
  remove_file(name);
  return freed;
}

uint64_t SafeDir::tree_size(std::string_view name) const {
  auto node = entry(name);
  if (!node) return 0;
  if (node->type != NodeType::Directory) return node->size;
  std::optional<SafeDir> sub = open_subdir(name);
  return sub ? sub->listed_size(sub->list()) : 0;
}

uint64_t SafeDir::listed_size(const std::vector<DirEntry>& listed) const {
  uint64_t total = 0;
  for (const auto& child : listed)
    total += child.type == NodeType::Directory ? tree_size(child.name) : child.size;
  return total;
}

void SafeDir::sync() const {
  if (fsync(fd_.get()) != 0 && errno != EINVAL) throw io_error("cannot flush", path_);
}

}  // namespace neuron_cache::sys
