#include "neuron_cache/sys/inotify.h"

#include <unistd.h>

#include <cerrno>

namespace neuron_cache::sys {

bool Inotify::open() {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return false;
  fd_ = UniqueFd(fd);
  return true;
}

int Inotify::watch(const std::filesystem::path& path, uint32_t mask) const {
  return inotify_add_watch(fd_.get(), path.c_str(), mask);
}

void Inotify::unwatch(int wd) const {
  inotify_rm_watch(fd_.get(), wd);
}

void Inotify::drain(const std::function<void(const inotify_event&)>& on_event,
                    const std::function<bool()>& stop) const {
  alignas(inotify_event) char buffer[64 << 10];
  while (!stop || !stop()) {
    ssize_t n = read(fd_.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (char* p = buffer; p < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(p);
      on_event(*event);
      p += sizeof(inotify_event) + event->len;
    }
  }
}

}  // namespace neuron_cache::sys
