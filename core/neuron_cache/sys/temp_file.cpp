#include "neuron_cache/sys/temp_file.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::sys {

namespace fs = std::filesystem;

namespace {

bool write_all(int fd, const std::string& content) {
  for (size_t at = 0; at < content.size();) {
    ssize_t n = ::write(fd, content.data() + at, content.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

TempFile::TempFile(const std::string& content) {
  // A memory file reached through /proc: a process killed mid-push leaves nothing behind, where a
  // file in TMPDIR would stay until something swept it. Without /proc (a bare chroot): TMPDIR.
  int memory = memfd_create("neuron-cache", MFD_CLOEXEC);
  if (memory >= 0 && access("/proc/self/fd", X_OK) == 0 && write_all(memory, content)) {
    fd_ = memory;
    path_ = "/proc/self/fd/" + std::to_string(memory);
    return;
  }
  if (memory >= 0) close(memory);
  std::string pattern = (fs::temp_directory_path() / "neuron-cache-XXXXXX").string();
  int fd = mkstemp(pattern.data());
  if (fd < 0)
    throw operational_error("cannot create a temporary file in " +
                            fs::temp_directory_path().string());
  close(fd);
  path_ = pattern;
  try {
    write_whole_file(path_, content);
  } catch (...) {
    unlink(path_.c_str());
    throw;
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) {
    close(fd_);
    return;
  }
  std::error_code ignored;
  fs::remove(path_, ignored);
}

}  // namespace neuron_cache::sys
