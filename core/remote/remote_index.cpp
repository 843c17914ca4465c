#include "remote/remote_index.h"

#include <unistd.h>

#include "format/layout.h"

#include <fstream>
#include <iterator>
#include <sstream>

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

// The listing of neuron-cache-index/ at a commit never changes: with `copies`, the last one is
// kept there (listing.json), so a run against an unchanged repo asks only for its head commit.
// Like the index copies it is as trusted as the cache root it sits in.
std::optional<std::vector<hub::RemoteEntry>> read_listing(const fs::path& file,
                                                          const std::string& revision) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object() || json.value("revision", "") != revision) return std::nullopt;
  if (!json.contains("entries") || !json["entries"].is_array()) return std::nullopt;
  std::vector<hub::RemoteEntry> entries;
  for (const auto& item : json["entries"]) {
    if (!item.is_object()) return std::nullopt;
    entries.push_back(hub::parse_entry(item));
  }
  return entries;
}

void keep_listing(const fs::path& file, const std::string& revision,
                  const std::vector<hub::RemoteEntry>& entries) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& entry : entries) {
    nlohmann::json item = {{"path", entry.path},
                           {"type", entry.is_directory ? "directory" : "file"},
                           {"size", entry.size},
                           {"oid", entry.oid}};
    if (entry.is_lfs()) item["lfs"] = {{"oid", entry.lfs_sha256}, {"size", entry.size}};
    items.push_back(std::move(item));
  }
  try {
    fs::create_directories(file.parent_path());
    fs::path temp = file;
    temp += "." + std::to_string(getpid()) + ".tmp";  // two runs may keep it at once
    std::ofstream(temp, std::ios::binary | std::ios::trunc)
        << nlohmann::json({{"revision", revision}, {"entries", items}}).dump();
    fs::rename(temp, file);
  } catch (const std::exception&) {
    // A kept listing only saves a request next time.
  }
}

std::vector<hub::RemoteEntry> list_index_folder(hub::HubClient& client, const std::string& repo,
                                                const std::string& revision,
                                                const fs::path& copies) {
  fs::path file = copies.empty() ? fs::path() : copies / "listing.json";
  if (!file.empty()) {
    if (auto kept = read_listing(file, revision)) return *kept;
  }
  auto entries = client.list_tree(repo, std::string(ai::kRemoteDir), false, revision);
  if (!file.empty()) keep_listing(file, revision, entries);
  return entries;
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
  for (auto& entry : list_index_folder(client, repo, index.revision_, index.copies_)) {
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
  std::ostringstream text;  // in bulk: a character iterator costs ms on a large index
  text << in.rdbuf();
  if (!matches(file, text.str())) return std::nullopt;  // damaged: fetch it again
  return text.str();
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
