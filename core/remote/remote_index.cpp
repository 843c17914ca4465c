#include "remote/remote_index.h"

#include "format/layout.h"

#include <fstream>
#include <iterator>

#include "error.h"
#include "format/digest.h"
#include "git/git_info.h"

namespace neuron_cache::remote {
namespace {

namespace ai = artifact_index;
namespace fs = std::filesystem;

// The Hub's oid of a file with this content: sha256 for LFS files, the git blob id otherwise.
bool matches(const hub::RemoteEntry& file, const std::string& content) {
  return file.is_lfs() ? sha256_hex(content) == file.lfs_sha256 : git_blob_id(content) == file.oid;
}

std::string oid_of(const hub::RemoteEntry& file) {
  return file.is_lfs() ? file.lfs_sha256 : file.oid;
}

}  // namespace

RemoteIndex RemoteIndex::open(hub::HubClient& client, const std::string& repo, fs::path copies) {
  RemoteIndex index(client, repo);
  if (!copies.empty()) {
    std::string folder = repo;
    for (char& ch : folder) ch = ch == '/' ? '~' : ch;
    index.copies_ = copies / folder;
  }
  index.revision_ = client.repo_info(repo).sha;
  for (auto& entry : client.list_tree(repo, std::string(ai::kRemoteDir), false, index.revision_)) {
    if (entry.is_directory) continue;
    if (auto version = ai::compiler_version_of_index(entry.path)) {
      index.files_.emplace(*version, std::move(entry));
    }
  }
  return index;
}

std::vector<std::string> RemoteIndex::compiler_versions() const {
  std::vector<std::string> versions;
  for (const auto& [version, file] : files_) versions.push_back(version);
  return versions;
}

const ai::IndexFile& RemoteIndex::index(const std::string& compiler_version) {
  if (auto it = loaded_.find(compiler_version); it != loaded_.end()) return it->second;
  ai::IndexFile index;
  if (files_.count(compiler_version)) {
    std::string path = ai::remote_index_path(compiler_version);
    auto text = read_copy(compiler_version);
    if (!text) {
      text = client_->read_file(repo_, path, revision_);
      if (text) keep_copy(compiler_version, *text);
    }
    if (text) index = ai::parse_index(*text, repo_ + "/" + path);
    problems_.insert(problems_.end(), index.problems.begin(), index.problems.end());
  }
  return loaded_.emplace(compiler_version, std::move(index)).first->second;
}

std::optional<std::string> RemoteIndex::read_copy(const std::string& compiler_version) const {
  if (copies_.empty()) return std::nullopt;
  const hub::RemoteEntry& file = files_.at(compiler_version);
  fs::path path = copies_ / layout::compiler_dir_name(compiler_version) / (oid_of(file) + ".json");
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!matches(file, text)) return std::nullopt;  // damaged: fetch it again
  return text;
}

void RemoteIndex::keep_copy(const std::string& compiler_version, const std::string& text) const {
  if (copies_.empty() || !matches(files_.at(compiler_version), text)) return;
  try {
    fs::path dir = copies_ / layout::compiler_dir_name(compiler_version);
    fs::remove_all(dir);  // older copies of this index are outdated
    fs::create_directories(dir);
    std::string name = oid_of(files_.at(compiler_version)) + ".json";
    fs::path temp = dir / ("." + name + ".tmp");
    std::ofstream(temp, std::ios::binary | std::ios::trunc) << text;
    fs::rename(temp, dir / name);
  } catch (const std::exception&) {
    // A copy only saves a download next time.
  }
}

const ai::Entry* RemoteIndex::find(const std::string& compiler_version, const std::string& key) {
  const ai::IndexFile& file = index(compiler_version);
  auto it = file.entries.find(key);
  return it == file.entries.end() ? nullptr : &it->second;
}

}  // namespace neuron_cache::remote
