// Reading the local cache tree: compiler folders, MODULE_ entries with their state, and the
// registry files of every generation. Nothing here writes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "format/layout.h"
#include "format/registry.h"
#include "store/safe_dir.h"

namespace neuron_cache {

struct ModuleEntry {
  std::string compiler_dir;  // "neuronxcc-<version>"
  std::string name;          // "MODULE_..."
  layout::ModuleName module;
  layout::EntryState state = layout::EntryState::Empty;
  layout::EntryFiles files;
  uint64_t size_bytes = 0;  // regular files only, as optimum-neuron counts
  std::vector<std::string> file_names;
  std::vector<std::string> untrusted_links;  // symlinks pointing outside the trusted places
  std::string flags_file;                    // compile_flags.json, compile_flags.txt or empty
  std::string flags_file_key;                // MD5[:8] of the flags file bytes
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

struct CacheTree {
  std::filesystem::path root;
  bool exists = false;
  std::string installed_compiler;  // empty when unknown
  std::vector<CompilerDir> compilers;
  std::vector<std::string> skipped;  // symlinked folders and other things not looked into
};

// The state of `module_dir`, the folder of MODULE_ entry `module_name` (its name decides whether
// it may be a traced export; the folder may be a staged copy under another name), from its
// regular files alone (symlinks count as absent): what a writer checks in a folder it or its
// command wrote.
layout::EntryState state_of_written_folder(const SafeDir& module_dir, std::string_view module_name);

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
  ModuleEntry inspect_module(const SafeDir& compiler_dir, const std::string& name) const;
  std::vector<RegistryFile> scan_registry(const SafeDir& compiler_dir) const;

  // Whether the symlink `name` in `dir` resolves to a place reads may go.
  bool link_is_trusted(const SafeDir& dir, const std::string& name) const;

 private:
  std::filesystem::path root_;
  std::vector<std::filesystem::path> trusted_;
};

}  // namespace neuron_cache
