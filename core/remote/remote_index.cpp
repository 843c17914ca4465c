#include "remote/remote_index.h"

#include "error.h"

namespace neuron_cache::remote {

namespace ai = artifact_index;

RemoteIndex RemoteIndex::open(hub::HubClient& client, const std::string& repo) {
  RemoteIndex index(client, repo);
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
    auto text = client_->read_file(repo_, path, revision_);
    if (text) index = ai::parse_index(*text, repo_ + "/" + path);
    problems_.insert(problems_.end(), index.problems.begin(), index.problems.end());
  }
  return loaded_.emplace(compiler_version, std::move(index)).first->second;
}

const ai::Entry* RemoteIndex::find(const std::string& compiler_version, const std::string& key) {
  const ai::IndexFile& file = index(compiler_version);
  auto it = file.entries.find(key);
  return it == file.entries.end() ? nullptr : &it->second;
}

}  // namespace neuron_cache::remote
