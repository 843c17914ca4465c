#include "blob_store.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "hash.h"

namespace neuron_cache::hub_server {

namespace fs = std::filesystem;

namespace {

std::string unique_name() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

void write_file_atomically(const fs::path& path, std::string_view content) {
  fs::create_directories(path.parent_path());
  fs::path temp = path;
  temp += ".tmp-" + unique_name();
  {
    std::ofstream out(temp, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) throw std::runtime_error("cannot write " + temp.string() + ": is the disk full?");
  }
  fs::rename(temp, path);
}

BlobStore::BlobStore(const fs::path& root) : root_(root) {
  std::error_code error;
  fs::remove_all(root_ / "tmp", error);  // uploads cut short by a previous run
  for (const char* folder : {"lfs", "git", "parts", "tmp"}) fs::create_directories(root_ / folder);
}

fs::path BlobStore::lfs_path(const std::string& sha256) const {
  return root_ / "lfs" / sha256;
}

std::optional<uint64_t> BlobStore::lfs_size(const std::string& sha256) const {
  std::error_code error;
  auto size = fs::file_size(lfs_path(sha256), error);
  if (error) return std::nullopt;
  return size;
}

void BlobStore::install_lfs(const fs::path& temp, const std::string& sha256) {
  fs::rename(temp, lfs_path(sha256));
}

fs::path BlobStore::git_path(const std::string& oid) const {
  return root_ / "git" / oid;
}

std::string BlobStore::put_git(std::string_view content) {
  std::string oid = git_blob_id(content);
  if (!fs::exists(git_path(oid))) write_file_atomically(git_path(oid), content);
  return oid;
}

std::string BlobStore::read_git(const std::string& oid) const {
  std::ifstream in(git_path(oid), std::ios::binary);
  if (!in) throw std::runtime_error("blob " + oid + " is missing from " + root_.string());
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

fs::path BlobStore::part_path(const std::string& sha256, int part) const {
  return root_ / "parts" / sha256 / std::to_string(part);
}

void BlobStore::drop_parts(const std::string& sha256) const {
  std::error_code error;
  fs::remove_all(root_ / "parts" / sha256, error);
}

fs::path BlobStore::new_temp() const {
  return root_ / "tmp" / unique_name();
}

}  // namespace neuron_cache::hub_server
