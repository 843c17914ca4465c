#include "compile/capture.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "error.h"
#include "format/layout.h"
#include "store/cache_tree.h"
#include "store/entry_install.h"

namespace neuron_cache::compile {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kWorkDir = ".cache/huggingface/neuron-cache-work";
constexpr int kMaxDepth = 8;  // registry generations go 6 levels deep, entries 1 or 2

std::string random_hex(int digits) {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < digits; ++i) text += kHex[generator() % 16];
  return text;
}

// The label names a folder: keep it readable but plain.
std::string folder_label(const std::string& label) {
  std::string plain;
  for (char c : label.substr(0, 48)) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    plain += ok ? c : '-';
  }
  if (plain.empty() || plain[0] == '.') plain.insert(0, "run");
  return plain;
}

std::optional<fs::path> real_path(const fs::path& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return fs::path(buffer);
}

// `path` below `base` as a relative path without "..", or nothing.
std::optional<fs::path> inside(const fs::path& path, const fs::path& base) {
  fs::path rel = path.lexically_normal().lexically_relative(base.lexically_normal());
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = std::min(path.find('/', start), path.size());
    parts.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// Opens the folders of `parts` (all but the last) below `dir` without following symlinks.
std::optional<SafeDir> open_parent(const SafeDir& dir, const std::vector<std::string>& parts) {
  std::optional<SafeDir> current = dir.open_subdir(parts.front());
  for (size_t i = 1; current && i + 1 < parts.size(); ++i) current = current->open_subdir(parts[i]);
  return current;
}

// Hard-links the inode behind `fd` (already checked to be a regular file) as `name` in `dir`.
bool link_fd(int fd, const SafeDir& dir, const std::string& name) {
  std::string fd_path = "/proc/self/fd/" + std::to_string(fd);
  return linkat(AT_FDCWD, fd_path.c_str(), dir.fd(), name.c_str(), AT_SYMLINK_FOLLOW) == 0;
}

// A file of a real entry, for seeding: a regular file, or a symlink LocalCache trusts.
UniqueFd open_seed_source(const LocalCache& cache, const SafeDir& dir, const DirEntry& item) {
  if (item.type == NodeType::File) return dir.open_read(item.name);
  auto target =
      cache.link_is_trusted(dir, item.name) ? real_path(dir.path() / item.name) : std::nullopt;
  if (!target) {
    throw operational_error((dir.path() / item.name).string() +
                            " is a symlink to an untrusted place");
  }
  int fd = ::open(target->c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw operational_error("cannot open " + target->string() + ": " + std::strerror(errno));
  UniqueFd guard(fd);
  require_regular_file(fd, *target);
  return guard;
}

bool is_success(const SafeDir& module) {
  auto neff = module.entry(layout::kNeff);
  auto done = module.entry(layout::kDone);
  return neff && done && neff->type == NodeType::File && done->type == NodeType::File;
}

bool is_compiler_dir(const DirEntry& item) {
  return item.type == NodeType::Directory && layout::compiler_version_of(item.name).has_value();
}

}  // namespace

// Watches the seeded entries of one staging cache with inotify. A directory watch reports opens
// by the path used, so opens of the same inodes through the real cache or through another run's
// staging cache never show up here. The first event of an entry is enough: its watch is then
// dropped, which keeps the event queue short during long compiles.
class UsageWatcher {
 public:
  using Key = std::pair<std::string, std::string>;
  ~UsageWatcher() { stop(); }

  // False when inotify cannot watch every folder (no instance left, watch limit reached).
  bool start(const std::vector<std::pair<fs::path, Key>>& dirs) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return false;
    inotify_ = UniqueFd(fd);
    for (const auto& [path, key] : dirs) {
      int wd =
          inotify_add_watch(fd, path.c_str(), IN_OPEN | IN_ACCESS | IN_ONLYDIR | IN_DONT_FOLLOW);
      if (wd < 0) return false;
      watches_[wd] = key;
      all_.insert(key);
    }
    int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake < 0) return false;
    wake_ = UniqueFd(wake);
    thread_ = std::thread([this] { run(); });
    return true;
  }

  // Ends the watch; the entries used (all of them when events were lost: over-reporting is safe).
  std::set<Key> stop() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      if (write(wake_.get(), &one, sizeof one) < 0) overflow_ = true;
      thread_.join();
    }
    inotify_ = UniqueFd();
    return overflow_ ? all_ : used_;
  }

 private:
  void run() {
    while (true) {
      pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      int ready = poll(fds, 2, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) {
        overflow_ = true;
        return;
      }
      drain();  // on a stop request too: the command has exited, its events are all queued
      if (fds[1].revents & POLLIN) return;
    }
  }

  void drain() {
    alignas(inotify_event) char buffer[64 << 10];
    while (true) {
      ssize_t n = read(inotify_.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      for (char* p = buffer; p < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        note(*event);
        p += sizeof(inotify_event) + event->len;
      }
    }
  }

  void note(const inotify_event& event) {
    if (event.mask & IN_Q_OVERFLOW) overflow_ = true;
    auto watch = watches_.find(event.wd);
    // Events without a name are about the watched folder itself (listing it is not a use).
    if (watch == watches_.end() || event.len == 0 || (event.mask & IN_ISDIR)) return;
    used_.insert(watch->second);
    inotify_rm_watch(inotify_.get(), event.wd);
    watches_.erase(watch);
  }

  UniqueFd inotify_;
  UniqueFd wake_;
  std::map<int, Key> watches_;
  std::set<Key> all_;
  std::set<Key> used_;
  bool overflow_ = false;
  std::thread thread_;
};

