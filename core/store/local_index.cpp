#include "store/local_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>

#include "error.h"
#include "format/digest.h"

namespace neuron_cache {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    parts.push_back(path.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// The folder holding a '/'-path's last component, opened without following symlinks.
class Parent {
 public:
  Parent(const SafeDir& start, const std::vector<std::string>& parts) : start_(&start) {
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
  const SafeDir* operator->() const { return get(); }
  const SafeDir& operator*() const { return *get(); }

 private:
  const SafeDir* get() const { return owned_ ? &*owned_ : start_; }
  const SafeDir* start_;
  std::optional<SafeDir> owned_;
  bool found_ = true;
};

Parent parent_of(const SafeDir& start, const std::vector<std::string>& parts) {
  return Parent(start, parts);
}

// The size of a file or of a trusted symlink's target; nothing when absent or untrusted.
std::optional<uint64_t> present_size(const LocalCache& cache, const SafeDir& dir,
                                     const std::string& name) {
  auto entry = dir.entry(name);
  if (!entry) return std::nullopt;
  if (entry->type == NodeType::File) return entry->size;
  if (entry->type != NodeType::Symlink || !cache.link_is_trusted(dir, name)) return std::nullopt;
  std::error_code error;
  fs::path target = fs::canonical(dir.path() / name, error);
  if (error || !fs::is_regular_file(target, error)) return std::nullopt;
  return static_cast<uint64_t>(fs::file_size(target, error));
}

std::optional<SafeDir> open_root(const LocalCache& cache) {
  if (!cache.exists()) return std::nullopt;
  return SafeDir::open(cache.root());
}

std::string random_suffix() {
  std::random_device device;
  return std::to_string(getpid()) + "-" + std::to_string(device());
}

// Regular files and trusted symlinks (optimum-neuron links Hub downloads into the cache).
void collect_files(const LocalCache& cache, const SafeDir& dir, const std::string& prefix,
                   std::vector<ai::FileRecord>& out) {
  for (const auto& item : dir.list()) {
    std::string name = prefix.empty() ? item.name : prefix + "/" + item.name;
    if (item.type == NodeType::Directory) {
      if (auto sub = dir.open_subdir(item.name)) collect_files(cache, *sub, name, out);
    } else if (item.type == NodeType::File && !layout::is_lock_file(item.name)) {
      out.push_back({name, item.size, sha256_of_file(dir.path() / item.name)});
    } else if (item.type == NodeType::Symlink && !layout::is_lock_file(item.name)) {
      if (auto size = present_size(cache, dir, item.name)) {
        out.push_back({name, *size, sha256_of_file(fs::canonical(dir.path() / item.name))});
      }
    }
  }
}

}  // namespace

std::map<std::string, ai::Entry> LocalIndex::entries(const std::string& compiler_version,
                                                     std::vector<std::string>* problems) const {
  std::map<std::string, ai::Entry> out;
  auto root = open_root(cache_);
  if (!root) return out;
  std::string folder =
      std::string(ai::kLocalDir) + "/" + layout::compiler_dir_name(compiler_version);
  auto dir = parent_of(*root, split_path(folder + "/x"));
  if (!dir) return out;
  for (const auto& item : dir->list()) {
    if (item.type != NodeType::File || !item.name.ends_with(".json")) continue;
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

std::optional<ai::Entry> LocalIndex::find(const std::string& compiler_version,
                                          const std::string& key) const {
  auto root = open_root(cache_);
  if (!root) return std::nullopt;
  auto parts = split_path(ai::local_entry_path(compiler_version, key));
  auto dir = parent_of(*root, parts);
  if (!dir || !dir->entry(parts.back())) return std::nullopt;
  try {
    ai::Entry entry =
        ai::parse_entry(dir->read_small_file(parts.back()), (dir->path() / parts.back()).string());
    if (entry.key == key) return entry;
  } catch (const Error&) {
    // An unreadable entry is as good as none: the configuration is compiled or fetched again.
  }
  return std::nullopt;
}

void LocalIndex::write(const ai::Entry& entry) const {
  SafeDir root = SafeDir::open_or_create(cache_.root());
  auto parts = split_path(ai::local_entry_path(entry.inputs.compiler_version, entry.key));
  std::string folder;
  for (size_t i = 0; i + 1 < parts.size(); ++i) folder += (folder.empty() ? "" : "/") + parts[i];
  SafeDir dir = root.make_path(folder);
  std::string temp = "." + parts.back() + "." + random_suffix() + ".tmp";
  dir.write_new_file(temp, ai::serialize_entry(entry));
  dir.move_to(temp, dir, parts.back(), false);
  dir.sync();
}

bool LocalIndex::module_complete(const std::string& compiler_dir,
                                 const ai::ModuleRecord& module) const {
  auto root = open_root(cache_);
  if (!root) return false;
  auto compiler = root->open_subdir(compiler_dir);
  if (!compiler) return false;
  auto module_dir = compiler->open_subdir(module.name);
  if (!module_dir) return false;
  if (cache_.inspect_module(*compiler, module.name).state != layout::EntryState::Success)
    return false;
  for (const auto& file : module.files) {
    auto parts = split_path(file.name);
    auto dir = parent_of(*module_dir, parts);
    if (!dir) return false;
    auto size = present_size(cache_, *dir, parts.back());
    if (!size || *size != file.size) return false;
  }
  return true;
}

bool LocalIndex::registry_file_present(const std::string& compiler_dir,
                                       const ai::FileRecord& file) const {
  auto root = open_root(cache_);
  if (!root) return false;
  auto compiler = root->open_subdir(compiler_dir);
  if (!compiler) return false;
  auto parts = split_path(file.name);
  auto dir = parent_of(*compiler, parts);
  return dir && present_size(cache_, *dir, parts.back()).has_value();
}

ai::ModuleRecord LocalIndex::record_module(const std::string& compiler_dir,
                                           const std::string& module_name) const {
  SafeDir compiler = SafeDir::open(cache_.root() / compiler_dir);
  ModuleEntry inspected = cache_.inspect_module(compiler, module_name);
  if (inspected.state != layout::EntryState::Success) {
    throw operational_error(compiler_dir + "/" + module_name + " is not complete (" +
                            std::string(layout::state_name(inspected.state)) + ")");
  }
  auto dir = compiler.open_subdir(module_name);
  if (!dir) throw operational_error(compiler_dir + "/" + module_name + " is not a folder");
  ai::ModuleRecord record{module_name, {}};
  collect_files(cache_, *dir, "", record.files);
  std::sort(record.files.begin(), record.files.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return record;
}

ai::FileRecord LocalIndex::record_registry_file(const std::string& compiler_dir,
                                                const std::string& path) const {
  SafeDir compiler = SafeDir::open(cache_.root() / compiler_dir);
  auto parts = split_path(path);
  auto dir = parent_of(compiler, parts);
  if (!dir) throw operational_error("registry file " + path + " is missing");
  auto size = present_size(cache_, *dir, parts.back());
  if (!size) throw operational_error("registry file " + path + " is missing or untrusted");
  return ai::FileRecord{path, *size, sha256_of_file(fs::canonical(dir->path() / parts.back()))};
}

bool LocalIndex::install_registry_file(const std::string& compiler_dir, const std::string& path,
                                       std::string_view content) const {
  if (!ai::is_safe_relative_path(path) ||
      !path.starts_with(std::string(layout::kRegistryDir) + "/")) {
    throw input_error("refusing to write registry file \"" + path + "\": not inside 0_REGISTRY");
  }
  SafeDir root = SafeDir::open_or_create(cache_.root());
  SafeDir compiler = root.make_subdir(compiler_dir);
  auto parts = split_path(path);
  std::string folder = path.substr(0, path.rfind('/'));
  SafeDir dir = compiler.make_path(folder);
  if (dir.entry(parts.back())) return false;
  std::string temp = "." + parts.back() + "." + random_suffix() + ".tmp";
  dir.write_new_file(temp, content);
  bool moved = dir.move_to(temp, dir, parts.back(), true);
  if (!moved) dir.remove_file(temp);
  return moved;
}

}  // namespace neuron_cache
