#include "neuron_cache/compile/capture.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::compile {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxDepth = 8;  // registry generations go 6 levels deep, entries 1 or 2
// A view unused this long is deleted: it holds hard links to entries that may since have been
// deleted from the cache, and their space comes back only with the view.
constexpr double kIdleViewSeconds = 7 * 24 * 3600;

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

// `path` below `base` as a relative path without "..", or nothing.
std::optional<fs::path> inside(const fs::path& path, const fs::path& base) {
  fs::path rel = path.lexically_normal().lexically_relative(base.lexically_normal());
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel;
}

// Opens the folders of `parts` (all but the last) below `dir` without following symlinks.
std::optional<sys::SafeDir> open_parent(const sys::SafeDir& dir,
                                        const std::vector<std::string>& parts) {
  std::optional<sys::SafeDir> current = dir.open_subdir(parts.front());
  for (size_t i = 1; current && i + 1 < parts.size(); ++i) current = current->open_subdir(parts[i]);
  return current;
}

// The files libneuronxla writes into a MODULE_ folder before it compiles (format spec 2.2, 2.4),
// and lock files: what a folder may hold without holding anything of the compiler's own.
bool is_graph_or_lock(const std::string& name, int depth) {
  if (layout::is_lock_file(name)) return true;
  return depth == 0 && (name == layout::kHlo || name == layout::kLegacyHlo ||
                        name == layout::kFlagsJson || name == layout::kLegacyFlagsTxt);
}

// What a new MODULE_ folder holds besides its graph and lock files.
struct Shape {
  bool links = false;      // symlinks: optimum-neuron's hub proxy links into the HF file cache
  bool own_files = false;  // any other file (a NEFF, a log, an export's files) or node
};

// A traced export's folder is linked file by file, sub-folders included.
void shape_of(const sys::SafeDir& dir, int depth, Shape& shape) {
  for (const auto& item : dir.list()) {
    if (item.type == sys::NodeType::Symlink) {
      shape.links = true;
    } else if (item.type == sys::NodeType::Directory) {
      auto sub = depth < kMaxDepth ? dir.open_subdir(item.name) : std::nullopt;
      if (sub) {
        shape_of(*sub, depth + 1, shape);
      } else {
        shape.own_files = true;  // too deep to tell what it holds
      }
    } else if (!is_graph_or_lock(item.name, depth)) {
      shape.own_files = true;
    }
  }
}

}  // namespace

CaptureCache::CaptureCache(const fs::path& cache_root, const std::string& label)
    : root_(fs::absolute(cache_root).lexically_normal()) {
  if (!root_.has_filename()) root_ = root_.parent_path();  // "/a/b/" -> "/a/b"
  sys::SafeDir::open_or_create(root_);
  local::check_root_is_safe(root_);
  make_work_folder(label);
}

CaptureCache::CaptureCache(SeedViews& views, const std::string& label) : root_(views.root()) {
  std::string why =
      "inotify cannot watch them (see fs.inotify.max_user_watches and "
      "max_user_instances)";
  try {
    if (views.options().watch_runs) {
      SeedView& view = views.acquire(not_seeded_);
      if (view.watch().begin(view)) {
        views_ = &views;
        view_ = &view;
        return;
      }
      views.release(view, {}, true);
    }
  } catch (const Error& error) {
    why = std::string("they could not be seeded: ") + error.what();
  }
  // Without a watch, a reused entry could not be told from an unused one: the command compiles
  // everything itself instead, which is slower but exact.
  usage_tracked_ = false;
  not_seeded_.push_back("every entry: " + why + "; the command compiles everything it needs");
  make_work_folder(label);
}

void CaptureCache::make_work_folder(const std::string& label) {
  try {
    remove_abandoned_work(root_);
  } catch (const Error&) {
    // Leftovers of other runs only take space; they must not stop this one.
  }
  work_area_.emplace(sys::SafeDir::open(root_).make_path(kWorkDir));
  // Locked before it is visible under its name: the sweep of another run (or of another thread
  // of this one) cannot delete it between its creation and its use.
  const std::string prefix = folder_label(label) + "-";
  sys::LockedDir made = work_area_->make_locked_subdir([&] { return prefix + sys::random_hex(8); });
  work_name_ = made.name;
  work_lock_ = std::move(made.lock);
  work_.emplace(std::move(made.dir));
}

