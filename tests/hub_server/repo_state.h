// What the test Hub knows about a repo: its commits (each with its full file tree), branches,
// and the git ids the API exposes (blob ids, tree ids for folders, commit ids). Ids are real git
// object ids, so a client can check them with its own git blob hashing.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::hub_server {

struct FileEntry {
  bool lfs = false;
  std::string oid;  // git blob id of the content, or of the LFS pointer for LFS files
  uint64_t size = 0;
  std::string sha256;  // LFS files only
  uint64_t pointer_size() const;
};
using FileTree = std::map<std::string, FileEntry>;

struct Commit {
  std::string oid;
  std::string parent;  // empty for the first commit
  std::string title;
  std::string description;
  std::string author;
  int64_t time = 0;
  FileTree files;
};

struct Repo {
  std::string type;  // "model" or "dataset"
  std::string id;    // "namespace/name"
  bool is_private = false;
  int64_t created = 0;
  std::map<std::string, std::string> branches;  // "main", "refs/pr/1", ... -> commit id
  std::map<std::string, Commit> commits;
  int next_pr = 1;

  std::string key() const { return type + "/" + id; }
  std::string ns() const { return id.substr(0, id.find('/')); }
  // A branch, "HEAD" (main), or a full commit id; nullptr when unknown.
  const Commit* resolve(const std::string& revision) const;
  const Commit& head() const { return commits.at(branches.at("main")); }
};

// Records a commit with `files` on top of `parent` (empty: a root commit), moves `branch` to it.
const Commit& add_commit(Repo& repo, const std::string& branch, const std::string& parent,
                         FileTree files, const std::string& title, const std::string& description,
                         const std::string& author, int64_t time);

// Forgets the commits no branch reaches (after a super-squash).
void forget_unreachable(Repo& repo);

// The bytes the repo's reachable history holds, each file content once: as the Hub's
// usedStorage, what a deletion does not free until the history is squashed.
uint64_t used_storage(const Repo& repo);

struct TreeEntry {
  bool directory = false;
  std::string path;
  std::string oid;  // blob id, or git tree id for folders
  const FileEntry* file = nullptr;
};

// Folders and git tree ids derived from a commit's file list.
class TreeView {
 public:
  explicit TreeView(const FileTree& files);
  bool has_folder(const std::string& path) const { return tree_oids_.contains(path); }
  std::optional<TreeEntry> entry(const std::string& path) const;
  // Children of `folder` ("" is the root) sorted by name; recursive lists each folder's content
  // right after the folder.
  std::vector<TreeEntry> list(const std::string& folder, bool recursive) const;
  const std::string& root_oid() const { return tree_oids_.at(""); }

 private:
  std::string compute_tree_oid(const std::string& folder);
  void append(const std::string& folder, bool recursive, std::vector<TreeEntry>& out) const;

  const FileTree& files_;
  std::map<std::string, std::map<std::string, bool>> children_;  // folder -> name -> is folder
  std::map<std::string, std::string> tree_oids_;
};

// The most recent commit, reachable from `head`, that changed `path` (a file or a folder).
const Commit& last_commit_touching(const Repo& repo, const Commit& head, const std::string& path);

nlohmann::json repo_to_json(const Repo& repo);
Repo repo_from_json(const nlohmann::json& document);

// The .gitattributes the Hub puts in a new repo (HF's default list, plus *.neff).
const std::string& default_gitattributes();
// Whether `path` gets `filter=lfs` from this .gitattributes text (the last matching line wins).
bool lfs_tracked(std::string_view gitattributes, std::string_view path);
// Whether `path` is ignored by this .gitignore text (negations and folder patterns supported).
bool git_ignored(std::string_view gitignore, std::string_view path);

}  // namespace neuron_cache::hub_server
