// Directories handled by file descriptor. The default cache root sits in world-writable
// /var/tmp, so every name below an opened directory is resolved with O_NOFOLLOW: a symlink planted
// inside the cache is never traversed to write, delete or list outside the root.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/sys/fd.h"

namespace neuron_cache::sys {

enum class NodeType { Directory, File, Symlink, Other };

struct LockedDir;

struct DirEntry {
  std::string name;
  NodeType type;
  uint64_t size = 0;  // bytes of a regular file (0 otherwise)
  uid_t owner = 0;
  double mtime = 0;  // seconds since the epoch
};

class SafeDir {
 public:
  // Opens an existing directory; the path itself may go through symlinks (the user chose it).
  static SafeDir open(const std::filesystem::path& path);
  // Opens the directory, creating it and its parents (mode 0755) when missing.
  static SafeDir open_or_create(const std::filesystem::path& path);

  // A sub-directory, or nothing when the name is missing, a symlink or not a directory.
  std::optional<SafeDir> open_subdir(std::string_view name) const;
  // Opens `name`, creating it with mode 0755 when missing; refuses a symlink or a file there.
  SafeDir make_subdir(std::string_view name) const;
  // make_subdir for each '/'-separated component of `relative`.
  SafeDir make_path(std::string_view relative) const;
  // open_subdir for each '/'-separated component of `relative`: nothing when one is missing, a
  // symlink or not a directory. An empty `relative` is this directory.
  std::optional<SafeDir> open_path(std::string_view relative) const;
  // A new scratch folder named by `next_name()` (called again while the name is taken), already
  // locked when it appears under that name: see LockedDir.
  LockedDir make_locked_subdir(const std::function<std::string()>& next_name) const;

  // The entries of this folder but . and .. (symlinks as symlinks). It reads the folder's own
  // descriptor from its start, whose offset is shared: one lister at a time per SafeDir; open
  // the folder again to list it on two threads at once.
  std::vector<DirEntry> list() const;
  std::optional<DirEntry> entry(std::string_view name) const;

  // Opens a regular file for reading; refuses symlinks.
  UniqueFd open_read(std::string_view name) const;
  // Creates a new file (mode 0644) that must not exist yet, open for reading and writing (a
  // download reads back what its later parts wrote to verify it).
  UniqueFd create_new(std::string_view name) const;
  // Writes `content` to a new file, fsyncs it.
  void write_new_file(std::string_view name, std::string_view content) const;
  // Writes `content` under a temporary name of this folder, fsyncs it and renames it to `name`,
  // so a reader sees the old file or the whole new one, never a part. With no_replace a `name`
  // already there wins: returns false and the temporary file is gone.
  bool publish_file(std::string_view name, std::string_view content, bool no_replace) const;
  // publish_file (replacing) without the fsync: for notes rewritten often whose loss after a
  // crash only costs work, never correctness (a download's journal).
  void replace_unflushed(std::string_view name, std::string_view content) const;
  // Hard-links the open regular file `fd` as `name` here (through /proc/self/fd): the very inode
  // that was opened and checked, not whatever its path names now. False when linkat fails; errno
  // tells why.
  bool link_fd(int fd, std::string_view name) const;
  // The content of a small regular file; refuses symlinks.
  std::string read_small_file(std::string_view name, size_t max_bytes = 64 << 20) const;

  // Moves `name` into `target` as `new_name`; with no_replace it fails if that name exists.
  // Returns false (without throwing) only when no_replace was set and the name existed.
  bool move_to(std::string_view name, const SafeDir& target, std::string_view new_name,
               bool no_replace) const;
  void remove_file(std::string_view name) const;
  // Deletes `name` and everything below it without following any symlink; a symlink is removed
  // itself. Returns the bytes of the regular files deleted.
  uint64_t remove_tree(std::string_view name) const;
  // Bytes of the regular files below `name` (symlinks are not followed nor counted).
  uint64_t tree_size(std::string_view name) const;
  // The same for this directory, given `listed`, what list() just returned: its files are not
  // asked about again (status of 10,000 entries made 13 stat calls per entry, 9 of them here).
  uint64_t listed_size(const std::vector<DirEntry>& listed) const;

