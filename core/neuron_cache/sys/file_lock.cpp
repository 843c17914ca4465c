#include "neuron_cache/sys/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::sys {
namespace {

struct flock whole_file(short type) {
  struct flock whole {};
  whole.l_type = type;
  whole.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however it grows
  return whole;
}

// A filesystem without record locks (ENOLCK, EINVAL, EOPNOTSUPP) lets nobody hold one either.
bool record_locks_unsupported(int error) {
  return error == ENOLCK || error == EINVAL || error == EOPNOTSUPP;
}

// True when taken, false when another process holds it; throws on any other failure.
bool try_lock(int fd, LockKind kind, const std::filesystem::path& path) {
  while (true) {
    int result = 0;
    if (kind == LockKind::Flock) {
      result = flock(fd, LOCK_EX | LOCK_NB);
    } else {
      struct flock whole = whole_file(F_WRLCK);
      result = fcntl(fd, F_SETLK, &whole);
    }
    if (result == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK || errno == EAGAIN || errno == EACCES) return false;
    throw operational_error(
        "cannot lock " + path.string() + ": " + std::strerror(errno) +
        (kind == LockKind::Record ? " (on NFSv3 the lock daemons rpc.statd/lockd must run)" : ""));
  }
}

// What a holder wrote in the lock file: the tool writes a pid there, nothing longer, so at most
// 64 bytes are read (another writer's file may be any size).
std::string holder_text(int fd) {
  constexpr size_t kMaxHolder = 64;
  std::string text(kMaxHolder + 1, '\0');
  ssize_t n = pread(fd, text.data(), text.size(), 0);
  if (n < 0 || static_cast<size_t>(n) > kMaxHolder) return "";
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::optional<FileLock> FileLock::acquire(const SafeDir& dir, const std::string& name,
                                          LockKind kind, Clock::time_point deadline,
                                          const std::function<void(const std::string&)>& on_wait) {
  std::filesystem::path path = dir.path() / name;
  UniqueFd fd(openat(dir.fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) throw io_failure("cannot open the lock file", path, errno);
  auto pause = std::chrono::milliseconds(5);
  for (bool first = true;; first = false) {
    if (try_lock(fd.get(), kind, path)) return FileLock(std::move(fd), std::move(path), kind);
    if (first && on_wait) on_wait(holder_text(fd.get()));
    auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
}

FileLock::~FileLock() {
  if (!fd_ || kind_ != LockKind::Record) return;  // closing the file drops a flock
  struct flock unlock = whole_file(F_UNLCK);
  fcntl(fd_.get(), F_SETLK, &unlock);
}

bool try_lock_both_kinds(int fd, const std::filesystem::path& path) {
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK || errno == EINTR) return false;
    throw operational_error("cannot flock " + path.string() + ": " + std::strerror(errno));
  }
  struct flock range = whole_file(F_WRLCK);
  if (fcntl(fd, F_OFD_SETLK, &range) == 0) return true;
  int error = errno;
  if (record_locks_unsupported(error)) return true;
  flock(fd, LOCK_UN);
  if (error == EAGAIN || error == EACCES || error == EINTR) return false;
  throw operational_error("cannot take a record lock (fcntl F_OFD_SETLK) on " + path.string() +
                          ": " + std::strerror(error));
}

bool locked_elsewhere(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  flock(fd, LOCK_UN);
  struct flock range = whole_file(F_WRLCK);
  if (fcntl(fd, F_OFD_GETLK, &range) != 0) return false;
  return range.l_type != F_UNLCK;
}

}  // namespace neuron_cache::sys
