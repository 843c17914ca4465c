#include "neuron_cache/compile/seed_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <sstream>
#include <system_error>
#include <thread>

#include "neuron_cache/compile/work_area.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/process/identity.h"
#include "neuron_cache/sys/inotify.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::compile {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLinksDir = ".links";
constexpr const char* kStateFile = kViewStateFile;
constexpr const char* kStateMagic = "neuron-cache-seed-view 1";
// One view per compile running at once on the machine: more means views are leaking.
constexpr int kMaxViews = 64;
constexpr int kMaxDepth = 8;  // entries are 1 level deep, traced exports a few more
// ".unseeding-<12 hex>" and name + ".<inode>.<index>" must stay within NAME_MAX (255).
constexpr size_t kMaxSeededName = 230;
// Waiting for the coarse clock's next tick (1 to 10 ms) before stamping a folder just changed.
constexpr int kStampAttempts = 10;
constexpr std::chrono::milliseconds kStampWait{2};
constexpr uint32_t kFolderEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;

bool later(const timespec& a, const timespec& b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

// Whether any later change to the folder must give it other timestamps: they are older than the
// coarse clock the kernel stamps changes with. Whole seconds may come from a filesystem with
// coarse timestamps, where the next change could get the same ones: one second more is needed.
bool settled(const struct stat& info) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  if (info.st_mtim.tv_nsec == 0 && info.st_ctim.tv_nsec == 0) now.tv_sec -= 1;
  return later(now, info.st_mtim) && later(now, info.st_ctim);
}

// What changes whenever a name is added to, removed from or renamed in a folder, or the folder
// is replaced.
std::string stamp_of(const struct stat& info) {
  std::ostringstream text;
  text << info.st_dev << '.' << info.st_ino << '.' << info.st_mtim.tv_sec << '.'
       << info.st_mtim.tv_nsec << '.' << info.st_ctim.tv_sec << '.' << info.st_ctim.tv_nsec;
  return text.str();
}

// The stamp of the folder `name`; "" when it is missing or not a folder.
std::string folder_stamp(int dir_fd, const std::string& name, bool* is_settled = nullptr) {
  struct stat info {};
  if (fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(info.st_mode)) {
    return "";
  }
  if (is_settled) *is_settled = settled(info);
  return stamp_of(info);
}

// Calls fn(name, type (DT_*), inode) for each name in `dir`, from the directory listing alone (no
// stat per name unless the filesystem gives no type): what keeps comparing 10,000 names cheap.
template <typename Fn>
size_t for_each_name(const sys::SafeDir& dir, Fn fn) {
  int fd = openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* stream = fd < 0 ? nullptr : fdopendir(fd);
  if (stream == nullptr) {
    if (fd >= 0) close(fd);
    throw operational_error("cannot list " + dir.path().string() + ": " + std::strerror(errno));
  }
  size_t count = 0;
  while (dirent* item = readdir(stream)) {
    std::string_view name = item->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = item->d_type;
    if (type == DT_UNKNOWN) {
      struct stat info {};
      if (fstatat(dir.fd(), item->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0) {
        type = static_cast<unsigned char>(IFTODT(info.st_mode));
      }
    }
    fn(std::string(name), type, static_cast<uint64_t>(item->d_ino));
    ++count;
  }
  closedir(stream);
  return count;
}

std::set<std::string> compiler_dirs(const sys::SafeDir& dir) {
  std::set<std::string> names;
  for (const auto& item : dir.list()) {
    if (is_compiler_dir(item)) names.insert(item.name);
  }
  return names;
}

bool plain_name(const std::string& name) {
  for (unsigned char c : name) {
    if (c <= ' ' || c == 0x7f) return false;  // the state file is split on whitespace
  }
  return !name.empty();
}

// ---------------------------------------------------------------------------------------------
// The state file of a view: written when a run gives the view back, removed while it is in use.

struct ViewState {
  std::string token;
  std::map<std::string, std::string> stamps;  // real compiler folder -> stamp the view matches
  std::map<std::string, std::map<std::string, std::string>> pending;
};

// The symlink targets a view was seeded under: a view seeded by a process trusting more places
// must not serve one trusting fewer.
std::string trust_line(const std::vector<fs::path>& trusted) {
  std::string line = "trust";
  for (const auto& root : trusted) line += " " + sha256_hex(root.string()).substr(0, 16);
  return line;
}

std::optional<ViewState> parse_state(const std::string& text, const std::string& trust) {
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || line != kStateMagic) return std::nullopt;
  // A view written before a reboot may have lost writes that were never flushed (nothing is
  // fsynced: a view is only a cache of the real one), so it counts as missing.
  if (!std::getline(lines, line) || line != "boot " + process::boot_id()) return std::nullopt;
  if (!std::getline(lines, line) || line != trust) return std::nullopt;
  ViewState state;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, compiler, stamp, name;
    words >> kind;
    if (kind == "token") words >> state.token;
    if (kind == "stamp" && words >> compiler >> stamp) state.stamps[compiler] = stamp;
    if (kind == "pending" && words >> compiler >> stamp >> name) {
      state.pending[compiler][name] = stamp;
    }
  }
  if (state.token.empty()) return std::nullopt;
  return state;
}

std::optional<ViewState> read_state(const sys::SafeDir& view, const std::string& trust) {
  try {
    if (!view.entry(kStateFile)) return std::nullopt;
    return parse_state(view.read_small_file(kStateFile), trust);
  } catch (const Error&) {
    return std::nullopt;
  }
}

