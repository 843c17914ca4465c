// libgit2: the commit a local model clone is at (its checkpoint_revision). Git blob ids are
// hashes like the others: format/digest.h.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace neuron_cache::git {

// The 40-hex commit id of HEAD when `model_dir` is (inside) a git work tree, else nothing.
// Throws an operational Error when the repository exists but cannot be read (no commit yet,
// corrupted).
std::optional<std::string> head_commit(const std::filesystem::path& model_dir);

}  // namespace neuron_cache::git