CaptureCache::~CaptureCache() {
  try {
    if (view_ && !collected_) view_->watch().end();
    // Not collected: what the run left in the view is unknown.
    if (view_) views_->release(*view_, touched_, view_trusted_ && collected_);
    if (work_area_ && !work_name_.empty()) work_area_->remove_tree(work_name_);
  } catch (...) {
    // Best effort: the next CaptureCache removes it once our flock is gone.
  }
}

const fs::path& CaptureCache::dir() const {
  return stage().path();
}

const sys::SafeDir& CaptureCache::stage() const {
  return view_ ? view_->dir() : *work_;
}

CaptureResult CaptureCache::collect(bool command_succeeded) {
  command_succeeded_ = command_succeeded;
  CaptureResult result;
  result.usage_tracked = usage_tracked_;
  if (view_) {
    collect_from_events(result);
  } else {
    collect_from_scan(result);
  }
  collected_ = true;
  // The registry starts empty in every staging cache: all of it is the run's.
  for (const auto& item : stage().list()) {
    if (!is_compiler_dir(item)) continue;
    auto compiler = stage().open_subdir(item.name);
    auto registry = compiler ? compiler->open_subdir(layout::kRegistryDir) : std::nullopt;
    if (registry)
      scan_registry(*registry, item.name + "/" + std::string(layout::kRegistryDir), 0, result);
  }
  std::sort(result.produced.begin(), result.produced.end());
  std::sort(result.used.begin(), result.used.end());
  std::sort(result.failed.begin(), result.failed.end());
  std::sort(result.proxied.begin(), result.proxied.end());
  std::sort(result.unlinked.begin(), result.unlinked.end());
  std::sort(result.registry_files.begin(), result.registry_files.end());
  return result;
}

// Every entry of the staging cache is the run's, but for the seeded ones of a view (after lost
// events: slow, and used stays unknown).
void CaptureCache::collect_from_scan(CaptureResult& result) {
  for (const auto& item : stage().list()) {
    if (!is_compiler_dir(item)) continue;
    auto compiler = stage().open_subdir(item.name);
    if (!compiler) continue;
    for (const auto& child : compiler->list()) {
      if (child.type != sys::NodeType::Directory) continue;
      if (view_ && is_seeded_entry(*compiler, child.name)) continue;
      classify(item.name, child.name, result);
    }
  }
}

void CaptureCache::collect_from_events(CaptureResult& result) {
  RunWatch::Events events = view_->watch().end();
  if (events.lost) {
    view_trusted_ = false;  // the next user rebuilds the view
    result.usage_lost = true;
    collect_from_scan(result);
    return;
  }
  for (const auto& compiler : events.new_compilers) {
    touched_.insert({compiler, ""});
    auto dir = stage().open_subdir(compiler);
    for (const auto& child : dir ? dir->list() : std::vector<sys::DirEntry>{}) {
      if (child.type == sys::NodeType::Directory) classify(compiler, child.name, result);
    }
  }
  for (const auto& key : events.created) {
    touched_.insert(key);
    if (!events.new_compilers.count(key.first)) classify(key.first, key.second, result);
  }
  touched_.insert(events.deleted.begin(), events.deleted.end());
  std::set<CapturedModule> made(result.produced.begin(), result.produced.end());
  made.insert(result.failed.begin(), result.failed.end());
  made.insert(result.proxied.begin(), result.proxied.end());
  made.insert(result.unlinked.begin(), result.unlinked.end());
  for (const auto& [compiler, name] : events.opened) {
    touched_.insert({compiler, name});
    if (!made.count({compiler, name})) result.used.push_back({compiler, name});
  }
}

