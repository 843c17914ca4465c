#include "neuron_cache/sys/fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "neuron_cache/error.h"

namespace neuron_cache::sys {
namespace {

Error io_error(const std::string& what, const std::filesystem::path& path) {
  return io_failure(what, path, errno);
}

}  // namespace

bool is_disk_refusal(int error) {
  return error == EACCES || error == EPERM || error == EROFS || error == ENOSPC ||
         error == EDQUOT || error == EFBIG;
}

Error io_failure(const std::string& what, const std::filesystem::path& path, int error) {
  std::string text = what + " " + path.string() + ": " + std::strerror(error);
  if (!is_disk_refusal(error)) return operational_error(text);
  std::string fix = ": give this user read and write access to that folder";
  if (error == ENOSPC || error == EDQUOT) fix = ": free space on that disk (or raise the quota)";
  if (error == EFBIG)
    fix =
        ": the process's file size limit (ulimit -f) or the filesystem's is below this file's "
        "size: raise the limit";
  return {ErrorKind::LocalDisk,
          text + fix +
              ", or give the local cache another folder (--cache-dir, the Action's `cache-dir`, "
              "NEURON_COMPILE_CACHE_URL)"};
}

void require_regular_file(int fd, const std::filesystem::path& path) {
  struct stat info {};
  if (fstat(fd, &info) != 0) throw io_error("cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    throw operational_error(path.string() +
                            " is not a regular file (a FIFO, socket or device): not read");
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw io_error("cannot read", path);
  }
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string read_whole_fd(int fd) {
  std::string content;
  char buffer[65536];
  for (off_t offset = 0;;) {
    ssize_t n = pread(fd, buffer, sizeof buffer, offset);
    if (n <= 0) return content;
    content.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
}

bool same_file(int fd, int dir_fd, const char* name) {
  struct stat held {
  }, current{};
  if (fstat(fd, &held) != 0) return false;
  if (fstatat(dir_fd, name, &current, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return held.st_dev == current.st_dev && held.st_ino == current.st_ino;
}

}  // namespace neuron_cache::sys
