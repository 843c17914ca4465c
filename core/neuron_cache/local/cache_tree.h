// Reading the local cache tree: compiler folders, MODULE_ entries with their state, and the
// registry files of every generation. Nothing here writes.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {

struct ModuleEntry {
  std::string compiler_dir;  // "neuronxcc-<version>"
  std::string name;          // "MODULE_..."
  layout::ModuleName module;
  layout::EntryState state = layout::EntryState::Empty;
  layout::EntryFiles files;
  uint64_t size_bytes = 0;  // regular files only, as optimum-neuron counts
  // The newest mtime (seconds since the epoch) of what the folder holds at its top but lock
  // files: when it was last written, not read (atime is not kept on relatime and noatime mounts).
  double newest_mtime = 0;
  std::vector<std::string> file_names;
  std::vector<std::string> untrusted_links;  // symlinks pointing outside the trusted places
  std::string flags_file;                    // compile_flags.json, compile_flags.txt or empty
  std::string flags_file_key;                // MD5[:8] of the flags file bytes (inspect only)
  std::string hlo_file;                      // model.hlo_module.pb, model.hlo.pb or empty
};

struct RegistryFile {
  std::string path;  // relative to the compiler folder
  bool is_link = false;
  std::optional<registry::Record> record;  // nothing when unreadable
  std::string problem;                     // why it could not be read
};

struct CompilerDir {
  std::string name;
  std::string version;
  bool current = false;  // matches the installed compiler (prefix rule)
  std::vector<ModuleEntry> modules;
  std::vector<RegistryFile> registry;
  uint64_t size_bytes = 0;  // MODULE_ entries only, as optimum-neuron counts
};

// Registry symlinks that do not resolve inside the cache as they are. optimum-neuron writes its
// registry aliases as absolute links, so a cache copied or moved elsewhere keeps links into its
// old place.
struct ForeignLinks {
  // Old root -> how many links into its layout are read from the same place below this root.
  std::map<std::string, size_t> relocated;
  // Links (relative to the root) that lead out of the cache and are never followed.
  std::vector<std::string> outside;
};

// What plan and status say about `links`, one line each; nothing when there is nothing to say.
std::vector<std::string> describe_foreign_links(const ForeignLinks& links,
                                                const std::filesystem::path& root);

struct CacheTree {
  std::filesystem::path root;
  bool exists = false;
  std::string installed_compiler;  // empty when unknown
  std::vector<CompilerDir> compilers;
  std::vector<std::string> skipped;  // symlinked folders and other things not looked into
  ForeignLinks foreign_links;        // of the registries scanned
};

// The size of a cache as status shows it and cleanup --max-size bounds it: the MODULE_ folders
// of every compiler version, whatever their state (regular files only, as optimum-neuron counts).
uint64_t total_size(const CacheTree& tree);

// The state of `module_dir`, the folder of MODULE_ entry `module_name` (its name decides whether
// it may be a traced export; the folder may be a staged copy under another name), from its
// regular files alone (symlinks count as absent): what a writer checks in a folder it or its
// command wrote.
layout::EntryState state_of_written_folder(const sys::SafeDir& module_dir,
                                           std::string_view module_name);

// Where a symlink leads, as LocalCache::resolve_link finds it.
struct LinkTarget {
  std::filesystem::path path;  // real: no symlink in it
  sys::NodeType type = sys::NodeType::Other;
  uint64_t size = 0;  // of a regular file
  // For a link into another root's layout, read below this root instead: that old root.
  std::optional<std::filesystem::path> moved_from;
};

// One run's view of a cache. Resolving a symlink reads the real path of the folders on its way;
// those are resolved once per LocalCache (one per run) and kept, as is whether an old root's
// links are read below this root, so a cache copied with its absolute links costs one readlink
// and one lstat per link read, not a walk of every component of its path.
class LocalCache {
 public:
  // Symlinks inside the cache are followed for reading only when they resolve inside the root or
  // inside one of `trusted_link_roots` (the Hugging Face file cache, where optimum-neuron links
  // downloaded NEFFs from).
  explicit LocalCache(std::filesystem::path root,
                      std::vector<std::filesystem::path> trusted_link_roots = {});

  const std::filesystem::path& root() const { return root_; }
  bool exists() const;

  CacheTree scan(const std::string& installed_compiler, bool with_registry = true) const;
  // With `with_flags_key`, also reads the flags file for flags_file_key (inspect shows it); status,
  // cleanup and seeding do without that read (7 system calls per folder).
  ModuleEntry inspect_module(const sys::SafeDir& compiler_dir, const std::string& name,
                             bool with_flags_key = false) const;
  std::vector<RegistryFile> scan_registry(const sys::SafeDir& compiler_dir) const;

  // Where reading the symlink `name` in `dir` goes: its target when that is inside the root or
  // a trusted place; for an absolute link into another root's layout (".../neuronxcc-<v>/
  // 0_REGISTRY/..." or ".../neuronxcc-<v>/MODULE_..."), left by a copy or move of the cache, the
  // same place below this root when it is there. Nothing otherwise: a link is never followed out
  // of those places.
  std::optional<std::filesystem::path> link_target(const sys::SafeDir& dir,
                                                   const std::string& name) const;
  // link_target with what is there (its type, its size) and whether the link was read below
  // this root instead of where it points.
  std::optional<LinkTarget> resolve_link(const sys::SafeDir& dir, const std::string& name) const;
  // `file` (below the root) itself, or where link_target reads it when it is a symlink; throws
  // for a link reads may not follow.
  std::filesystem::path file_to_read(const std::filesystem::path& file) const;
  // Whether the symlink `name` in `dir` resolves to a place reads may go (link_target).
  bool link_is_trusted(const sys::SafeDir& dir, const std::string& name) const;
  // The registry links of `compiler_dir` that link_target reads elsewhere than they point, or not
  // at all (their paths start with the compiler folder's name).
  ForeignLinks foreign_registry_links(const sys::SafeDir& compiler_dir) const;

 private:
  // Whether reads may go to the real path `real` (inside the root or a trusted place).
  bool allowed(const std::filesystem::path& real) const;
  // Where `path` leads, through the real path of its folder (real_folder).
  std::optional<LinkTarget> resolve(const std::filesystem::path& path) const;
  // `below` (a path in a cache's layout) below this root, when it leads nowhere else.
  std::optional<LinkTarget> relocated(const std::filesystem::path& below) const;
  // The real path of `folder`, kept once found: a folder made later is still seen.
  std::optional<std::filesystem::path> real_folder(const std::filesystem::path& folder) const;
  // Whether links into `old_root`'s layout are read below this root: it does not lead inside the
  // root or a trusted place. Kept once the root exists.
  bool is_foreign_root(const std::filesystem::path& old_root) const;

  std::filesystem::path root_;
  std::vector<std::filesystem::path> trusted_;
  mutable std::mutex memo_mutex_;
  mutable std::map<std::filesystem::path, std::filesystem::path> real_folders_;
  mutable std::map<std::filesystem::path, bool> foreign_roots_;
};

}  // namespace neuron_cache::local