  void sync() const;
  int fd() const { return fd_.get(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  SafeDir(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::filesystem::path path_;
};

// A scratch folder of a work area that other processes sweep (claim_abandoned): it is made as
// ".making-<random>", flock-ed, then renamed to its name, so under its name it is locked from the
// first instant and a sweep can never take a live folder for an abandoned one.
struct LockedDir {
  std::string name;
  SafeDir dir;
  UniqueFd lock;  // the flock, close-on-exec: a compiler child must not keep it after we die
};

// Used by the sweep of a work area before it deletes `item`: true when nobody owns it (a folder
// whose flock it could take, which `held` keeps until the folder is deleted, or anything that is
// not a folder); false for a live owner's folder, or one still being made by make_locked_subdir.
bool claim_abandoned(const SafeDir& area, const DirEntry& item, std::optional<SafeDir>& held);

// Every folder and file this tool creates gets mode 0755 or 0644 through the modes given to
// mkdir and open, so a permissive umask (000, 002) never makes them group- or world-writable,
// and a stricter one (077) still removes bits: the user asked for privacy.

// Creates `path` and its missing parents with mode 0755 (std::filesystem::create_directories
// would use 0777 & ~umask). Throws an operational Error.
void make_directories(const std::filesystem::path& path);

// Writes `content` to `file`, created with mode 0644 (a file already there is truncated and
// keeps its mode). Not atomic: for reports and staged files; see replace_file.
void write_whole_file(const std::filesystem::path& file, std::string_view content);

// Writes `content` to `file` (creating its folders) with SafeDir::publish_file, so a reader sees
// the old content or the new, never a mix; for the memos kept in the cache root. Throws
// std::exception on failure: callers that only save work next time ignore it.
void replace_file(const std::filesystem::path& file, std::string_view content);

// A file the tool keeps for itself below a root it shares with others (its memos and index
// copies in the cache root): THE rule for such files. Every folder below `root` is opened, or
// made, without following a symlink, so nothing is read, written or deleted outside the root
// whatever was planted there; what is read back must be a regular file no larger than asked (a
// FIFO, a link to /dev/zero or a huge file are read as nothing). The root itself may be reached
// through symlinks: the user chose it.
class RootedFile {
 public:
  RootedFile() = default;  // none: reads find nothing, writes keep nothing
  RootedFile(std::filesystem::path root, std::string relative);
  bool empty() const { return root_.empty(); }
  std::filesystem::path path() const { return root_ / relative_; }  // for messages
  // The file at '/'-path `relative` below this one (plain names only).
  RootedFile child(std::string_view relative) const;
  // The content, or nothing when the file is missing, is not a regular file, is reached through
  // a symlink or holds more than `max_bytes`.
  std::optional<std::string> read(size_t max_bytes) const;
  // Publishes `content` (SafeDir::publish_file: a reader sees the old or the new, never a mix),
  // creating the folders on the way. Throws an Error, and never writes elsewhere.
  void replace(std::string_view content) const;
  // replace() without the fsync (SafeDir::replace_unflushed): for notes rewritten at every run
  // whose loss after a crash costs nothing but what they counted.
  void replace_unflushed(std::string_view content) const;
  // Deletes the file or folder (a symlink itself, never its target); a missing one is fine.
  void remove() const;

 private:
  // The folder holding it, made when `make`; nothing when missing (or a symlink) and !make.
  std::optional<SafeDir> parent(bool make) const;
  std::string name() const;
  std::filesystem::path root_;
  std::string relative_;  // '/'-separated, plain names only
};

// The path with every symlink resolved, or nothing when it does not exist.
std::optional<std::filesystem::path> real_path(const std::filesystem::path& path);

// Rejects names that could leave a directory: empty, ".", "..", or containing '/' or NUL.
void check_plain_name(std::string_view name);

}  // namespace neuron_cache::sys
