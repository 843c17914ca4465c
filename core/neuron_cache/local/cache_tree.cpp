#include "neuron_cache/local/cache_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/compile_flags.h"

namespace neuron_cache::local {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxRegistryFileBytes = 16 << 20;
constexpr size_t kMaxFlagsFileBytes = 1 << 20;

bool is_inside(const fs::path& path, const fs::path& base) {
  auto [base_end, path_it] = std::mismatch(base.begin(), base.end(), path.begin(), path.end());
  return base_end == base.end();
}

std::string read_fd(int fd, size_t max_bytes, const fs::path& path) {
  std::string content;
  char buffer[65536];
  ssize_t n = 0;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) {
    content.append(buffer, static_cast<size_t>(n));
    if (content.size() > max_bytes) {
      throw input_error(path.string() + " is larger than expected for its kind of file");
    }
  }
  if (n < 0) throw operational_error("cannot read " + path.string());
  return content;
}

// What the symlink `name` in `dir` holds, or nothing.
std::optional<fs::path> link_text(const sys::SafeDir& dir, const std::string& name) {
  char buffer[PATH_MAX];
  ssize_t n = readlinkat(dir.fd(), name.c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  return fs::path(std::string(buffer, static_cast<size_t>(n)));
}

// The components of an absolute path as fs::path iterates them, in plain strings (a warm plan
// splits every registry alias it reads, and fs::path appends cost ten times more): repeated
// slashes count as one, a trailing slash leaves an empty last component.
std::vector<std::string_view> components(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t at = 1; at <= text.size();) {
    size_t slash = std::min(text.find('/', at), text.size());
    if (slash > at || slash == text.size()) parts.push_back(text.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

std::string joined(const std::vector<std::string_view>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t j = from; j < to; ++j) {
    if (j > from) out += '/';
    out += parts[j];
  }
  return out;
}

// For an absolute link "<old root>/neuronxcc-<v>/<0_REGISTRY or MODULE_...>/...": the old root
// and the path below it. Nothing for any other link, or one with "." or ".." components.
std::optional<std::pair<fs::path, fs::path>> split_at_layout(const fs::path& text) {
  if (!text.is_absolute()) return std::nullopt;
  std::vector<std::string_view> parts = components(text.native());
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!layout::compiler_version_of(parts[i])) continue;
    std::string_view next = parts[i + 1];
    if (next != layout::kRegistryDir && !next.starts_with(layout::kModulePrefix)) continue;
    for (size_t j = i; j < parts.size(); ++j) {
      if (parts[j].empty() || parts[j] == "." || parts[j] == "..") return std::nullopt;
    }
    return std::make_pair(fs::path("/" + joined(parts, 0, i)),
                          fs::path(joined(parts, i, parts.size())));
  }
  return std::nullopt;
}

}  // namespace

LocalCache::LocalCache(fs::path root, std::vector<fs::path> trusted_link_roots)
    : root_(std::move(root)) {
  trusted_link_roots.push_back(root_);
  for (const auto& place : trusted_link_roots) {
    if (auto resolved = sys::real_path(place)) trusted_.push_back(*resolved);
  }
}

bool LocalCache::exists() const {
  std::error_code error;
  return fs::is_directory(root_, error);
}

// Enough for every folder a run reads links in; a cache planted with more is still read right,
// its folders resolved each time.
constexpr size_t kMaxKeptFolders = 4096;

std::optional<fs::path> LocalCache::real_folder(const fs::path& folder) const {
  std::lock_guard lock(memo_mutex_);
  if (auto it = real_folders_.find(folder); it != real_folders_.end()) return it->second;
  auto real = sys::real_path(folder);
  if (real && real_folders_.size() < kMaxKeptFolders) real_folders_.emplace(folder, *real);
  return real;
}