CaptureCache::CaptureCache(const fs::path& cache_root, const std::string& label,
                           std::vector<fs::path> trusted_link_roots)
    : root_(fs::absolute(cache_root).lexically_normal()), trusted_(std::move(trusted_link_roots)) {
  if (!root_.has_filename()) root_ = root_.parent_path();  // "/a/b/" -> "/a/b"
  SafeDir root = SafeDir::open_or_create(root_);
  check_root_is_safe(root_);
  try {
    remove_abandoned_work(root_);
  } catch (const Error&) {
    // Leftovers of other runs only take space; they must not stop this one.
  }
  work_area_.emplace(root.make_path(kWorkDir));
  const std::string prefix = folder_label(label) + "-";
  for (int attempt = 0; !work_; ++attempt) {
    std::string name = prefix + random_hex(8);
    if (work_area_->entry(name)) continue;
    SafeDir dir = work_area_->make_subdir(name);
    // Close-on-exec: a compiler child holding it would keep our folder "alive" after we die.
    UniqueFd lock(fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0));
    // remove_abandoned_work may take the new, still unlocked folder for an abandoned one and
    // delete it between mkdir and flock: only a locked folder still in place is ours.
    if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) == 0 &&
        same_file(lock.get(), work_area_->fd(), name.c_str())) {
      work_name_ = name;
      work_lock_ = std::move(lock);
      work_.emplace(std::move(dir));
    } else if (attempt >= 3) {
      throw operational_error("cannot create a staging cache in " + work_area_->path().string() +
                              ": it keeps disappearing");
    }
  }
}

CaptureCache::~CaptureCache() {
  try {
    watcher_.reset();
    if (work_area_ && !work_name_.empty()) work_area_->remove_tree(work_name_);
  } catch (...) {
    // Best effort: the next CaptureCache removes it once our flock is gone.
  }
}

const fs::path& CaptureCache::dir() const {
  return work_->path();
}

void CaptureCache::seed() {
  if (seeded_) return;
  seeded_ = true;
  SafeDir root = SafeDir::open(root_);
  LocalCache cache(root_, trusted_);
  for (const auto& item : root.list()) {
    if (!is_compiler_dir(item)) continue;  // a symlinked compiler folder is never followed
    if (auto real_dir = root.open_subdir(item.name)) seed_compiler_dir(cache, *real_dir);
  }
  watch_seeded();
}

