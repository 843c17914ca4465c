#include "neuron_cache/local/local_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"

namespace neuron_cache::local {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

// The folder holding a '/'-path's last component, opened without following symlinks.
class Parent {
 public:
  Parent(const sys::SafeDir& start, const std::vector<std::string>& parts) : start_(&start) {
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto sub = get()->open_subdir(parts[i]);
      if (!sub) {
        found_ = false;
        return;
      }
      owned_.emplace(std::move(*sub));
    }
  }
  explicit operator bool() const { return found_; }
  const sys::SafeDir* operator->() const { return get(); }
  const sys::SafeDir& operator*() const { return *get(); }

 private:
  const sys::SafeDir* get() const { return owned_ ? &*owned_ : start_; }
  const sys::SafeDir* start_;
  std::optional<sys::SafeDir> owned_;
  bool found_ = true;
};

Parent parent_of(const sys::SafeDir& start, const std::vector<std::string>& parts) {
  return Parent(start, parts);
}

// The size of a file or of a trusted symlink's target; nothing when absent or untrusted.
std::optional<uint64_t> present_size(const LocalCache& cache, const sys::SafeDir& dir,
                                     const std::string& name) {
  auto entry = dir.entry(name);
  if (!entry) return std::nullopt;
  if (entry->type == sys::NodeType::File) return entry->size;
  if (entry->type != sys::NodeType::Symlink) return std::nullopt;
  auto target = cache.resolve_link(dir, name);
  if (!target || target->type != sys::NodeType::File) return std::nullopt;
  return target->size;
}

// The folder `relative` ('/'-path below the root, "" for the root) through the folders already
// in `opened`, adding each one it opens; null when missing. Components are opened with
// O_NOFOLLOW (SafeDir::open_subdir).
const sys::SafeDir* open_folder(const LocalCache& cache,
                                std::map<std::string, sys::SafeDir>& opened,
                                const std::string& relative) {
  if (auto it = opened.find(relative); it != opened.end()) return &it->second;
  std::optional<sys::SafeDir> dir;
  size_t slash = relative.rfind('/');
  if (relative.empty()) {
    if (cache.exists()) dir = sys::SafeDir::open(cache.root());
  } else if (auto* up = open_folder(cache, opened,
                                    slash == std::string::npos ? "" : relative.substr(0, slash))) {
    dir = up->open_subdir(slash == std::string::npos ? relative : relative.substr(slash + 1));
  }
  if (!dir) return nullptr;
  return &opened.emplace(relative, std::move(*dir)).first->second;
}

// "a/b/c.json" -> "a/b"; "c.json" -> "".
std::string folder_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

bool is_listed(const ai::ModuleRecord& module, std::string_view name) {
  return std::any_of(module.files.begin(), module.files.end(),
                     [&](const ai::FileRecord& file) { return file.name == name; });
}

// SUCCESS as optimum-neuron classifies it (model.neff and model.done there) and every listed
// file there with its listed size. One openat, then one fstatat per file: nothing is listed,
// read or hashed, so a warm run costs what its entries list, not what the cache holds, and a
// deleted or truncated NEFF is still seen. A traced export has no model.neff: its record lists
// what makes it complete (artifact_index checks that), so its listed files are enough.
bool module_complete_in(const LocalCache& cache, const sys::SafeDir& compiler,
                        const ai::ModuleRecord& module) {
  auto dir = compiler.open_subdir(module.name);
  if (!dir) return false;
  bool traced = layout::is_traced_module_name(module.name);
  for (std::string_view name : {layout::kNeff, layout::kDone}) {
    if (traced) break;
    if (!is_listed(module, name) && !present_size(cache, *dir, std::string(name))) return false;
  }
  for (const auto& file : module.files) {
    auto parts = layout::split_path(file.name);
    auto parent = parent_of(*dir, parts);
    if (!parent) return false;
    auto size = present_size(cache, *parent, parts.back());
    if (!size || *size != file.size) return false;
  }
  return true;
}