bool LocalCache::allowed(const fs::path& real) const {
  // The root may not have existed when this LocalCache was made (a command that creates it).
  auto root = real_folder(root_);
  auto inside = [&](const fs::path& base) { return is_inside(real, base); };
  return std::any_of(trusted_.begin(), trusted_.end(), inside) || (root && inside(*root));
}

bool LocalCache::is_foreign_root(const fs::path& old_root) const {
  {
    std::lock_guard lock(memo_mutex_);
    if (auto it = foreign_roots_.find(old_root); it != foreign_roots_.end()) return it->second;
  }
  auto real = sys::real_path(old_root);
  bool foreign = !real || !allowed(*real);
  std::lock_guard lock(memo_mutex_);
  if (real_folders_.contains(root_) && foreign_roots_.size() < kMaxKeptFolders) {
    foreign_roots_.emplace(old_root, foreign);
  }
  return foreign;
}

std::optional<LinkTarget> LocalCache::resolve(const fs::path& path) const {
  // realpath(path) is realpath of its folder, then its last name when that is a link.
  fs::path name = path.filename();
  std::optional<fs::path> real;
  if (name.empty() || name == "." || name == "..") {
    real = sys::real_path(path);
  } else if (auto folder = real_folder(path.parent_path())) {
    real = *folder / name;
  }
  struct stat info {};
  if (!real || lstat(real->c_str(), &info) != 0) return std::nullopt;
  if (S_ISLNK(info.st_mode)) {  // a link to a link: resolved whole
    real = sys::real_path(*real);
    if (!real || stat(real->c_str(), &info) != 0) return std::nullopt;
  }
  LinkTarget target{*real, sys::NodeType::Other, 0, std::nullopt};
  if (S_ISREG(info.st_mode)) target = {*real, sys::NodeType::File, uint64_t(info.st_size), {}};
  if (S_ISDIR(info.st_mode)) target.type = sys::NodeType::Directory;
  return target;
}

std::optional<LinkTarget> LocalCache::relocated(const fs::path& below) const {
  auto root = real_folder(root_);
  auto target = root ? resolve(*root / below) : std::nullopt;
  if (!target || !is_inside(target->path, *root)) return std::nullopt;
  return target;
}

std::optional<LinkTarget> LocalCache::resolve_link(const sys::SafeDir& dir,
                                                   const std::string& name) const {
  auto text = link_text(dir, name);
  auto split = text ? split_at_layout(*text) : std::nullopt;
  auto moved = [&]() -> std::optional<LinkTarget> {
    auto target = split ? relocated(split->second) : std::nullopt;
    if (target) target->moved_from = split->first;
    return target;
  };
  // A copied or moved cache: the old root's path is never followed, even when it still exists.
  if (split && is_foreign_root(split->first)) return moved();
  // An absolute text replaces the folder; not a link at all, the name is resolved itself.
  auto target = resolve(dir.path() / text.value_or(fs::path(name)));
  if (target && allowed(target->path)) return target;
  return moved();
}

std::optional<fs::path> LocalCache::link_target(const sys::SafeDir& dir,
                                                const std::string& name) const {
  auto target = resolve_link(dir, name);
  if (!target) return std::nullopt;
  return target->path;
}

bool LocalCache::link_is_trusted(const sys::SafeDir& dir, const std::string& name) const {
  return link_target(dir, name).has_value();
}

fs::path LocalCache::file_to_read(const fs::path& file) const {
  std::error_code error;
  if (!fs::is_symlink(file, error)) return fs::canonical(file);
  auto target = link_target(sys::SafeDir::open(file.parent_path()), file.filename().string());
  if (!target) {
    throw operational_error(file.string() + " is a symlink to a place outside the cache: not read");
  }
  return *target;
}