void CaptureCache::seed_compiler_dir(const LocalCache& cache, const SafeDir& real_dir) {
  const std::string name = real_dir.path().filename().string();
  SafeDir stage_dir = work_->make_subdir(name);
  for (const auto& child : real_dir.list()) {
    if (child.type != NodeType::Directory) continue;  // nor a symlinked MODULE_ folder
    if (child.name.starts_with(layout::kModulePrefix)) {
      seed_module(cache, real_dir, stage_dir, child.name);
    } else if (child.name == layout::kRegistryDir) {
      if (auto registry = real_dir.open_subdir(child.name)) {
        seed_registry(*registry, stage_dir.make_subdir(child.name), name + "/" + child.name, 0);
      }
    }
  }
}

namespace {

void link_tree(const LocalCache& cache, const SafeDir& real, const SafeDir& stage, int depth) {
  for (const auto& item : real.list()) {
    if (layout::is_lock_file(item.name)) continue;
    if (item.type == NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = real.open_subdir(item.name)) {
        link_tree(cache, *sub, stage.make_subdir(item.name), depth + 1);
      }
    } else if (item.type == NodeType::File || item.type == NodeType::Symlink) {
      UniqueFd fd = open_seed_source(cache, real, item);
      if (!link_fd(fd.get(), stage, item.name)) {
        throw operational_error("cannot hard-link " + (real.path() / item.name).string() + ": " +
                                std::strerror(errno));
      }
    }
  }
}

}  // namespace

void CaptureCache::seed_module(const LocalCache& cache, const SafeDir& real_dir,
                               const SafeDir& stage_dir, const std::string& name) {
  const std::string compiler = real_dir.path().filename().string();
  try {
    ModuleEntry entry = cache.inspect_module(real_dir, name);
    if (entry.state != layout::EntryState::Success) return;
    if (!entry.untrusted_links.empty()) {
      not_seeded_.push_back(compiler + "/" + name + ": has symlinks to untrusted places");
      return;
    }
    auto real_module = real_dir.open_subdir(name);
    if (!real_module) return;
    link_tree(cache, *real_module, stage_dir.make_subdir(name), 0);
  } catch (const Error& error) {
    not_seeded_.push_back(compiler + "/" + name + ": " + error.what());
    try {
      stage_dir.remove_tree(name);
    } catch (const Error&) {
      // Left in the staging cache, it would read as produced: collect() must not see it.
      seeded_modules_.insert({compiler, name});
    }
    return;
  }
  seeded_modules_.insert({compiler, name});
}

void CaptureCache::seed_registry(const SafeDir& real, const SafeDir& stage, const std::string& rel,
                                 int depth) {
  for (const auto& item : real.list()) {
    const std::string item_rel = rel + "/" + item.name;
    try {
      if (item.type == NodeType::Directory && depth < kMaxDepth) {
        if (auto sub = real.open_subdir(item.name)) {
          seed_registry(*sub, stage.make_subdir(item.name), item_rel, depth + 1);
        }
      } else if (item.type == NodeType::File) {
        UniqueFd fd = real.open_read(item.name);
        if (!link_fd(fd.get(), stage, item.name)) {
          stage.write_new_file(item.name, real.read_small_file(item.name));
        }
        seeded_registry_.insert(item_rel);
      } else if (item.type == NodeType::Symlink) {
        // An alias: recreated pointing at the staging copy of its target, when that is in the root.
        auto target = real_path(real.path() / item.name);
        auto root = real_path(root_);
        auto rel_target = target && root ? inside(*target, *root) : std::nullopt;
        if (!rel_target) continue;
        fs::path staged_target = work_->path() / *rel_target;
        if (symlinkat(staged_target.c_str(), stage.fd(), item.name.c_str()) == 0) {
          seeded_registry_.insert(item_rel);
        }
      }
    } catch (const Error&) {
      // An unreadable registry file is not seeded: the command may write it again, and adopt()
      // never replaces the real one.
    }
  }
}

