// libgit2: the commit a local model clone is at (its checkpoint_revision), and git blob ids,
// which the Hub reports as the oid of regular (non-LFS) files.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache {

// The 40-hex commit id of HEAD when `model_dir` is (inside) a git work tree, else nothing.
// Throws an operational Error when the repository exists but cannot be read (no commit yet,
// corrupted).
std::optional<std::string> head_commit(const std::filesystem::path& model_dir);

// git's blob id ("blob <size>\0<content>", SHA-1) of a file, streamed, and of bytes.
std::string git_blob_id_of_file(const std::filesystem::path& file);
std::string git_blob_id(std::string_view content);

}  // namespace neuron_cache