// Regular files and trusted symlinks (optimum-neuron links Hub downloads into the cache).
void collect_files(const LocalCache& cache, const sys::SafeDir& dir, const std::string& prefix,
                   std::vector<ai::FileRecord>& out) {
  for (const auto& item : dir.list()) {
    std::string name = prefix.empty() ? item.name : prefix + "/" + item.name;
    if (item.type == sys::NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) collect_files(cache, *sub, name, out);
    } else if (item.type == sys::NodeType::File && !layout::is_lock_file(item.name)) {
      out.push_back({name, item.size, sha256_of_file(dir.path() / item.name)});
    } else if (item.type == sys::NodeType::Symlink && !layout::is_lock_file(item.name)) {
      if (auto size = present_size(cache, dir, item.name)) {
        out.push_back({name, *size, sha256_of_file(cache.file_to_read(dir.path() / item.name))});
      }
    }
  }
}

}  // namespace

std::map<std::string, ai::Entry> LocalIndex::entries(const std::string& compiler_version,
                                                     std::vector<std::string>* problems) const {
  std::map<std::string, ai::Entry> out;
  const sys::SafeDir* dir =
      folder(std::string(ai::kLocalDir) + "/" + layout::compiler_dir_name(compiler_version));
  if (!dir) return out;
  for (const auto& item : dir->list()) {
    if (item.type != sys::NodeType::File || !item.name.ends_with(".json")) continue;
    try {
      ai::Entry entry =
          ai::parse_entry(dir->read_small_file(item.name), (dir->path() / item.name).string());
      if (entry.key + ".json" != item.name || entry.inputs.compiler_version != compiler_version) {
        throw input_error((dir->path() / item.name).string() + " holds another key's entry");
      }
      out.emplace(entry.key, std::move(entry));
    } catch (const Error& error) {
      if (problems) problems->push_back(error.what());
    }
  }
  return out;
}

std::vector<std::string> LocalIndex::compiler_versions() const {
  std::vector<std::string> out;
  const sys::SafeDir* dir = folder(std::string(ai::kLocalDir));
  if (!dir) return out;
  for (const auto& item : dir->list()) {
    if (item.type != sys::NodeType::Directory) continue;
    if (auto version = layout::compiler_version_of(item.name)) out.push_back(*version);
  }
  return out;
}

std::optional<ai::Entry> LocalIndex::find(const std::string& compiler_version,
                                          const std::string& key) const {
  return read_entry(compiler_version, key, nullptr);
}

std::optional<ai::Entry> LocalIndex::find(const cache_key::KeyInputs& inputs,
                                          const std::string& key) const {
  ai::KnownKey known{key, inputs};
  return read_entry(inputs.compiler_version, key, &known);
}

std::optional<ai::Entry> LocalIndex::read_entry(const std::string& compiler_version,
                                                const std::string& key,
                                                const ai::KnownKey* known) const {
  std::string path = ai::local_entry_path(compiler_version, key);
  const sys::SafeDir* dir = folder(folder_of(path));
  if (!dir) return std::nullopt;
  try {
    std::string name = name_of(path);
    ai::Entry entry =
        ai::parse_entry(dir->read_small_file(name), (dir->path() / name).string(), known);
    if (entry.key == key) return entry;
  } catch (const Error&) {
    // A missing or unreadable entry is as good as none: the configuration is compiled or
    // fetched again.
  }
  return std::nullopt;
}

void LocalIndex::write(const ai::Entry& entry) const {
  sys::SafeDir root = sys::SafeDir::open_or_create(cache_.root());
  auto parts = layout::split_path(ai::local_entry_path(entry.inputs.compiler_version, entry.key));
  std::string folder;
  for (size_t i = 0; i + 1 < parts.size(); ++i) folder += (folder.empty() ? "" : "/") + parts[i];
  sys::SafeDir dir = root.make_path(folder);
  dir.publish_file(parts.back(), ai::serialize_entry(entry), false);
  dir.sync();
}

bool LocalIndex::module_complete(const std::string& compiler_dir,
                                 const ai::ModuleRecord& module) const {
  const sys::SafeDir* compiler = folder(compiler_dir);
  return compiler && module_complete_in(cache_, *compiler, module);
}