void write_state(const sys::SafeDir& view, const ViewState& state, const std::string& trust) {
  std::string text = std::string(kStateMagic) + "\nboot " + process::boot_id() + "\n" + trust +
                     "\ntoken " + state.token;
  for (const auto& [compiler, stamp] : state.stamps) text += "\nstamp " + compiler + " " + stamp;
  for (const auto& [compiler, names] : state.pending) {
    for (const auto& [name, stamp] : names) {
      text += "\npending " + compiler + " " + stamp + " " + name;
    }
  }
  text += "\n";
  // Not flushed: after a crash the boot id differs and the view is rebuilt whatever the file
  // says, and an fsync per compile costs tens of ms on a busy disk.
  view.replace_unflushed(kStateFile, text);
}

// ---------------------------------------------------------------------------------------------
// Seeding one entry. A view is seeded only while no run holds it, and a process killed while
// seeding it leaves no state file (its next user rebuilds it): entries are made in place.

// A seeded entry's folder in `staged`; the name must be free (unseeded before).
sys::SafeDir make_seeded_folder(const sys::SafeDir& staged, const std::string& name) {
  if (mkdirat(staged.fd(), name.c_str(), 0755) != 0) {
    throw operational_error(errno == EEXIST
                                ? std::string("the view has it already")
                                : "cannot create it in the view " + staged.path().string() + ": " +
                                      std::strerror(errno));
  }
  auto made = staged.open_subdir(name);
  if (!made) throw operational_error("it disappeared from the view while being seeded");
  return std::move(*made);
}

// The hard links of one seeded entry: .links/<compiler>/<module>.<inode of the real folder>.<n>.
struct LinkJob {
  const local::LocalCache& cache;
  const sys::SafeDir& links;  // .links/<compiler>
  const std::string& compiler;
  std::string prefix;  // "<module>.<inode of the real folder>."
  int next = 0;
  size_t made = 0;

  std::string next_flat() { return prefix + std::to_string(next++); }
};

// Makes `name` of `staged` a symlink to the hard link `flat` (`up` leads from `staged` to the
// view). Made before the hard link: an entry whose seeding fails is unseeded by its symlinks.
void symlink_to(LinkJob& job, const std::string& flat, const sys::SafeDir& staged,
                const std::string& name, const std::string& up) {
  std::string target = up + kLinksDir + "/" + job.compiler + "/" + flat;
  if (symlinkat(target.c_str(), staged.fd(), name.c_str()) != 0) {
    throw operational_error("cannot create " + (staged.path() / name).string() + ": " +
                            std::strerror(errno));
  }
  ++job.made;
}

// linkat into `into` as `name`, replacing a hard link an interrupted unseed left there.
template <typename Link>
void link_as(LinkJob& job, const sys::SafeDir& into, const std::string& name,
             const fs::path& source, Link link) {
  bool made = link();
  if (!made && errno == EEXIST) {
    unlinkat(into.fd(), name.c_str(), 0);
    made = link();
  }
  if (!made) {
    throw operational_error("cannot hard-link " + source.string() +
                            " into the view: " + std::strerror(errno));
  }
  ++job.made;
}

// Hard-links the regular file `name` of `real` into `into` as `as` by its name, without opening
// it (seeding 10,000 entries costs its system calls). linkat without AT_SYMLINK_FOLLOW never
// follows a symlink, but a name replaced by one since it was listed would be linked itself, and
// every open through the view would follow it: what was linked must be a regular file.
void link_by_name(const sys::SafeDir& real, const std::string& name, const sys::SafeDir& into,
                  const std::string& as, LinkJob& job) {
  fs::path source = real.path() / name;
  link_as(job, into, as, source,
          [&] { return linkat(real.fd(), name.c_str(), into.fd(), as.c_str(), 0) == 0; });
  struct stat info {};
  if (fstatat(into.fd(), as.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(info.st_mode)) {
    unlinkat(into.fd(), as.c_str(), 0);
    throw operational_error(source.string() + " was replaced by something else than a file");
  }
}

// A NEFF entry (all its files regular files at its top): hard-linked into its seeded folder,
// but for the NEFF, a symlink to its hard link in .links/<compiler>, the one folder whose opens
// are watched: every hit reads the NEFF (an entry whose graph or flags alone were read was not
// reused). Two inodes per entry, its folder and that symlink (a hard link makes none): creating
// inodes is most of what seeding costs.
void link_neff_entry(const sys::SafeDir& real, const sys::SafeDir& staged,
                     const std::vector<std::string>& files, LinkJob& job) {
  for (const auto& file : files) {
    if (layout::is_lock_file(file)) continue;
    if (file != layout::kNeff) {
      link_by_name(real, file, staged, file, job);
      continue;
    }
    std::string flat = job.next_flat();
    symlink_to(job, flat, staged, file, "../../");
    link_by_name(real, file, job.links, flat, job);
  }
}

// A file of a real entry that is a symlink LocalCache trusts (a Hub-cache link), opened and
// hard-linked through its fd: the very file that was checked.
void link_trusted_target(const sys::SafeDir& real, const std::string& name, const std::string& flat,
                         LinkJob& job) {
  auto target = job.cache.link_target(real, name);
  if (!target) {
    throw operational_error((real.path() / name).string() + " is a symlink to an untrusted place");
  }
  int fd = ::open(target->c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw operational_error("cannot open " + target->string() + ": " + std::strerror(errno));
  }
  sys::UniqueFd guard(fd);
  sys::require_regular_file(fd, *target);
  link_as(job, job.links, flat, *target, [&] { return job.links.link_fd(fd, flat); });
}

// Mirrors `real` into `staged` (`up` leads from `staged` to the view), every file a symlink to
// its hard link in .links/<compiler>: the entries whose files are not all regular files at their
// top (traced exports, whose use may open any of them; Hub-cache links).
void link_tree(const sys::SafeDir& real, const sys::SafeDir& staged, LinkJob& job,
               const std::string& up, int depth) {
  for (const auto& item : real.list()) {
    if (layout::is_lock_file(item.name)) continue;
    if (item.type == sys::NodeType::Directory) {
      auto sub = depth < kMaxDepth ? real.open_subdir(item.name) : std::nullopt;
      if (!sub) throw operational_error("it is deeper than " + std::to_string(kMaxDepth));
      link_tree(*sub, make_seeded_folder(staged, item.name), job, up + "../", depth + 1);
    } else if (item.type == sys::NodeType::File || item.type == sys::NodeType::Symlink) {
      std::string flat = job.next_flat();
      symlink_to(job, flat, staged, item.name, up);
      if (item.type == sys::NodeType::File) {
        link_by_name(real, item.name, job.links, flat, job);
      } else {
        link_trusted_target(real, item.name, flat, job);
      }
    } else {
      // Seeded without it, the entry would promise a file it does not have.
      throw operational_error((real.path() / item.name).string() +
                              " is neither a file, a folder nor a symlink");
    }
  }
}

// The names of a real entry when they are all regular files (a NEFF entry as libneuronxla
// writes it), from its listing alone; nothing when it holds anything else.
std::optional<std::vector<std::string>> plain_files(const sys::SafeDir& real) {
  std::vector<std::string> files;
  bool plain = true;
  for_each_name(real, [&](std::string name, unsigned char type, uint64_t) {
    plain = plain && type == DT_REG;
    files.push_back(std::move(name));
  });
  if (!plain) return std::nullopt;
  return files;
}

// Deletes the hard links the symlinks below `dir` point at (only plain names of `links`).
void remove_links(const sys::SafeDir& dir, const sys::SafeDir& links, int depth) {
  for (const auto& item : dir.list()) {
    if (item.type == sys::NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = dir.open_subdir(item.name)) remove_links(*sub, links, depth + 1);
    } else if (item.type == sys::NodeType::Symlink) {
      char buffer[PATH_MAX];
      ssize_t n = readlinkat(dir.fd(), item.name.c_str(), buffer, sizeof buffer - 1);
      if (n <= 0) continue;
      std::string_view target(buffer, static_cast<size_t>(n));
      std::string flat(target.substr(target.rfind('/') + 1));
      if (!flat.empty() && flat != "." && flat != "..") unlinkat(links.fd(), flat.c_str(), 0);
    }
  }
}

