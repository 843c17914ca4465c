// Helpers shared by the staging caches (capture.cpp) and the seeded views (seed_view.cpp), which
// all live in the cache root's work area.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::compile {

// Below the cache root: same filesystem as the entries (hard links, atomic renames), and a path
// that neither synchronize nor optimum-cli's upload_folder publishes.
inline constexpr std::string_view kWorkDir = ".cache/huggingface/neuron-cache-work";
// Seeded views are kept between runs (seed_view.h); other work folders live for one run.
inline constexpr std::string_view kViewPrefix = "view-";
// Written when a view is given back; its age tells how long the view has been unused.
inline constexpr const char* kViewStateFile = ".state";

// A neuronxcc-<version> folder (not a symlink to one).
bool is_compiler_dir(const sys::DirEntry& item);

// Deletes the staging caches of <root>/.cache/huggingface/neuron-cache-work whose owner is gone
// (their flock is free), and seeded views unused for a week (they hold hard links to entries
// that may since have left the cache). Returns how many were removed.
size_t remove_abandoned_work(const std::filesystem::path& cache_root);

}  // namespace neuron_cache::compile
