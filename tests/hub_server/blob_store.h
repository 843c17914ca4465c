// Content-addressed file storage under <data>/blobs: LFS objects by sha256, regular files by git
// blob id, multipart parts while an upload is in progress. Every file appears atomically
// (written to <data>/blobs/tmp, then renamed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache::hub_server {

class BlobStore {
 public:
  explicit BlobStore(const std::filesystem::path& root);

  std::filesystem::path lfs_path(const std::string& sha256) const;
  // The size of a stored LFS object, nothing when it is not stored.
  std::optional<uint64_t> lfs_size(const std::string& sha256) const;
  // Moves a fully written and verified temp file into place as LFS object `sha256`.
  void install_lfs(const std::filesystem::path& temp, const std::string& sha256);

  std::filesystem::path git_path(const std::string& oid) const;
  // Stores a regular file; returns its git blob id.
  std::string put_git(std::string_view content);
  std::string read_git(const std::string& oid) const;

  std::filesystem::path part_path(const std::string& sha256, int part) const;
  void drop_parts(const std::string& sha256) const;

  // A fresh path under the temp folder (same filesystem as the blobs, so rename is atomic).
  std::filesystem::path new_temp() const;

 private:
  std::filesystem::path root_;
};

// Writes `content` to `path` through a temp file and a rename.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace neuron_cache::hub_server