namespace {

// Reads a small file that may be a trusted symlink (a registry alias, a Hub-cache link).
std::string read_entry_file(const LocalCache& cache, const sys::SafeDir& dir,
                            const sys::DirEntry& file, size_t max_bytes) {
  if (file.type != sys::NodeType::Symlink) return dir.read_small_file(file.name, max_bytes);
  auto target = cache.link_target(dir, file.name);
  if (!target) {
    throw operational_error((dir.path() / file.name).string() +
                            " is a symlink to a place outside the cache: not read");
  }
  int fd = ::open(target->c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw operational_error("cannot open " + (dir.path() / file.name).string());
  sys::UniqueFd guard(fd);
  sys::require_regular_file(fd, dir.path() / file.name);
  return read_fd(fd, max_bytes, dir.path() / file.name);
}

bool present(const LocalCache& cache, const sys::SafeDir& dir, const sys::DirEntry& file) {
  if (file.type == sys::NodeType::Symlink) return cache.link_is_trusted(dir, file.name);
  return true;
}

void note_file(const LocalCache& cache, const sys::SafeDir& dir, const sys::DirEntry& file,
               ModuleEntry& entry) {
  entry.file_names.push_back(file.name);
  bool here = present(cache, dir, file);
  if (file.type == sys::NodeType::Symlink && !here) entry.untrusted_links.push_back(file.name);
  if (layout::is_lock_file(file.name)) entry.files.lock_files.push_back(file.name);
  if (!here) return;
  if (file.name == layout::kNeff) entry.files.has_neff = true;
  if (file.name == layout::kDone) entry.files.has_done = true;
  if (file.name == layout::kLog) entry.files.has_log = true;
  if (file.name == layout::kHlo || (file.name == layout::kLegacyHlo && entry.hlo_file.empty())) {
    entry.hlo_file = file.name;
  }
  if (file.name == layout::kFlagsJson ||
      (file.name == layout::kLegacyFlagsTxt && entry.flags_file.empty())) {
    entry.flags_file = file.name;
  }
}

constexpr int kMaxTracedDepth = 8;  // diffusion components are one level down

// The files of a traced export at every depth (its components live in sub-folders): what makes
// it complete, and lock files below the top. `present` says whether a file counts.
template <typename Present>
void note_traced_tree(const sys::SafeDir& dir, const std::string& prefix, int depth,
                      layout::EntryFiles& files, const Present& present) {
  for (const auto& item : dir.list()) {
    std::string rel = prefix + item.name;
    if (item.type == sys::NodeType::Directory) {
      auto sub = depth < kMaxTracedDepth ? dir.open_subdir(item.name) : std::nullopt;
      if (sub) note_traced_tree(*sub, rel + "/", depth + 1, files, present);
      continue;
    }
    if (layout::is_lock_file(item.name)) {
      if (!prefix.empty()) files.lock_files.push_back(rel);  // the top ones are noted already
    } else if (present(dir, item)) {
      layout::note_traced_file(files, rel);
    }
  }
}

}  // namespace

layout::EntryState state_of_written_folder(const sys::SafeDir& module_dir,
                                           std::string_view module_name) {
  layout::EntryFiles files;
  for (const auto& item : module_dir.list()) {
    if (layout::is_lock_file(item.name)) files.lock_files.push_back(item.name);
    if (item.type != sys::NodeType::File) continue;
    files.has_neff = files.has_neff || item.name == layout::kNeff;
    files.has_done = files.has_done || item.name == layout::kDone;
    files.has_log = files.has_log || item.name == layout::kLog;
  }
  files.traced_name = layout::is_traced_module_name(module_name);
  if (files.traced_name) {
    note_traced_tree(module_dir, "", 0, files, [](const sys::SafeDir&, const sys::DirEntry& item) {
      return item.type == sys::NodeType::File;
    });
  }
  return layout::classify(files);
}

ModuleEntry LocalCache::inspect_module(const sys::SafeDir& compiler_dir, const std::string& name,
                                       bool with_flags_key) const {
  ModuleEntry entry;
  entry.compiler_dir = compiler_dir.path().filename().string();
  entry.name = name;
  entry.module = layout::parse_module_name(name).value_or(layout::ModuleName{name, ""});
  std::optional<sys::SafeDir> dir = compiler_dir.open_subdir(name);
  if (!dir) throw operational_error((compiler_dir.path() / name).string() + " is not a directory");
  std::vector<sys::DirEntry> files = dir->list();
  std::sort(files.begin(), files.end(),
            [](const sys::DirEntry& a, const sys::DirEntry& b) { return a.name < b.name; });
  for (const auto& file : files) note_file(*this, *dir, file, entry);
  entry.files.traced_name = layout::is_traced_module_name(name);
  if (entry.files.traced_name) {
    note_traced_tree(*dir, "", 0, entry.files,
                     [this](const sys::SafeDir& in, const sys::DirEntry& item) {
                       return present(*this, in, item);
                     });
  }
  std::sort(entry.files.lock_files.begin(), entry.files.lock_files.end());
  entry.state = layout::classify(entry.files);
  entry.size_bytes = dir->listed_size(files);
  for (const auto& file : files) {
    // A lock file is touched by whoever locks the entry, its content stays as it was written.
    if (!layout::is_lock_file(file.name))
      entry.newest_mtime = std::max(entry.newest_mtime, file.mtime);
  }
  if (with_flags_key && !entry.flags_file.empty()) {
    auto file = std::find_if(files.begin(), files.end(),
                             [&](const sys::DirEntry& f) { return f.name == entry.flags_file; });
    try {
      entry.flags_file_key = flags_key(read_entry_file(*this, *dir, *file, kMaxFlagsFileBytes));
    } catch (const Error&) {
      // An unreadable flags file (a FIFO, too large, no permission) leaves the key unknown; the
      // entry is still classified so that status and cleanup keep working.
    }
  }
  return entry;
}

namespace {

void walk_registry(const LocalCache& cache, const sys::SafeDir& dir, const std::string& prefix,
                   std::vector<RegistryFile>& out, int depth) {
  if (depth > 8) return;  // the deepest generation has 6 levels
  for (const auto& item : dir.list()) {
    std::string rel = prefix.empty() ? item.name : prefix + "/" + item.name;
    if (item.type == sys::NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) walk_registry(cache, *sub, rel, out, depth + 1);
      continue;
    }
    auto location = registry::locate(rel);
    if (!location) continue;
    RegistryFile file;
    file.path = std::string(layout::kRegistryDir) + "/" + rel;
    file.is_link = item.type == sys::NodeType::Symlink;
    try {
      std::string text = read_entry_file(cache, dir, item, kMaxRegistryFileBytes);
      file.record = registry::read_record(*location, text);
    } catch (const Error& error) {
      file.problem = error.what();
    }
    out.push_back(std::move(file));
  }
}

void walk_registry_links(const LocalCache& cache, const sys::SafeDir& dir, const std::string& rel,
                         ForeignLinks& out, int depth) {
  if (depth > 8) return;
  for (const auto& item : dir.list()) {
    std::string item_rel = rel + "/" + item.name;
    if (item.type == sys::NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) {
        walk_registry_links(cache, *sub, item_rel, out, depth + 1);
      }
      continue;
    }
    if (item.type != sys::NodeType::Symlink) continue;
    auto read = cache.resolve_link(dir, item.name);
    if (!read) {
      out.outside.push_back(item_rel);
    } else if (read->moved_from) {
      ++out.relocated[read->moved_from->string()];
    }
  }
}

}  // namespace

