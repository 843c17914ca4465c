// Exporting a configuration's artifacts as a small cache of its own, for build systems that want
// one folder per configuration (CMake targets, Bazel filegroups):
//   <export root>/<name>/neuronxcc-<version>/MODULE_.../<files>   symlinks into the local cache
//   <export root>/<name>/neuron-cache-entry.json                  the artifact index entry
// A program pointed at it with NEURON_COMPILE_CACHE_URL=<export root>/<name> finds exactly the
// configuration's NEFFs. Entries in the local cache never change once complete, so symlinks are
// safe and cost nothing. An export is replaced atomically, and left untouched when it already
// holds the same entry (build systems then see no change).
#pragma once

#include <filesystem>
#include <string>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/cache_tree.h"

namespace neuron_cache::local {

// Returns the export folder. Throws an operational Error when a listed file is missing locally.
std::filesystem::path export_configuration(const LocalCache& cache,
                                           const artifact_index::Entry& entry,
                                           const std::filesystem::path& export_root,
                                           const std::string& name);

// The file in the export that holds the entry.
inline constexpr const char* kExportEntryFile = "neuron-cache-entry.json";

}  // namespace neuron_cache::local