// Renamed away first, then deleted with its hard links: a run never meets a half-removed entry.
bool hide_then_remove(const sys::SafeDir& dir, const std::string& name,
                      const std::optional<sys::SafeDir>& links) {
  std::string hidden = ".unseeding-" + sys::random_hex(12);
  if (renameat(dir.fd(), name.c_str(), dir.fd(), hidden.c_str()) != 0) return false;
  auto sub = links ? dir.open_subdir(hidden) : std::nullopt;
  if (sub) remove_links(*sub, *links, 0);
  dir.remove_tree(hidden);
  return true;
}

// The module a hard link of .links/<compiler> belongs to ("<module>.<inode>.<n>"), and the
// inode of the real folder it was seeded from.
std::optional<std::pair<std::string, std::string>> flat_owner(const std::string& flat) {
  size_t last = flat.rfind('.');
  size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : flat.rfind('.', last - 1);
  if (middle == std::string::npos) return std::nullopt;
  return std::make_pair(flat.substr(0, middle), flat.substr(middle + 1, last - middle - 1));
}

// A compiler folder of a view against the real one, by name and by the inode of the real folder
// each entry was seeded from (in its hard links' names): one readdir of each folder.
struct Comparison {
  std::map<std::string, std::string> real_inodes;  // real MODULE_ folder -> its inode
  std::set<std::string> seeded;                    // names in the view's folder
  std::set<std::string> stale;  // seeded names the real folder lacks, or holds replaced
  std::map<std::string, std::vector<std::string>> flats;  // seeded name -> its hard links
  std::vector<std::string> orphans;  // hard links of no seeded name (interrupted work)
  size_t names_listed = 0;
};