ForeignLinks LocalCache::foreign_registry_links(const sys::SafeDir& compiler_dir) const {
  ForeignLinks links;
  if (auto registry_dir = compiler_dir.open_subdir(layout::kRegistryDir)) {
    walk_registry_links(
        *this, *registry_dir,
        compiler_dir.path().filename().string() + "/" + std::string(layout::kRegistryDir), links,
        0);
  }
  std::sort(links.outside.begin(), links.outside.end());
  return links;
}

std::vector<std::string> describe_foreign_links(const ForeignLinks& links, const fs::path& root) {
  std::vector<std::string> lines;
  for (const auto& [old_root, count] : links.relocated) {
    lines.push_back(std::to_string(count) + " registry link(s) point to " + old_root +
                    ": the cache was copied or moved from there to " + root.string() +
                    ", so they are read from the same place below " + root.string() +
                    " (links are never followed out of the cache)");
  }
  if (!links.outside.empty()) {
    lines.push_back(std::to_string(links.outside.size()) +
                    " registry link(s) point outside the cache and are not followed (first: " +
                    links.outside.front() +
                    "): the configurations they name look incomplete; delete those links, or "
                    "fetch the entries again (`neuron-cache fetch`)");
  }
  return lines;
}

std::vector<RegistryFile> LocalCache::scan_registry(const sys::SafeDir& compiler_dir) const {
  std::vector<RegistryFile> files;
  if (auto registry_dir = compiler_dir.open_subdir(layout::kRegistryDir)) {
    walk_registry(*this, *registry_dir, "", files, 0);
  }
  std::sort(files.begin(), files.end(),
            [](const RegistryFile& a, const RegistryFile& b) { return a.path < b.path; });
  return files;
}

