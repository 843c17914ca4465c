// What killed writers leave in a shared folder that no publication sweeps (gc names and removes
// them): temporary copies and probes (".<name>.<12 hex>.tmp"; a writer sweeps those of a name
// only when it writes that name again) and empty MODULE_ folders (a writer killed before its
// first file, or a gc killed between its unlinks and its rmdir). Walked through descriptors,
// never through a symlink; nothing of another shape is touched.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "neuron_cache/format/layout.h"
#include "neuron_cache/storage/folder_store.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::storage {
namespace {

constexpr size_t kRandomDigits = 12;  // sys::random_hex(12) in write_file and write_times
constexpr std::string_view kTempSuffix = ".tmp";

// Exactly the shape write_file and write_times give: "." + name + "." + 12 lowercase hex +
// ".tmp", name not empty. Other writers' temporary files (".<hash>.json.<pid>-<random>.tmp")
// are theirs to sweep.
bool is_copy_name(std::string_view name) {
  size_t tail = 1 + kRandomDigits + kTempSuffix.size();
  if (name.size() < 2 + tail || name[0] != '.' || !name.ends_with(kTempSuffix)) return false;
  std::string_view random = name.substr(name.size() - kTempSuffix.size() - kRandomDigits);
  random = random.substr(0, kRandomDigits);
  return name[name.size() - tail] == '.' &&
         random.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// A MODULE_ folder of a compiler folder: "neuronxcc-<v>/MODULE_<name>".
bool is_module_folder(const std::vector<std::string>& parts) {
  return parts.size() == 2 && layout::compiler_version_of(parts[0]) &&
         parts[1].starts_with(layout::kModulePrefix);
}

int64_t age_of(const sys::DirEntry& item, int64_t now) {
  return now - static_cast<int64_t>(item.mtime);
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "/" + name;
}

class Walk {
 public:
  explicit Walk(const LeftoverAges& ages) : ages_(ages) {}

  // `items`: dir.list(), which told the caller whether the folder is empty.
  void folder(const sys::SafeDir& dir, const std::vector<std::string>& parts,
              const std::vector<sys::DirEntry>& items) {
    if (parts.size() > static_cast<size_t>(kFolderMaxDepth)) {
      throw operational_error(dir.path().string() + " is more than " +
                              std::to_string(kFolderMaxDepth) +
                              " folders deep: not a cache tree; check the store's root");
    }
    for (const sys::DirEntry& item : items) {
      if (++seen_ > kFolderMaxListedEntries) {
        throw operational_error("more than " + std::to_string(kFolderMaxListedEntries) +
                                " entries below the shared folder: not a cache tree; check the "
                                "store's root");
      }
      std::vector<std::string> path = parts;
      path.push_back(item.name);
      if (item.type == sys::NodeType::File) file(item, path);
      if (item.type != sys::NodeType::Directory) continue;  // a symlink is never followed
      std::optional<sys::SafeDir> sub = dir.open_subdir(item.name);
      if (!sub) continue;  // replaced meanwhile
      std::vector<sys::DirEntry> inside = sub->list();
      if (is_module_folder(path) && inside.empty()) {
        empty_folder(item, path);
        continue;
      }
      folder(*sub, path, inside);
    }
  }

  std::vector<Leftover> found;

 private:
  void file(const sys::DirEntry& item, const std::vector<std::string>& parts) {
    int64_t age = age_of(item, ages_.now);
    if (!is_copy_name(item.name) || age < ages_.copy) return;
    found.push_back({Leftover::Kind::Copy, path_of(parts), item.size, age,
                     "a temporary copy or probe whose writer is gone: none takes an hour"});
  }

  void empty_folder(const sys::DirEntry& item, const std::vector<std::string>& parts) {
    int64_t age = age_of(item, ages_.now);
    if (age < ages_.folder) return;  // a writer makes its folder before its first file
    found.push_back({Leftover::Kind::EmptyFolder, path_of(parts), 0, age,
                     "an empty MODULE folder: a writer or a gc was killed midway"});
  }

  static std::string path_of(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& part : parts) out = join(out, part);
    return out;
  }

  const LeftoverAges& ages_;
  size_t seen_ = 0;
};

// The parts of `path` when each is a plain name, else nothing.
std::optional<std::vector<std::string>> parts_of(const std::string& path) {
  std::vector<std::string> parts = layout::split_path(path);
  if (parts.empty()) return std::nullopt;
  try {
    for (const auto& part : parts) sys::check_plain_name(part);
  } catch (const Error&) {
    return std::nullopt;
  }
  return parts;
}

// Removes one leftover after checking it again where it is; "" when removed, else why not.
std::string remove_one(const sys::SafeDir& root, const Leftover& item, const LeftoverAges& ages) {
  std::optional<std::vector<std::string>> parts = parts_of(item.path);
  bool copy = item.kind == Leftover::Kind::Copy;
  if (!parts || (copy && !is_copy_name(parts->back())) ||
      (item.kind == Leftover::Kind::EmptyFolder && !is_module_folder(*parts)) ||
      item.kind == Leftover::Kind::Upload) {
    return "not a leftover of a shared folder: refused";
  }
  std::string folders;
  for (size_t i = 0; i + 1 < parts->size(); ++i) folders = join(folders, (*parts)[i]);
  std::optional<sys::SafeDir> dir;
  if (folders.empty()) {
    dir.emplace(sys::SafeDir::open(root.path()));
  } else {
    dir = root.open_path(folders);  // nothing when a part is a symlink or missing
  }
  std::optional<sys::DirEntry> there = dir ? dir->entry(parts->back()) : std::nullopt;
  if (!there) return "";  // gone already: another gc, or its writer's sweep
  auto want = copy ? sys::NodeType::File : sys::NodeType::Directory;
  if (there->type != want) return "no longer what gc planned (replaced): kept";
  if (age_of(*there, ages.now) < (copy ? ages.copy : ages.folder))
    return "written again since the plan: kept";
  // rmdir refuses a folder that is no longer empty: a writer's new file wins.
  if (unlinkat(dir->fd(), parts->back().c_str(), copy ? 0 : AT_REMOVEDIR) != 0 && errno != ENOENT)
    return std::string(errno == ENOTEMPTY ? "no longer empty" : std::strerror(errno)) + ": kept";
  return "";
}

}  // namespace

std::vector<Leftover> FolderStore::leftovers(const LeftoverAges& ages) {
  sys::SafeDir root = sys::SafeDir::open(root_);
  Walk walk(ages);
  walk.folder(root, {}, root.list());
  return std::move(walk.found);
}

LeftoverRemoval FolderStore::remove_leftovers(const std::vector<Leftover>& found,
                                              const LeftoverAges& ages) {
  LeftoverRemoval out;
  sys::SafeDir root = sys::SafeDir::open(root_);
  for (const Leftover& item : found) {
    std::string why;
    try {
      why = remove_one(root, item, ages);
    } catch (const Error& error) {
      why = std::string(error.what()) + ": kept";
    }
    if (why.empty()) {
      ++out.removed;
    } else {
      out.kept.push_back(item.path + ": " + why);
    }
  }
  return out;
}

}  // namespace neuron_cache::storage
