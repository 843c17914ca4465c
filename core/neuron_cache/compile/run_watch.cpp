#include "neuron_cache/compile/run_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/format/layout.h"

namespace neuron_cache::compile {

namespace {

constexpr uint32_t kOpenEvents = IN_OPEN | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr uint32_t kNameEvents =
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr uint32_t kTopEvents = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW;

}  // namespace

RunWatch::~RunWatch() {
  try {
    end();
  } catch (...) {
    // Nobody asks for the events any more: only the thread had to stop.
  }
}

bool RunWatch::begin(const SeedView& view) {
  if (!inotify_ && !inotify_.open()) return false;
  drain(false);
  events_ = Events{};
  // A folder watched already keeps its watch (same inode: same watch, nothing walked again).
  if (!watch(view.dir().path(), kTopEvents, Kind::Top, "")) return false;
  for (const auto& compiler : view.compilers()) {
    if (!watch(view.dir().path() / compiler, kNameEvents, Kind::Names, compiler)) return false;
    auto links = view.links(compiler);
    if (links && !watch(links->path(), kOpenEvents, Kind::Opens, compiler)) return false;
  }
  if (!wake_) {
    int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake < 0) return false;
    wake_ = sys::UniqueFd(wake);
  }
  thread_ = std::thread([this] {
    try {
      run();
    } catch (...) {
      // An exception leaving a thread ends the process: end() rethrows it instead.
      failure_ = std::current_exception();
    }
  });
  return true;
}

RunWatch::Events RunWatch::end() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof one) < 0) events_.lost = true;
    thread_.join();
    uint64_t count = 0;
    if (read(wake_.get(), &count, sizeof count) < 0) count = 0;  // ready for the next run
  }
  if (std::exception_ptr failure = std::exchange(failure_, nullptr)) {
    events_ = Events{};
    std::rethrow_exception(failure);
  }
  return std::move(events_);
}

bool RunWatch::watch(const std::filesystem::path& path, uint32_t mask, Kind kind,
                     const std::string& compiler) {
  int wd = inotify_.watch(path, mask);
  if (wd < 0) return false;
  watches_[wd] = {kind, compiler};
  return true;
}

void RunWatch::run() {
  while (true) {
    pollfd fds[2] = {{inotify_.fd(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int ready = poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      events_.lost = true;
      return;
    }
    drain(true);  // on a stop request too: the command has exited, its events are all queued
    if (fds[1].revents & POLLIN) return;
  }
}

// Reads every queued event; `keep` false drops them (they are not the run's), but for the
// watches the kernel removed.
void RunWatch::drain(bool keep) {
  inotify_.drain([&](const inotify_event& event) {
    if (event.mask & IN_IGNORED) watches_.erase(event.wd);  // its folder was deleted
    if (keep) note(event);
  });
}

void RunWatch::note(const inotify_event& event) {
  if (event.mask & IN_Q_OVERFLOW) events_.lost = true;
  auto watch = watches_.find(event.wd);
  // Events without a name are about the watched folder itself (listing it is not a use).
  if (watch == watches_.end() || event.len == 0) return;
  const auto& [kind, compiler] = watch->second;
  std::string name = event.name;
  bool is_dir = event.mask & IN_ISDIR;
  if (kind == Kind::Opens && !is_dir) {
    if (auto module = module_of_link(name)) events_.opened.insert({compiler, *module});
  } else if (kind == Kind::Names) {
    bool made = event.mask & (IN_CREATE | IN_MOVED_TO);
    (made ? events_.created : events_.deleted).insert({compiler, name});
  } else if (kind == Kind::Top && is_dir && layout::compiler_version_of(name)) {
    events_.new_compilers.insert(name);
  }
}

}  // namespace neuron_cache::compile
