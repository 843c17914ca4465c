// The local side of the artifact index (format/artifact_index.h): one entry file per key under
// <root>/.cache/huggingface/neuron-cache-index/, and the checks that tell whether the MODULE_
// folders an entry lists are complete in the local cache.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/cache_tree.h"

namespace neuron_cache::local {

class LocalIndex {
 public:
  explicit LocalIndex(const LocalCache& cache) : cache_(cache) {}

  // Every readable entry of one compiler version; unreadable files are reported in `problems`.
  std::map<std::string, artifact_index::Entry> entries(const std::string& compiler_version,
                                                       std::vector<std::string>* problems) const;
  // The compiler versions that have an entry folder (whether or not it holds entries).
  std::vector<std::string> compiler_versions() const;
  std::optional<artifact_index::Entry> find(const std::string& compiler_version,
                                            const std::string& key) const;
  // find() for a key the caller made from `inputs`: an entry holding those inputs is not hashed
  // again (artifact_index::KnownKey).
  std::optional<artifact_index::Entry> find(const cache_key::KeyInputs& inputs,
                                            const std::string& key) const;
  // Writes (or replaces) the entry atomically: a reader sees the old file or the new one.
  void write(const artifact_index::Entry& entry) const;

  // Whether the module is SUCCESS locally (a traced export: present) and holds every listed
  // file with its listed size.
  // Costs one openat and one fstatat per listed file (no listing, no read).
  bool module_complete(const std::string& compiler_dir,
                       const artifact_index::ModuleRecord& module) const;
  // Whether the registry file exists locally (as a file or a trusted symlink).
  bool registry_file_present(const std::string& compiler_dir,
                             const artifact_index::FileRecord& file) const;
  // What an entry still lacks locally: the files (and their bytes) of its incomplete modules and
  // of its missing registry files. Nothing missing: the entry is complete.
  struct Missing {
    size_t files = 0;
    uint64_t bytes = 0;
  };
  Missing missing(const artifact_index::Entry& entry) const;

  // The record of a local SUCCESS or TRACED module: every regular file with its size and
  // sha256, '/'-paths for sub-folders (lock files left out). Throws an operational Error when
  // the module is not complete.
  artifact_index::ModuleRecord record_module(const std::string& compiler_dir,
                                             const std::string& module_name) const;
  // The record of one registry file ('/'-path relative to the compiler folder).
  artifact_index::FileRecord record_registry_file(const std::string& compiler_dir,
                                                  const std::string& path) const;

  // Writes a registry file ('/'-path relative to the compiler folder) unless one is there;
  // returns false when it was already there. Atomic: a reader never sees half a file.
  bool install_registry_file(const std::string& compiler_dir, const std::string& path,
                             std::string_view content) const;

  const LocalCache& cache() const { return cache_; }

 private:
  // A folder below the root ('/'-path, "" for the root), or null when missing. Each one is
  // opened once and kept while this index lives, so a plan of many entries opens the compiler
  // and index folders once, not once per entry. Only folders found are kept: one created later
  // is still seen.
  const sys::SafeDir* folder(const std::string& relative) const;
  std::optional<artifact_index::Entry> read_entry(const std::string& compiler_version,
                                                  const std::string& key,
                                                  const artifact_index::KnownKey* known) const;

  const LocalCache& cache_;
  mutable std::mutex folders_mutex_;
  mutable std::map<std::string, sys::SafeDir> folders_;
};

}  // namespace neuron_cache::local