bool LocalIndex::registry_file_present(const std::string& compiler_dir,
                                       const ai::FileRecord& file) const {
  const sys::SafeDir* dir = folder(compiler_dir + "/" + folder_of(file.name));
  return dir && present_size(cache_, *dir, name_of(file.name)).has_value();
}

LocalIndex::Missing LocalIndex::missing(const ai::Entry& entry) const {
  Missing out;
  std::string compiler_dir = entry.compiler_dir();
  const sys::SafeDir* compiler = folder(compiler_dir);
  for (const auto& module : entry.modules) {
    if (compiler && module_complete_in(cache_, *compiler, module)) continue;
    out.bytes += module.size();
    out.files += module.files.size();
  }
  for (const auto& file : entry.registry) {
    if (registry_file_present(compiler_dir, file)) continue;
    out.bytes += file.size;
    ++out.files;
  }
  return out;
}

const sys::SafeDir* LocalIndex::folder(const std::string& relative) const {
  std::lock_guard lock(folders_mutex_);
  return open_folder(cache_, folders_, relative);
}

ai::ModuleRecord LocalIndex::record_module(const std::string& compiler_dir,
                                           const std::string& module_name) const {
  sys::SafeDir compiler = sys::SafeDir::open(cache_.root() / compiler_dir);
  ModuleEntry inspected = cache_.inspect_module(compiler, module_name);
  if (!layout::is_complete(inspected.state)) {
    throw operational_error(compiler_dir + "/" + module_name + " is not complete (" +
                            std::string(layout::state_name(inspected.state)) + ")");
  }
  auto dir = compiler.open_subdir(module_name);
  if (!dir) throw operational_error(compiler_dir + "/" + module_name + " is not a folder");
  ai::ModuleRecord record{module_name, {}};
  collect_files(cache_, *dir, "", record.files);
  // What a reader of the index would refuse (a file libneuronxla never writes there) stays out,
  // so the entry stays readable everywhere.
  std::erase_if(record.files, [&](const ai::FileRecord& file) {
    return ai::file_name_problem(module_name, file.name).has_value();
  });
  if (record.files.size() > ai::kMaxFilesPerList) {
    throw operational_error(compiler_dir + "/" + module_name + " holds " +
                            std::to_string(record.files.size()) +
                            " files: the artifact index records at most " +
                            std::to_string(ai::kMaxFilesPerList) + " per folder");
  }
  std::sort(record.files.begin(), record.files.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return record;
}

ai::FileRecord LocalIndex::record_registry_file(const std::string& compiler_dir,
                                                const std::string& path) const {
  sys::SafeDir compiler = sys::SafeDir::open(cache_.root() / compiler_dir);
  auto parts = layout::split_path(path);
  auto dir = parent_of(compiler, parts);
  if (!dir) throw operational_error("registry file " + path + " is missing");
  auto size = present_size(cache_, *dir, parts.back());
  if (!size) throw operational_error("registry file " + path + " is missing or untrusted");
  return ai::FileRecord{path, *size,
                        sha256_of_file(cache_.file_to_read(dir->path() / parts.back()))};
}

bool LocalIndex::install_registry_file(const std::string& compiler_dir, const std::string& path,
                                       std::string_view content) const {
  if (!ai::is_safe_relative_path(path) ||
      !path.starts_with(std::string(layout::kRegistryDir) + "/")) {
    throw input_error("refusing to write registry file \"" + path + "\": not inside 0_REGISTRY");
  }
  sys::SafeDir root = sys::SafeDir::open_or_create(cache_.root());
  sys::SafeDir compiler = root.make_subdir(compiler_dir);
  auto parts = layout::split_path(path);
  std::string folder = path.substr(0, path.rfind('/'));
  sys::SafeDir dir = compiler.make_path(folder);
  if (dir.entry(parts.back())) return false;
  return dir.publish_file(parts.back(), content, true);
}

}  // namespace neuron_cache::local