// `real` null: the real folder is gone, every seeded name is stale.
Comparison compare(const sys::SafeDir* real, const sys::SafeDir& staged,
                   const sys::SafeDir& links) {
  Comparison out;
  auto note_real = [&](std::string name, unsigned char type, uint64_t ino) {
    if (type == DT_DIR && name.starts_with(layout::kModulePrefix)) {
      out.real_inodes[name] = std::to_string(ino);
    }
  };
  if (real) out.names_listed += for_each_name(*real, note_real);
  out.names_listed += for_each_name(staged, [&](std::string name, unsigned char, uint64_t) {
    out.seeded.insert(std::move(name));
  });
  std::map<std::string, std::string> seeded_inodes;
  out.names_listed += for_each_name(links, [&](std::string flat, unsigned char, uint64_t) {
    auto owner = flat_owner(flat);
    if (!owner || !out.seeded.count(owner->first)) {
      out.orphans.push_back(std::move(flat));
      return;
    }
    seeded_inodes.insert(*owner);
    out.flats[owner->first].push_back(std::move(flat));
  });
  for (const auto& name : out.seeded) {
    auto found = out.real_inodes.find(name);
    if (found == out.real_inodes.end() || seeded_inodes[name] != found->second) {
      out.stale.insert(name);
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Deleting: the content of a view rebuilt, and the sweep of abandoned work folders. A view of
// 10,000 entries takes about as long to delete as to seed: no compile waits for it.

// Started once the view a compile waits for is built: deleting competes with seeding for the
// disk and, on ext4, for the inode allocator (it steps over inodes freed recently).
class BackgroundWork {
 public:
  BackgroundWork() = default;
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;
  // Does what was added and waits for it: deleting takes space back (a process killed before
  // leaves it to the next sweep).
  ~BackgroundWork() {
    start();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return !running_; });
    lock.unlock();
    if (thread_.joinable()) thread_.join();
  }

  void add(std::function<void()> task) {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }

  void start() {
    std::lock_guard lock(mutex_);
    if (running_ || tasks_.empty()) return;
    if (thread_.joinable()) thread_.join();  // done with its last task: it only returns
    try {
      thread_ = std::thread([this] { run(); });
      running_ = true;
    } catch (const std::system_error&) {
      // No thread to be had: what was added is left to the next sweep.
    }
  }

 private:
  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::lock_guard lock(mutex_);
        if (tasks_.empty()) {
          running_ = false;
          done_.notify_all();
          return;
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        task();
      } catch (...) {
        // What is left goes with the next sweep (remove_abandoned_work).
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable done_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
  bool running_ = false;
};

// ---------------------------------------------------------------------------------------------
// The feed: inotify watches on the real cache's root and compiler folders. Every change is
// appended to a log as (compiler, name); name "" means "compare the whole folder", compiler ""
// that events were lost.

class CacheFeed {
 public:
  explicit CacheFeed(fs::path root) : root_(std::move(root)) {}

  bool start(const sys::SafeDir& root) {
    if (!inotify_.open() || !watch("")) return false;
    for (const auto& compiler : compiler_dirs(root)) {
      if (!watch(compiler)) return false;
      // Taken after the watch: any change from here on is in the log, any before in the stamp.
      start_stamps_[compiler] = folder_stamp(root.fd(), compiler);
    }
    return true;
  }

  void drain() {
    inotify_.drain([this](const inotify_event& event) { handle(event); },
                   [this] { return broken_; });
  }

  bool broken() const { return broken_; }
  const std::vector<ModuleKey>& log() const { return log_; }
  std::string start_stamp(const std::string& compiler) const {
    auto found = start_stamps_.find(compiler);
    return found == start_stamps_.end() ? "" : found->second;
  }

 private:
  bool watch(const std::string& compiler) {
    fs::path path = compiler.empty() ? root_ : root_ / compiler;
    int wd = inotify_.watch(path, kFolderEvents);
    if (wd < 0) return false;
    folders_[wd] = compiler;
    return true;
  }

  void handle(const inotify_event& event) {
    if (event.mask & IN_Q_OVERFLOW) log_.push_back({"", ""});
    auto folder = folders_.find(event.wd);
    if (folder == folders_.end()) return;
    const std::string compiler = folder->second;
    std::string name = event.len > 0 ? std::string(event.name) : "";
    if (event.mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
      if (compiler.empty()) broken_ = true;  // the root itself went away
      log_.push_back({compiler, ""});
      // A moved folder keeps its watch elsewhere; a new one of that name is watched when made.
      if (event.mask & IN_MOVE_SELF) inotify_.unwatch(event.wd);
      if (event.mask & IN_IGNORED) folders_.erase(event.wd);
      return;
    }
    if (compiler.empty()) {
      on_root_change(name, event.mask);
    } else if (name.starts_with(layout::kModulePrefix)) {
      log_.push_back({compiler, name});
    }
  }

  void on_root_change(const std::string& name, uint32_t mask) {
    if (!layout::compiler_version_of(name)) return;
    bool appeared = (mask & (IN_CREATE | IN_MOVED_TO)) && (mask & IN_ISDIR);
    if (appeared && !watch(name)) broken_ = true;  // its changes would be missed
    log_.push_back({name, ""});
  }

  fs::path root_;
  sys::Inotify inotify_;
  std::map<int, std::string> folders_;  // watch -> compiler folder ("" for the root)
  std::map<std::string, std::string> start_stamps_;
  std::vector<ModuleKey> log_;
  bool broken_ = false;
};

// ---------------------------------------------------------------------------------------------

std::optional<std::string> module_of_link(const std::string& link_name) {
  auto owner = flat_owner(link_name);
  return owner ? std::optional<std::string>(owner->first) : std::nullopt;
}

bool is_seeded_entry(const sys::SafeDir& compiler, const std::string& name) {
  auto module = compiler.open_subdir(name);
  if (!module) return false;
  const std::string into = std::string("../../") + kLinksDir + "/";
  for (std::string_view marker :
       {layout::kNeff, layout::kDone, layout::kTracedConfig, layout::kTracedModelIndex}) {
    char buffer[PATH_MAX];
    ssize_t n = readlinkat(module->fd(), std::string(marker).c_str(), buffer, sizeof buffer);
    if (n > 0 && std::string_view(buffer, static_cast<size_t>(n)).starts_with(into)) return true;
  }
  return false;
}

std::optional<sys::SafeDir> SeedView::links(const std::string& compiler) const {
  auto links = dir_->open_subdir(kLinksDir);
  return links ? links->open_subdir(compiler) : std::nullopt;
}

std::vector<std::string> SeedView::compilers() const {
  auto names = compiler_dirs(*dir_);
  return {names.begin(), names.end()};
}

// The work of one acquire() or release(), done without the mutex (the view is ours alone).
struct SeedViews::Sync {
  std::optional<sys::SafeDir> root;
  std::vector<std::string> notes;
  SeedStats stats;
  bool everything = false;                                   // compare every compiler folder
  std::optional<std::map<std::string, std::string>> stamps;  // another process's state
  std::set<std::string> full;                                // compiler folders to compare
  std::set<ModuleKey> changes;                               // names to look at again

  // A compiler folder of the view and its .links folder (made when missing), opened once.
  struct Folders {
    sys::SafeDir staged, links;
  };
  std::map<std::string, Folders> opened;
  const Folders& folders(const SeedView& view, const std::string& compiler) {
    auto found = opened.find(compiler);
    if (found == opened.end()) {
      Folders made{view.dir().make_subdir(compiler),
                   view.dir().make_subdir(kLinksDir).make_subdir(compiler)};
      found = opened.emplace(compiler, std::move(made)).first;
    }
    return found->second;
  }
};

SeedViews::SeedViews(const fs::path& cache_root, std::vector<fs::path> trusted_link_roots,
                     SeedOptions options)
    : root_(fs::absolute(cache_root).lexically_normal()),
      trusted_(std::move(trusted_link_roots)),
      options_(options) {
  if (!root_.has_filename()) root_ = root_.parent_path();  // "/a/b/" -> "/a/b"
  sys::SafeDir root = sys::SafeDir::open_or_create(root_);
  local::check_root_is_safe(root_);
  cache_ = std::make_unique<local::LocalCache>(root_, trusted_);
  work_area_.emplace(root.make_path(kWorkDir));
  background_ = std::make_unique<BackgroundWork>();
  // Leftovers of other runs only take space: the first compile does not wait for them.
  background_->add([root = root_] { remove_abandoned_work(root); });
  if (!options_.watch_cache) return;
  feed_ = std::make_unique<CacheFeed>(root_);
  if (!feed_->start(root)) feed_.reset();
}

SeedViews::~SeedViews() = default;

SeedStats SeedViews::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

SeedView& SeedViews::acquire(std::vector<std::string>& notes) {
  SeedView* view = nullptr;
  {
    std::lock_guard lock(mutex_);
    view = &pick_view();
    view->busy_ = true;
  }
  try {
    prepare(*view, notes);
  } catch (...) {
    unlock(*view);
    throw;
  }
  return *view;
}

namespace {

// Locks the view folder `name` (made when missing). False when another run holds it.
bool lock_view_folder(const sys::SafeDir& area, const std::string& name,
                      std::optional<sys::SafeDir>& dir, sys::UniqueFd& lock) {
  sys::SafeDir made = area.make_subdir(name);
  // Close-on-exec: a compiler child holding it would keep the view locked after we die.
  sys::UniqueFd fd(fcntl(made.fd(), F_DUPFD_CLOEXEC, 0));
  if (!fd || flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false;
  // Deleted as idle by another process between make_subdir and flock: not a view any more.
  if (!sys::same_file(fd.get(), area.fd(), name.c_str())) return false;
  dir.emplace(std::move(made));
  lock = std::move(fd);
  return true;
}

}  // namespace

SeedView& SeedViews::pick_view() {
  for (auto& view : views_) {
    if (!view->busy_ && lock_view_folder(*work_area_, view->name_, view->dir_, view->lock_))
      return *view;
  }
  for (int n = 0; n < kMaxViews; ++n) {
    std::string name = std::string(kViewPrefix) + std::to_string(n);
    bool known = false;
    for (const auto& view : views_) known = known || view->name_ == name;
    if (known) continue;
    auto view = std::make_unique<SeedView>();
    view->name_ = name;
    if (!lock_view_folder(*work_area_, name, view->dir_, view->lock_)) continue;
    views_.push_back(std::move(view));
    return *views_.back();
  }
  throw operational_error("all " + std::to_string(kMaxViews) + " seeded views in " +
                          work_area_->path().string() + " are in use");
}

void SeedViews::prepare(SeedView& view, std::vector<std::string>& notes) {
  Sync sync;
  sync.root.emplace(sys::SafeDir::open(root_));
  std::optional<ViewState> state = read_state(view.dir(), trust_line(trusted_));
  bool ours = state && !view.token_.empty() && state->token == view.token_;
  // Written back by release(): a view whose run was killed is rebuilt by its next user.
  view.dir().remove_file(kStateFile);
  if (!state) {
    wipe(view, sync);
  } else if (!ours) {
    view.pending_ = state->pending;
    view.applied_ = 0;  // the whole log since the feed started, if the stamps match its start
    sync.stamps = state->stamps;
  }
  bring_up_to_date(view, sync);
  notes.insert(notes.end(), sync.notes.begin(), sync.notes.end());
  {
    std::lock_guard lock(mutex_);
    stats_ += sync.stats;
  }
  background_->start();
}

void SeedViews::release(SeedView& view, const std::set<ModuleKey>& touched, bool trusted) {
  try {
    if (trusted) {
      Sync sync;
      sync.root.emplace(sys::SafeDir::open(root_));
      clean_after_run(view, touched, sync);
      bring_up_to_date(view, sync);
      record_state(view, sync);
      std::lock_guard lock(mutex_);
      stats_ += sync.stats;
    }
  } catch (const std::exception&) {
    // The state file stays missing: the next user rebuilds the view.
  }
  unlock(view);
}

void SeedViews::unlock(SeedView& view) {
  std::lock_guard lock(mutex_);
  view.lock_ = sys::UniqueFd();
  view.dir_.reset();
  view.busy_ = false;
}

SeedStats& operator+=(SeedStats& into, const SeedStats& more) {
  into.views_built += more.views_built;
  into.full_listings += more.full_listings;
  into.names_listed += more.names_listed;
  into.entries_checked += more.entries_checked;
  into.entries_seeded += more.entries_seeded;
  into.entries_unseeded += more.entries_unseeded;
  into.links_made += more.links_made;
  return into;
}

void SeedViews::bring_up_to_date(SeedView& view, Sync& sync) {
  take_changes(view, sync);
  plan_listings(view, sync);
  for (const auto& compiler : sync.full) full_listing(view, compiler, sync);
  for (const auto& key : sync.changes) {
    if (!sync.full.count(key.first)) recheck(view, key, sync);
  }
  recheck_pending(view, sync);
}

// What the feed saw since the view was last brought up to date in this process.
void SeedViews::take_changes(SeedView& view, Sync& sync) {
  std::lock_guard lock(mutex_);
  if (!feed_ || feed_->broken()) {
    sync.everything = true;
    return;
  }
  feed_->drain();
  const auto& log = feed_->log();
  for (size_t i = view.applied_; i < log.size(); ++i) {
    const auto& [compiler, name] = log[i];
    if (compiler.empty()) sync.everything = true;
    if (!compiler.empty() && name.empty()) sync.full.insert(compiler);
    if (!name.empty()) sync.changes.insert(log[i]);
  }
  view.applied_ = log.size();
  if (feed_->broken()) sync.everything = true;
}

// Which compiler folders must be compared name by name: all of them without a feed or after
// lost events; with another process's state, those whose stamp moved since it was written.
void SeedViews::plan_listings(SeedView& view, Sync& sync) {
  std::set<std::string> all = compiler_dirs(*sync.root);
  for (const auto& compiler : view.compilers()) all.insert(compiler);
  for (const auto& compiler : all) {
    if (sync.everything) {
      sync.full.insert(compiler);  // also what happens without a feed
    } else if (sync.stamps) {
      plan_from_stamp(compiler, sync);
    }
  }
}

// Equal to the folder's stamp now: the view matches it, nothing to do (the changes taken from
// the log, the folder's creation included, happened before). Equal to its stamp when our feed
// started: the log has every change since. Otherwise, compare names.
void SeedViews::plan_from_stamp(const std::string& compiler, Sync& sync) {
  auto found = sync.stamps->find(compiler);
  std::string recorded = found == sync.stamps->end() ? "" : found->second;
  if (!recorded.empty() && recorded == folder_stamp(sync.root->fd(), compiler)) {
    sync.full.erase(compiler);
    std::erase_if(sync.changes, [&](const ModuleKey& key) { return key.first == compiler; });
  } else if (recorded.empty() || recorded != feed_->start_stamp(compiler)) {
    sync.full.insert(compiler);
  }
}

// Compares the view's entries of `compiler` with the real ones by name and by the inode of the
// real folder they were seeded from (in their hard links' names): one readdir of each folder.
void SeedViews::full_listing(SeedView& view, const std::string& compiler, Sync& sync) {
  ++sync.stats.full_listings;
  std::optional<sys::SafeDir> real = sync.root->open_subdir(compiler);
  if (!real) {
    drop_compiler(view, compiler, sync);
    return;
  }
  const Sync::Folders& folders = sync.folders(view, compiler);
  Comparison compared = compare(&*real, folders.staged, folders.links);
  sync.stats.names_listed += compared.names_listed;
  for (const auto& flat : compared.orphans) unlinkat(folders.links.fd(), flat.c_str(), 0);
  view.pending_.erase(compiler);
  for (const auto& name : compared.stale) {
    unseed(view, {compiler, name}, sync);
    if (compared.real_inodes.count(name)) consider(view, {compiler, name}, *real, sync);
  }
  for (const auto& [name, inode] : compared.real_inodes) {
    if (!compared.seeded.count(name)) consider(view, {compiler, name}, *real, sync);
  }
}

// A name the feed or the run reported: whatever the view had under it goes, then the real
// entry is looked at again (it may have been replaced).
void SeedViews::recheck(SeedView& view, const ModuleKey& key, Sync& sync) {
  unseed(view, key, sync);
  std::optional<sys::SafeDir> real = sync.root->open_subdir(key.first);
  if (real && key.second.starts_with(layout::kModulePrefix)) {
    consider(view, key, *real, sync);
  } else if (view.pending_.count(key.first)) {
    view.pending_[key.first].erase(key.second);
  }
}

// Entries that were incomplete, looked at again when their folder changed (model.done added).
void SeedViews::recheck_pending(SeedView& view, Sync& sync) {
  auto pending = view.pending_;
  for (const auto& [compiler, names] : pending) {
    if (sync.full.count(compiler)) continue;  // just compared
    std::optional<sys::SafeDir> real = sync.root->open_subdir(compiler);
    for (const auto& [name, stamp] : names) {
      if (!real) {
        view.pending_[compiler].erase(name);
      } else if (folder_stamp(real->fd(), name) != stamp) {
        consider(view, {compiler, name}, *real, sync);
      }
    }
  }
}

// Seeds the real entry `key` (not in the view) when it is complete; otherwise it is pending.
void SeedViews::consider(SeedView& view, const ModuleKey& key, const sys::SafeDir& real_compiler,
                         Sync& sync) {
  const auto& [compiler, name] = key;
  ++sync.stats.entries_checked;
  try {
    std::optional<sys::SafeDir> real =
        plain_name(name) ? real_compiler.open_subdir(name) : std::nullopt;
    struct stat info {};
    if (!real || fstat(real->fd(), &info) != 0) {
      if (view.pending_.count(compiler)) view.pending_[compiler].erase(name);
      return;
    }
    // Taken before the folder is read: a change after it (model.done written) moves it.
    view.pending_[compiler][name] = stamp_of(info);  // until it is seeded
    if (seed(view, key, real_compiler, *real, info.st_ino, sync)) {
      view.pending_[compiler].erase(name);
    }
  } catch (const Error& error) {
    sync.notes.push_back(compiler + "/" + name + ": " + error.what());
    unseed(view, key, sync);
  }
}

// Seeds the real entry `real` when it is complete. Its files are hard-linked by name when they
// are all regular files at its top (a NEFF entry as libneuronxla writes it: the one listing
// that tells it complete is all it costs to read); anything else (a traced export, Hub-cache
// links) goes through LocalCache's inspection, which knows which links it trusts.
bool SeedViews::seed(SeedView& view, const ModuleKey& key, const sys::SafeDir& real_compiler,
                     const sys::SafeDir& real, uint64_t inode, Sync& sync) {
  const auto& [compiler, name] = key;
  auto files = layout::is_traced_module_name(name) ? std::nullopt : plain_files(real);
  if (files && !layout::is_complete(layout::classify_listed(name, *files))) return false;
  if (!files) {
    local::ModuleEntry entry = cache_->inspect_module(real_compiler, name);
    if (!layout::is_complete(entry.state)) return false;  // SUCCESS, or a whole traced export
    if (!entry.untrusted_links.empty()) {
      throw operational_error("has symlinks to untrusted places");
    }
  }
  if (name.size() > kMaxSeededName) throw operational_error("its name is too long to seed");
  const Sync::Folders& folders = sync.folders(view, compiler);
  LinkJob job{*cache_, folders.links, compiler, name + "." + std::to_string(inode) + "."};
  sys::SafeDir staged = make_seeded_folder(folders.staged, name);
  if (files) {
    link_neff_entry(real, staged, *files, job);
  } else {
    link_tree(real, staged, job, "../../", 0);
  }
  ++sync.stats.entries_seeded;
  sync.stats.links_made += job.made;
  return true;
}

void SeedViews::unseed(SeedView& view, const ModuleKey& key, Sync& sync) {
  const auto& [compiler, name] = key;
  auto staged = view.dir().open_subdir(compiler);
  if (!staged) return;
  std::optional<sys::SafeDir> links = view.links(compiler);
  if (hide_then_remove(*staged, name, links)) ++sync.stats.entries_unseeded;
}

void SeedViews::drop_compiler(SeedView& view, const std::string& compiler, Sync& sync) {
  sync.opened.erase(compiler);
  view.dir().remove_tree(compiler);
  if (auto links = view.dir().open_subdir(kLinksDir)) links->remove_tree(compiler);
  view.pending_.erase(compiler);
}

void SeedViews::wipe(SeedView& view, Sync& sync) {
  sync.opened.clear();
  throw_away(view.dir());
  view.pending_.clear();
  sync.everything = true;
  ++sync.stats.views_built;
}

// Moves what `dir` holds into a folder of the work area deleted in the background, locked until
// it is gone: no sweep takes it meanwhile, and one left by a killed process is a sweep's.
void SeedViews::throw_away(const sys::SafeDir& dir) {
  std::vector<sys::DirEntry> items = dir.list();
  if (items.empty()) return;
  auto trash = std::make_shared<sys::LockedDir>(
      work_area_->make_locked_subdir([] { return "trash-" + sys::random_hex(8); }));
  for (const auto& item : items) dir.move_to(item.name, trash->dir, item.name, false);
  background_->add([this, trash] { work_area_->remove_tree(trash->name); });
}

// Removes what the run left: its own files at the top and in the registry, and every name it
// touched (seeded again by bring_up_to_date when the real cache has it).
void SeedViews::clean_after_run(SeedView& view, const std::set<ModuleKey>& touched, Sync& sync) {
  for (const auto& item : view.dir().list()) {
    if (item.name != kLinksDir && !is_compiler_dir(item)) view.dir().remove_tree(item.name);
  }
  for (const auto& compiler : view.compilers()) {
    if (auto staged = view.dir().open_subdir(compiler)) staged->remove_tree(layout::kRegistryDir);
  }
  for (const auto& key : touched) {
    if (key.second.empty()) {
      drop_compiler(view, key.first, sync);  // made by the run: everything in it is its own work
      sync.full.insert(key.first);
    } else {
      sync.changes.insert(key);
    }
  }
}

void SeedViews::record_state(SeedView& view, Sync& sync) {
  ViewState state;
  state.token = sys::random_hex(16);
  state.pending = view.pending_;
  for (const auto& compiler : compiler_dirs(*sync.root)) {
    std::string stamp = settled_stamp(view, *sync.root, compiler);
    if (!stamp.empty()) state.stamps[compiler] = stamp;
  }
  write_state(view.dir(), state, trust_line(trusted_));
  view.token_ = state.token;
}

// A stamp the next process may trust instead of comparing names: the folder has not changed
// since the view was brought up to date, and its next change must show. Right after a change
// (our own adopt, typically) the clock has not moved on yet: waiting for its next tick is
// cheaper than a comparison of every name by the next process.
std::string SeedViews::settled_stamp(const SeedView& view, const sys::SafeDir& root,
                                     const std::string& compiler) {
  for (int attempt = 0; attempt < kStampAttempts; ++attempt) {
    bool is_settled = false;
    std::string stamp = folder_stamp(root.fd(), compiler, &is_settled);
    if (stamp.empty() || !unchanged_since_applied(view, compiler)) return "";
    if (is_settled) return stamp;
    std::this_thread::sleep_for(kStampWait);
  }
  return "";
}

bool SeedViews::unchanged_since_applied(const SeedView& view, const std::string& compiler) {
  std::lock_guard lock(mutex_);
  if (!feed_ || feed_->broken()) return false;
  feed_->drain();
  const auto& log = feed_->log();
  for (size_t i = view.applied_; i < log.size(); ++i) {
    if (log[i].first.empty() || log[i].first == compiler) return false;
  }
  return !feed_->broken();
}

// ---------------------------------------------------------------------------------------------
// What cleanup does to the views.

namespace {

// A file hard-linked by views for entries the real cache no longer has: its space comes back
// once every name it has is one of those links.
struct PinnedFile {
  uint64_t size = 0;
  nlink_t names = 0;
  size_t idle = 0;          // links in idle views (removed)
  size_t busy = 0;          // links in views a run holds (left)
  bool by_cleanup = false;  // of an entry this cleanup removed: its bytes are counted there
};
using Pinned = std::map<std::pair<dev_t, ino_t>, PinnedFile>;

struct Pruning {
  std::set<std::string> gone_compilers;  // removed by this cleanup
  std::set<ModuleKey> gone_entries;
  bool dry_run = false;
  Pinned pinned;
};

void note_pinned(const sys::SafeDir& dir, const std::vector<std::string>& names, bool busy,
                 bool by_cleanup, Pinned& pinned) {
  for (const auto& name : names) {
    struct stat info {};
    if (fstatat(dir.fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(info.st_mode)) {
      continue;
    }
    PinnedFile& file = pinned[{info.st_dev, info.st_ino}];
    file.size = static_cast<uint64_t>(info.st_size);
    file.names = info.st_nlink;
    file.by_cleanup = file.by_cleanup || by_cleanup;
    ++(busy ? file.busy : file.idle);
  }
}

// One compiler folder of a view: notes the seeded entries the real cache lacks, holds replaced
// or, in a dry run, is about to lose (every one when `all`), and unseeds them unless the view is
// busy or the run dry. Returns how many.
size_t prune_compiler(const sys::SafeDir& root, const sys::SafeDir& view,
                      const std::string& compiler, bool all, bool busy, Pruning& run) {
  auto staged = view.open_subdir(compiler);
  auto links_parent = view.open_subdir(kLinksDir);
  auto links = links_parent ? links_parent->open_subdir(compiler) : std::nullopt;
  if (!staged || !links) return 0;
  bool compiler_gone = run.gone_compilers.count(compiler) > 0;
  auto real = all || compiler_gone ? std::nullopt : root.open_subdir(compiler);
  Comparison compared = compare(real ? &*real : nullptr, *staged, *links);
  for (const auto& name : compared.seeded) {
    if (run.gone_entries.count({compiler, name})) compared.stale.insert(name);
  }
  for (const auto& name : compared.stale) {
    bool by_cleanup = compiler_gone || run.gone_entries.count({compiler, name}) > 0;
    note_pinned(*links, compared.flats[name], busy, by_cleanup, run.pinned);
    // A NEFF entry's other files are hard-linked in its folder itself.
    if (auto entry = staged->open_subdir(name)) {
      std::vector<std::string> files;
      for_each_name(*entry, [&](std::string file, unsigned char type, uint64_t) {
        if (type == DT_REG) files.push_back(std::move(file));
      });
      note_pinned(*entry, files, busy, by_cleanup, run.pinned);
    }
  }
  note_pinned(*links, compared.orphans, busy, false, run.pinned);
  if (busy || run.dry_run) return compared.stale.size();
  for (const auto& flat : compared.orphans) unlinkat(links->fd(), flat.c_str(), 0);
  for (const auto& name : compared.stale) hide_then_remove(*staged, name, links);
  return compared.stale.size();
}

}  // namespace

ViewsPruned prune_views(const fs::path& cache_root, const std::vector<std::string>& removed,
                        bool dry_run) {
  ViewsPruned result;
  std::error_code error;
  if (!fs::is_directory(cache_root, error)) return result;
  try {
    if (!dry_run) remove_abandoned_work(cache_root);
  } catch (const Error&) {
    // Leftovers of other runs: what is pruned below does not depend on them.
  }
  sys::SafeDir root = sys::SafeDir::open(cache_root);
  auto area = root.open_path(kWorkDir);
  if (!area) return result;
  Pruning run;
  run.dry_run = dry_run;
  for (const auto& path : removed) {
    auto parts = layout::split_path(path);
    if (parts.size() == 1) run.gone_compilers.insert(parts[0]);
    if (parts.size() == 2) run.gone_entries.insert({parts[0], parts[1]});
  }
  for (const auto& item : area->list()) {
    if (!item.name.starts_with(kViewPrefix)) continue;
    auto view = area->open_subdir(item.name);
    if (!view) continue;
    // Held while it is pruned, like a run holds it; a view a run holds is only looked at.
    sys::UniqueFd lock(fcntl(view->fd(), F_DUPFD_CLOEXEC, 0));
    bool busy = !lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0;
    // No state file: a view its next user rebuilds, whose every link is useless meanwhile.
    bool useless = !busy && !view->entry(kViewStateFile);
    if (busy) ++result.views_in_use;
    for (const auto& compiler : compiler_dirs(*view)) {
      size_t stale = prune_compiler(root, *view, compiler, useless, busy, run);
      if (!busy) result.entries_unseeded += stale;
    }
  }
  for (const auto& [inode, file] : run.pinned) {
    // In a dry run the real cache still has its name for the entries cleanup would remove.
    size_t real = dry_run && file.by_cleanup ? 1 : 0;
    if (!file.by_cleanup && file.idle >= file.names) result.bytes_freed += file.size;
    if (file.busy > 0 && file.idle + file.busy + real >= file.names) result.bytes_held += file.size;
  }
  return result;
}

}  // namespace neuron_cache::compile
