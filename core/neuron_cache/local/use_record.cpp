#include "neuron_cache/local/use_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <map>
#include <optional>

#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {
namespace {

// The record folder of one compiler folder, made when `make`; nothing when it is missing (or a
// symlink: a record is never written through one).
std::optional<sys::SafeDir> record_folder(const std::filesystem::path& cache_root,
                                          const std::string& compiler, bool make) {
  // A compiler folder's name, never a path of its own.
  if (!layout::compiler_version_of(compiler) || compiler.find('/') != std::string::npos) {
    return std::nullopt;
  }
  std::optional<sys::SafeDir> root;
  if (make) {
    root = sys::SafeDir::open(cache_root).make_path(layout::kUseRecordDir);
    return root->make_subdir(compiler);
  }
  root = sys::SafeDir::open(cache_root).open_path(layout::kUseRecordDir);
  if (!root) return std::nullopt;
  return root->open_subdir(compiler);
}

bool is_module_name(const std::string& name) {
  return name.starts_with(layout::kModulePrefix) && name.find('/') == std::string::npos;
}

void touch(const sys::SafeDir& folder, const std::string& name) {
  // One call for an entry recorded before (the common case of a warm run): mtime and atime now.
  if (utimensat(folder.fd(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0) return;
  if (errno != ENOENT) return;
  int fd = openat(folder.fd(), name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

}  // namespace

namespace {

// Calls `act` with each entry's record folder (made when `create`) and the entry's name; a folder
// that cannot be opened or made is skipped for the rest of the entries (records are a hint).
void each_record(const std::filesystem::path& cache_root, const std::vector<EntryName>& entries,
                 bool create, const std::function<void(sys::SafeDir&, const std::string&)>& act) {
  std::map<std::string, std::optional<sys::SafeDir>> folders;
  for (const auto& [compiler, module] : entries) {
    if (!is_module_name(module)) continue;
    try {
      auto found = folders.find(compiler);
      if (found == folders.end()) {
        found = folders.emplace(compiler, record_folder(cache_root, compiler, create)).first;
      }
      if (found->second) act(*found->second, module);
    } catch (const std::exception&) {
      folders[compiler] = std::nullopt;
    }
  }
}

}  // namespace

void record_use(const std::filesystem::path& cache_root, const std::vector<EntryName>& entries) {
  // Not writable: the mtime fallback stands.
  each_record(cache_root, entries, true, touch);
}

std::map<EntryName, double> read_use_records(const std::filesystem::path& cache_root) {
  std::map<EntryName, double> out;
  std::optional<sys::SafeDir> root;
  try {
    root = sys::SafeDir::open(cache_root).open_path(layout::kUseRecordDir);
  } catch (const Error&) {
    return out;
  }
  if (!root) return out;
  for (const auto& compiler : root->list()) {
    if (compiler.type != sys::NodeType::Directory) continue;
    std::optional<sys::SafeDir> folder = root->open_subdir(compiler.name);
    if (!folder) continue;
    for (const auto& record : folder->list()) {
      if (record.type == sys::NodeType::File && is_module_name(record.name)) {
        out[{compiler.name, record.name}] = record.mtime;
      }
    }
  }
  return out;
}

void forget_use(const std::filesystem::path& cache_root, const std::vector<EntryName>& entries) {
  // A stale record only costs a listing entry.
  each_record(cache_root, entries, false, [](sys::SafeDir& folder, const std::string& module) {
    unlinkat(folder.fd(), module.c_str(), 0);
  });
}

}  // namespace neuron_cache::local
