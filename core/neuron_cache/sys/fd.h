// File descriptors: an owner that closes, and the few checks every reader of a descriptor needs.
#pragma once

#include <filesystem>
#include <string>

#include "neuron_cache/error.h"

namespace neuron_cache::sys {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Whether `error` (an errno value) says the local disk refused a write: EACCES, EPERM, EROFS
// (permissions, a read-only mount), ENOSPC, EDQUOT, EFBIG (no space, a quota, a file size limit).
bool is_disk_refusal(int error);

// "`what` `path`: <strerror(error)>", with what to do when the disk refused (a LocalDisk
// Error), else an operational Error.
Error io_failure(const std::string& what, const std::filesystem::path& path, int error);

// Everything `fd` holds from offset 0 (a small file: an index, a registry entry in memory).
std::string read_whole_fd(int fd);

// Whether `fd` is still the file named `name` in the folder `dir_fd` (not replaced or deleted
// since it was opened): what makes a lock taken on an open file the lock of that name.
bool same_file(int fd, int dir_fd, const char* name);

// Throws unless `fd` (opened with O_NONBLOCK so that a FIFO cannot block the open) is a regular
// file; then clears O_NONBLOCK.
void require_regular_file(int fd, const std::filesystem::path& path);

}  // namespace neuron_cache::sys