uint64_t total_size(const CacheTree& tree) {
  uint64_t total = 0;
  for (const auto& compiler : tree.compilers) total += compiler.size_bytes;
  return total;
}

CacheTree LocalCache::scan(const std::string& installed_compiler, bool with_registry) const {
  CacheTree tree{root_, exists(), installed_compiler, {}, {}, {}};
  std::error_code error;
  if (!tree.exists && fs::exists(fs::symlink_status(root_, error))) {
    throw operational_error("the cache root " + root_.string() +
                            " exists but is not a directory: remove it or choose another "
                            "--cache-dir");
  }
  if (!tree.exists) return tree;
  sys::SafeDir root = sys::SafeDir::open(root_);
  std::vector<sys::DirEntry> items = root.list();
  std::sort(items.begin(), items.end(),
            [](const sys::DirEntry& a, const sys::DirEntry& b) { return a.name < b.name; });
  for (const auto& item : items) {
    auto version = layout::compiler_version_of(item.name);
    if (!version) continue;
    std::optional<sys::SafeDir> dir = root.open_subdir(item.name);
    if (!dir) {
      tree.skipped.push_back(item.name + " (not a directory, or a symlink: not followed)");
      continue;
    }
    CompilerDir compiler;
    compiler.name = item.name;
    compiler.version = *version;
    compiler.current = layout::is_current_compiler_dir(item.name, installed_compiler);
    for (const auto& child : dir->list()) {
      if (!child.name.starts_with(layout::kModulePrefix)) continue;
      if (child.type != sys::NodeType::Directory) {
        tree.skipped.push_back(item.name + "/" + child.name + " (not a directory: not followed)");
        continue;
      }
      try {
        compiler.modules.push_back(inspect_module(*dir, child.name));
      } catch (const Error& error) {
        // Another user's private folder (EACCES) or one swapped for a symlink since the listing.
        tree.skipped.push_back(item.name + "/" + child.name + " (" + error.what() + ")");
        continue;
      }
      compiler.size_bytes += compiler.modules.back().size_bytes;
    }
    std::sort(compiler.modules.begin(), compiler.modules.end(),
              [](const ModuleEntry& a, const ModuleEntry& b) { return a.name < b.name; });
    if (with_registry) {
      compiler.registry = scan_registry(*dir);
      ForeignLinks links = foreign_registry_links(*dir);
      for (const auto& [old_root, count] : links.relocated)
        tree.foreign_links.relocated[old_root] += count;
      tree.foreign_links.outside.insert(tree.foreign_links.outside.end(), links.outside.begin(),
                                        links.outside.end());
    }
    tree.compilers.push_back(std::move(compiler));
  }
  return tree;
}

}  // namespace neuron_cache::local