void CaptureCache::classify(const std::string& compiler, const std::string& name,
                            CaptureResult& result) {
  if (!name.starts_with(layout::kModulePrefix)) return;
  auto dir = stage().open_subdir(compiler);
  auto module = dir ? dir->open_subdir(name) : std::nullopt;
  if (!module) return;  // made and removed again by the run, or not a folder
  // A traced export has no marker written last: only the end of its command says it is whole.
  layout::EntryState state = local::state_of_written_folder(*module, name);
  bool complete = state == layout::EntryState::Success ||
                  (state == layout::EntryState::Traced && command_succeeded_);
  Shape shape;
  shape_of(*module, 0, shape);
  if (complete) {
    result.produced.push_back({compiler, name});
  } else if (shape.own_files) {
    result.failed.push_back({compiler, name});  // a compile that did not finish
  } else if (shape.links) {
    result.proxied.push_back({compiler, name});
  } else {
    // Only a failed command makes a graph without a NEFF a failure: a successful one got the
    // NEFF elsewhere (optimum-neuron's hub proxy, from the HF file cache).
    (command_succeeded_ ? result.unlinked : result.failed).push_back({compiler, name});
  }
}

void CaptureCache::scan_registry(const sys::SafeDir& dir, const std::string& rel, int depth,
                                 CaptureResult& result) const {
  for (const auto& item : dir.list()) {
    const std::string item_rel = rel + "/" + item.name;
    if (item.type == sys::NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = dir.open_subdir(item.name)) scan_registry(*sub, item_rel, depth + 1, result);
    } else if ((item.type == sys::NodeType::File || item.type == sys::NodeType::Symlink) &&
               !layout::is_temporary_file(item.name)) {
      // A temporary file is a registry write the command did not finish: not the run's output.
      result.registry_files.push_back(item_rel);
    }
  }
}

size_t CaptureCache::adopt(const CaptureResult& result) {
  size_t installed = 0;
  for (const auto& module : result.produced) adopt_module(module, installed);
  // The registry files of a traced export that is not adopted would promise a folder this cache
  // does not hold (the entry hash names both): they stay out too.
  std::set<std::string> dropped;
  for (const auto& module : result.failed) {
    if (auto hash = layout::traced_entry_hash(module.name)) dropped.insert(*hash + ".json");
  }
  std::vector<std::string> files;
  for (const auto& rel : result.registry_files) {
    if (!dropped.count(rel.substr(rel.rfind('/') + 1))) files.push_back(rel);
  }
  // Primary files first, so that the aliases made next point at files that exist.
  for (const auto& rel : files) adopt_registry_file(rel, false);
  for (const auto& rel : files) adopt_registry_file(rel, true);
  // What the run made or reused is what cleanup --max-size should keep longest.
  std::vector<local::EntryName> used;
  for (const auto& list : {result.produced, result.used}) {
    for (const auto& module : list) used.emplace_back(module.compiler_dir, module.name);
  }
  local::record_use(root_, used);
  return installed;
}

namespace {

void stage_files(local::EntryInstall& install, const sys::SafeDir& dir, const std::string& prefix,
                 int depth) {
  for (const auto& item : dir.list()) {
    // The compiler's lock file must not travel: EntryInstall holds the real entry's own.
    if (item.type == sys::NodeType::File && !layout::is_lock_file(item.name)) {
      install.link_file(prefix + item.name, dir.path() / item.name);
    } else if (item.type == sys::NodeType::Directory && depth < kMaxDepth) {
      if (auto sub = dir.open_subdir(item.name)) {
        stage_files(install, *sub, prefix + item.name + "/", depth + 1);
      }
    }
  }
}

// Whether the '/'-path `rel` names a regular file below `root`, through no symlink.
bool is_real_file(const sys::SafeDir& root, const std::string& rel) {
  auto parts = layout::split_path(rel);
  if (parts.size() < 2) return false;
  auto parent = open_parent(root, parts);
  auto node = parent ? parent->entry(parts.back()) : std::nullopt;
  return node && node->type == sys::NodeType::File;
}

}  // namespace

void CaptureCache::adopt_module(const CapturedModule& module, size_t& installed) {
  auto compiler = stage().open_subdir(module.compiler_dir);
  auto staged = compiler ? compiler->open_subdir(module.name) : std::nullopt;
  if (!staged) {
    throw operational_error("the compiled entry " + module.compiler_dir + "/" + module.name +
                            " is missing from the staging cache " + dir().string() +
                            ": was it deleted while the command ran?");
  }
  local::EntryInstall install(root_, module.compiler_dir, module.name);
  stage_files(install, *staged, "", 0);
  if (install.commit() == local::InstallOutcome::Installed) ++installed;
}