void CaptureCache::watch_seeded() {
  if (seeded_modules_.empty()) return;
  std::vector<std::pair<fs::path, Key>> dirs;
  for (const auto& key : seeded_modules_) {
    dirs.emplace_back(work_->path() / key.first / key.second, key);
  }
  auto watcher = std::make_unique<UsageWatcher>();
  if (watcher->start(dirs)) {
    watcher_ = std::move(watcher);
    return;
  }
  watcher.reset();
  // Without a watch, a reused entry could not be told from an unused one: the command compiles
  // everything itself instead, which is slower but exact.
  unseed_all();
  usage_tracked_ = false;
  not_seeded_.push_back(
      "every entry: inotify cannot watch them (see fs.inotify.max_user_watches and "
      "max_user_instances); the command compiles everything it needs");
}

void CaptureCache::unseed_all() {
  for (auto it = seeded_modules_.begin(); it != seeded_modules_.end();) {
    auto compiler = work_->open_subdir(it->first);
    if (compiler) compiler->remove_tree(it->second);
    it = seeded_modules_.erase(it);
  }
}

CaptureResult CaptureCache::collect() {
  CaptureResult result;
  result.usage_tracked = usage_tracked_;
  std::set<Key> used = watcher_ ? watcher_->stop() : std::set<Key>{};
  watcher_.reset();
  for (const auto& item : work_->list()) {
    if (!is_compiler_dir(item)) continue;
    if (auto dir = work_->open_subdir(item.name)) scan_compiler_dir(*dir, used, result);
  }
  std::sort(result.produced.begin(), result.produced.end());
  std::sort(result.used.begin(), result.used.end());
  std::sort(result.failed.begin(), result.failed.end());
  std::sort(result.registry_files.begin(), result.registry_files.end());
  return result;
}

void CaptureCache::scan_compiler_dir(const SafeDir& dir, const std::set<Key>& used,
                                     CaptureResult& result) {
  const std::string compiler = dir.path().filename().string();
  for (const auto& child : dir.list()) {
    if (child.type != NodeType::Directory) continue;
    if (child.name == layout::kRegistryDir) {
      if (auto registry = dir.open_subdir(child.name)) {
        scan_registry(*registry, compiler + "/" + child.name, 0, result);
      }
      continue;
    }
    if (!child.name.starts_with(layout::kModulePrefix)) continue;
    Key key{compiler, child.name};
    if (seeded_modules_.count(key)) {
      if (used.count(key)) result.used.push_back({compiler, child.name});
      continue;
    }
    auto module = dir.open_subdir(child.name);
    if (!module) continue;
    (is_success(*module) ? result.produced : result.failed).push_back({compiler, child.name});
  }
}

void CaptureCache::scan_registry(const SafeDir& dir, const std::string& rel, int depth,
                                 CaptureResult& result) const {
  for (const auto& item : dir.list()) {
    const std::string item_rel = rel + "/" + item.name;
    if (item.type == NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = dir.open_subdir(item.name)) scan_registry(*sub, item_rel, depth + 1, result);
    } else if ((item.type == NodeType::File || item.type == NodeType::Symlink) &&
               !seeded_registry_.count(item_rel)) {
      result.registry_files.push_back(item_rel);
    }
  }
}

size_t CaptureCache::adopt(const CaptureResult& result) {
  size_t installed = 0;
  for (const auto& module : result.produced) adopt_module(module, installed);
  // Primary files first, so that the aliases made next point at files that exist.
  for (const auto& rel : result.registry_files) adopt_registry_file(rel, false);
  for (const auto& rel : result.registry_files) adopt_registry_file(rel, true);
  return installed;
}

namespace {

void stage_files(EntryInstall& install, const SafeDir& dir, const std::string& prefix, int depth) {
  for (const auto& item : dir.list()) {
    // The compiler's lock file must not travel: EntryInstall holds the real entry's own.
    if (item.type == NodeType::File && !layout::is_lock_file(item.name)) {
      install.link_file(prefix + item.name, dir.path() / item.name);
    } else if (item.type == NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = dir.open_subdir(item.name)) {
        stage_files(install, *sub, prefix + item.name + "/", depth + 1);
      }
    }
  }
}

