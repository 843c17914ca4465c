// Mount points: a shared folder store is trusted to be the share when its root is one.
#pragma once

#include <filesystem>

namespace neuron_cache::sys {

// True when `path` is where a file system is mounted: its device differs from its parent's, or
// /proc/self/mountinfo names it (a bind mount of the same device). False when it cannot be told.
bool is_mount_point(const std::filesystem::path& path);

}  // namespace neuron_cache::sys