void CaptureCache::adopt_registry_file(const std::string& rel_path, bool links) {
  auto parts = layout::split_path(rel_path);
  if (parts.size() < 3) return;
  auto staged = open_parent(stage(), parts);
  const std::string& name = parts.back();
  auto node = staged ? staged->entry(name) : std::nullopt;
  if (!node || (node->type == sys::NodeType::Symlink) != links) return;
  if (!links && node->type != sys::NodeType::File) return;
  std::optional<fs::path> target;
  if (links && !(target = real_link_target(*staged, name))) return;  // points outside the cache
  sys::SafeDir root = sys::SafeDir::open(root_);
  sys::SafeDir real = root.make_path(rel_path.substr(0, rel_path.size() - name.size() - 1));
  if (real.entry(name)) return;  // the real cache's copy is never replaced
  if (links) {
    // Relative, unlike optimum-neuron's absolute aliases: a copy or move of the cache keeps them
    // working (optimum-neuron and libneuronxla open them like any path, so they still resolve).
    fs::path text = target->lexically_relative(real.path());
    if (symlinkat(text.c_str(), real.fd(), name.c_str()) != 0 && errno != EEXIST) {
      throw operational_error("cannot create the registry alias " + (real.path() / name).string() +
                              ": " + std::strerror(errno));
    }
    return;
  }
  real.publish_file(name, staged->read_small_file(name), true);  // never seen half-written
}

// The real-cache path of what the staged alias `name` points at (optimum-neuron makes aliases
// absolute). Nothing unless it points at a regular file of the staging cache
// whose real counterpart exists.
std::optional<fs::path> CaptureCache::real_link_target(const sys::SafeDir& stage_dir,
                                                       const std::string& name) const {
  char buffer[PATH_MAX];
  ssize_t n = readlinkat(stage_dir.fd(), name.c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  fs::path target(std::string(buffer, static_cast<size_t>(n)));
  if (target.is_relative()) target = stage_dir.path() / target;
  auto rel = inside(target, stage().path());
  if (!rel) {
    auto work_real = sys::real_path(stage().path());
    auto target_real = sys::real_path(target);
    if (work_real && target_real) rel = inside(*target_real, *work_real);
  }
  if (!rel || !is_real_file(sys::SafeDir::open(root_), rel->generic_string())) return std::nullopt;
  return root_ / *rel;
}

namespace {

// A view unused for kIdleViewSeconds, locked (no run holds it) and deleted.
bool remove_idle_view(const sys::SafeDir& area, const sys::DirEntry& item) {
  auto dir = item.type == sys::NodeType::Directory ? area.open_subdir(item.name) : std::nullopt;
  if (!dir) return false;
  auto state = dir->entry(kViewStateFile);
  double last_use = state ? state->mtime : item.mtime;
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (now - last_use < kIdleViewSeconds || flock(dir->fd(), LOCK_EX | LOCK_NB) != 0) return false;
  area.remove_tree(item.name);
  return true;
}

}  // namespace

size_t remove_abandoned_work(const fs::path& cache_root) {
  std::error_code error;
  if (!fs::is_directory(cache_root, error)) return 0;
  sys::SafeDir root = sys::SafeDir::open(cache_root);
  std::optional<sys::SafeDir> area =
      open_parent(root, layout::split_path(std::string(kWorkDir) + "/x"));
  if (!area) return 0;
  size_t removed = 0;
  for (const auto& item : area->list()) {
    if (item.name.starts_with(kViewPrefix)) {
      removed += remove_idle_view(*area, item) ? 1 : 0;
      continue;
    }
    // Held until the folder is gone, so its owner cannot be a live run.
    std::optional<sys::SafeDir> held;
    if (!sys::claim_abandoned(*area, item, held)) continue;
    area->remove_tree(item.name);
    ++removed;
  }
  return removed;
}

}  // namespace neuron_cache::compile