// Whether the '/'-path `rel` names a regular file below `root`, through no symlink.
bool is_real_file(const SafeDir& root, const std::string& rel) {
  auto parts = split_path(rel);
  if (parts.size() < 2) return false;
  auto parent = open_parent(root, parts);
  auto node = parent ? parent->entry(parts.back()) : std::nullopt;
  return node && node->type == NodeType::File;
}

}  // namespace

void CaptureCache::adopt_module(const CapturedModule& module, size_t& installed) {
  auto compiler = work_->open_subdir(module.compiler_dir);
  auto staged = compiler ? compiler->open_subdir(module.name) : std::nullopt;
  if (!staged) {
    throw operational_error("the compiled entry " + module.compiler_dir + "/" + module.name +
                            " is missing from the staging cache " + dir().string() +
                            ": was it deleted while the command ran?");
  }
  EntryInstall install(root_, module.compiler_dir, module.name);
  stage_files(install, *staged, "", 0);
  if (install.commit() == InstallOutcome::Installed) ++installed;
}

void CaptureCache::adopt_registry_file(const std::string& rel_path, bool links) {
  auto parts = split_path(rel_path);
  if (parts.size() < 3) return;
  auto stage = open_parent(*work_, parts);
  const std::string& name = parts.back();
  auto node = stage ? stage->entry(name) : std::nullopt;
  if (!node || (node->type == NodeType::Symlink) != links) return;
  if (!links && node->type != NodeType::File) return;
  std::optional<fs::path> target;
  if (links && !(target = real_link_target(*stage, name))) return;  // points outside the cache
  SafeDir root = SafeDir::open(root_);
  SafeDir real = root.make_path(rel_path.substr(0, rel_path.size() - name.size() - 1));
  if (real.entry(name)) return;  // the real cache's copy is never replaced
  if (links) {
    if (symlinkat(target->c_str(), real.fd(), name.c_str()) != 0 && errno != EEXIST) {
      throw operational_error("cannot create the registry alias " + (real.path() / name).string() +
                              ": " + std::strerror(errno));
    }
    return;
  }
  // Written complete in the work folder (same filesystem), then renamed: never seen half-written.
  const std::string temp = "registry-" + random_hex(12);
  work_->write_new_file(temp, stage->read_small_file(name));
  if (!work_->move_to(temp, real, name, true)) work_->remove_file(temp);
}

// The real-cache path of what the staged alias `name` points at: an absolute path, as
// optimum-neuron makes aliases. Nothing unless it points at a regular file of the staging cache
// whose real counterpart exists.
std::optional<fs::path> CaptureCache::real_link_target(const SafeDir& stage_dir,
                                                       const std::string& name) const {
  char buffer[PATH_MAX];
  ssize_t n = readlinkat(stage_dir.fd(), name.c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  fs::path target(std::string(buffer, static_cast<size_t>(n)));
  if (target.is_relative()) target = stage_dir.path() / target;
  auto rel = inside(target, work_->path());
  if (!rel) {
    auto work_real = real_path(work_->path());
    auto target_real = real_path(target);
    if (work_real && target_real) rel = inside(*target_real, *work_real);
  }
  if (!rel || !is_real_file(SafeDir::open(root_), rel->generic_string())) return std::nullopt;
  return root_ / *rel;
}

size_t remove_abandoned_work(const fs::path& cache_root) {
  std::error_code error;
  if (!fs::is_directory(cache_root, error)) return 0;
  SafeDir root = SafeDir::open(cache_root);
  std::optional<SafeDir> area = open_parent(root, split_path(std::string(kWorkDir) + "/x"));
  if (!area) return 0;
  size_t removed = 0;
  for (const auto& item : area->list()) {
    // Held until the folder is gone: a constructor that made it a moment ago and has not locked
    // it yet must not lock it between our check and the removal, and then believe it owns it.
    std::optional<SafeDir> dir;
    if (item.type == NodeType::Directory) {
      dir = area->open_subdir(item.name);
      if (dir && flock(dir->fd(), LOCK_EX | LOCK_NB) != 0) continue;  // its owner is alive
    }
    area->remove_tree(item.name);
    ++removed;
  }
  return removed;
}

}  // namespace neuron_cache::compile
