#include "repo_state.h"

#include <algorithm>
#include <set>

#include "hash.h"
#include "text.h"

namespace neuron_cache::hub_server {
namespace {

using nlohmann::json;

std::string parent_folder(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join(const std::string& folder, const std::string& name) {
  return folder.empty() ? name : folder + "/" + name;
}

// What a path looked like in a commit: the blob id of a file, or every file below a folder.
std::string signature(const FileTree& files, const std::string& path) {
  if (auto it = files.find(path); it != files.end()) return "file:" + it->second.oid;
  std::string prefix = path.empty() ? "" : path + "/";
  std::string text;
  for (auto it = files.lower_bound(prefix); it != files.end() && it->first.starts_with(prefix);
       ++it) {
    text += it->first + "=" + it->second.oid + ";";
  }
  return text;
}

std::string commit_object(const Commit& commit, const std::string& tree_oid) {
  std::string identity = commit.author + " <" + commit.author + "@users.noreply.huggingface.co> " +
                         std::to_string(commit.time) + " +0000";
  std::string body = "tree " + tree_oid + "\n";
  if (!commit.parent.empty()) body += "parent " + commit.parent + "\n";
  body += "author " + identity + "\ncommitter " + identity + "\n\n" + commit.title + "\n";
  if (!commit.description.empty()) body += "\n" + commit.description + "\n";
  return body;
}

}  // namespace

uint64_t FileEntry::pointer_size() const {
  return lfs_pointer(sha256, size).size();
}

const Commit* Repo::resolve(const std::string& revision) const {
  std::string branch = revision == "HEAD" ? "main" : revision;
  if (auto it = branches.find(branch); it != branches.end()) return &commits.at(it->second);
  if (is_hex(revision, 40)) {
    if (auto it = commits.find(revision); it != commits.end()) return &it->second;
  }
  return nullptr;
}

namespace {

std::set<std::string> reachable(const Repo& repo) {
  std::set<std::string> out;
  for (const auto& [branch, oid] : repo.branches) {
    for (std::string at = oid; !at.empty() && out.insert(at).second;)
      at = repo.commits.at(at).parent;
  }
  return out;
}

}  // namespace

void forget_unreachable(Repo& repo) {
  std::set<std::string> keep = reachable(repo);
  std::erase_if(repo.commits, [&](const auto& item) { return keep.count(item.first) == 0; });
}

uint64_t used_storage(const Repo& repo) {
  std::map<std::string, uint64_t> contents;  // by blob id
  for (const auto& oid : reachable(repo)) {
    for (const auto& [path, file] : repo.commits.at(oid).files) contents[file.oid] = file.size;
  }
  uint64_t used = 0;
  for (const auto& [oid, size] : contents) used += size;
  return used;
}

const Commit& add_commit(Repo& repo, const std::string& branch, const std::string& parent,
                         FileTree files, const std::string& title, const std::string& description,
                         const std::string& author, int64_t time) {
  Commit commit;
  commit.parent = parent;
  commit.title = title;
  commit.description = description;
  commit.author = author;
  commit.time = time;
  commit.files = std::move(files);
  std::string tree_oid = TreeView(commit.files).root_oid();
  commit.oid = git_object_id("commit", commit_object(commit, tree_oid));
  // Two commits with the same parent, tree, message and second would collide; a test that
  // makes them quickly on two PR branches still needs distinct ids.
  while (repo.commits.contains(commit.oid)) {
    commit.time += 1;
    commit.oid = git_object_id("commit", commit_object(commit, tree_oid));
  }
  repo.branches[branch] = commit.oid;
  auto [it, inserted] = repo.commits.emplace(commit.oid, std::move(commit));
  return it->second;
}

TreeView::TreeView(const FileTree& files) : files_(files) {
  children_[""];
  for (const auto& [path, entry] : files) {
    std::string child = path;
    bool is_folder = false;
    while (true) {
      std::string folder = parent_folder(child);
      children_[folder][base_name(child)] = is_folder;
      if (folder.empty()) break;
      child = folder;
      is_folder = true;
    }
  }
  compute_tree_oid("");
}

std::string TreeView::compute_tree_oid(const std::string& folder) {
  // git orders tree entries by name, folders compared as if they ended with '/'.
  std::map<std::string, std::string> ordered;
  for (const auto& [name, is_folder] : children_.at(folder)) {
    std::string path = join(folder, name);
    std::string oid = is_folder ? compute_tree_oid(path) : files_.at(path).oid;
    ordered[is_folder ? name + "/" : name] =
        std::string(is_folder ? "40000 " : "100644 ") + name + '\0' + hex_to_bytes(oid);
  }
  std::string body;
  for (const auto& [key, item] : ordered) body += item;
  std::string oid = git_object_id("tree", body);
  tree_oids_[folder] = oid;
  return oid;
}

std::optional<TreeEntry> TreeView::entry(const std::string& path) const {
  if (auto it = files_.find(path); it != files_.end()) {
    return TreeEntry{false, path, it->second.oid, &it->second};
  }
  if (auto it = tree_oids_.find(path); it != tree_oids_.end() && !path.empty()) {
    return TreeEntry{true, path, it->second, nullptr};
  }
  return std::nullopt;
}

std::vector<TreeEntry> TreeView::list(const std::string& folder, bool recursive) const {
  std::vector<TreeEntry> out;
  append(folder, recursive, out);
  return out;
}

void TreeView::append(const std::string& folder, bool recursive,
                      std::vector<TreeEntry>& out) const {
  for (const auto& [name, is_folder] : children_.at(folder)) {
    std::string path = join(folder, name);
    out.push_back(*entry(path));
    if (is_folder && recursive) append(path, recursive, out);
  }
}

const Commit& last_commit_touching(const Repo& repo, const Commit& head, const std::string& path) {
  const Commit* current = &head;
  std::string wanted = signature(head.files, path);
  while (!current->parent.empty()) {
    const Commit& parent = repo.commits.at(current->parent);
    if (signature(parent.files, path) != wanted) break;
    current = &parent;
  }
  return *current;
}

json repo_to_json(const Repo& repo) {
  json commits = json::array();
  for (const auto& [oid, commit] : repo.commits) {
    json files = json::object();
    for (const auto& [path, entry] : commit.files) {
      files[path] = {{"lfs", entry.lfs}, {"oid", entry.oid}, {"size", entry.size}};
      if (entry.lfs) files[path]["sha256"] = entry.sha256;
    }
    commits.push_back({{"oid", oid},
                       {"parent", commit.parent},
                       {"title", commit.title},
                       {"description", commit.description},
                       {"author", commit.author},
                       {"time", commit.time},
                       {"files", files}});
  }
  return {{"type", repo.type},       {"id", repo.id},           {"private", repo.is_private},
          {"created", repo.created}, {"next_pr", repo.next_pr}, {"branches", repo.branches},
          {"commits", commits}};
}

Repo repo_from_json(const json& document) {
  Repo repo;
  repo.type = document.at("type").get<std::string>();
  repo.id = document.at("id").get<std::string>();
  repo.is_private = document.at("private").get<bool>();
  repo.created = document.at("created").get<int64_t>();
  repo.next_pr = document.at("next_pr").get<int>();
  repo.branches = document.at("branches").get<std::map<std::string, std::string>>();
  for (const auto& item : document.at("commits")) {
    Commit commit;
    commit.oid = item.at("oid").get<std::string>();
    commit.parent = item.at("parent").get<std::string>();
    commit.title = item.at("title").get<std::string>();
    commit.description = item.at("description").get<std::string>();
    commit.author = item.at("author").get<std::string>();
    commit.time = item.at("time").get<int64_t>();
    for (const auto& [path, file] : item.at("files").items()) {
      FileEntry entry;
      entry.lfs = file.at("lfs").get<bool>();
      entry.oid = file.at("oid").get<std::string>();
      entry.size = file.at("size").get<uint64_t>();
      entry.sha256 = file.value("sha256", "");
      commit.files[path] = entry;
    }
    repo.commits[commit.oid] = std::move(commit);
  }
  return repo;
}

const std::string& default_gitattributes() {
  static const std::string text = [] {
    // huggingface_hub's default list, plus *.neff (the NEFFs of a Neuron cache repo).
    static const char* kPatterns[] = {"*.7z",      "*.arrow",       "*.bin",
                                      "*.bz2",     "*.ckpt",        "*.ftz",
                                      "*.gz",      "*.h5",          "*.joblib",
                                      "*.lfs.*",   "*.mlmodel",     "*.model",
                                      "*.msgpack", "*.neff",        "*.npy",
                                      "*.npz",     "*.onnx",        "*.ot",
                                      "*.parquet", "*.pb",          "*.pickle",
                                      "*.pkl",     "*.pt",          "*.pth",
                                      "*.rar",     "*.safetensors", "saved_model/**/*",
                                      "*.tar.*",   "*.tar",         "*.tflite",
                                      "*.tgz",     "*.wasm",        "*.xz",
                                      "*.zip",     "*.zst",         "*tfevents*"};
    std::string out;
    for (const char* pattern : kPatterns) {
      out += std::string(pattern) + " filter=lfs diff=lfs merge=lfs -text\n";
    }
    return out;
  }();
  return text;
}

bool lfs_tracked(std::string_view gitattributes, std::string_view path) {
  bool tracked = false;
  for (const auto& raw : split(gitattributes, '\n')) {
    std::string line = raw;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t end = line.find_first_of(" \t", start);
    if (end == std::string::npos) continue;
    std::string pattern = line.substr(start, end - start);
    // gitattributes spells spaces in paths as [[:space:]].
    for (size_t at; (at = pattern.find("[[:space:]]")) != std::string::npos;) {
      pattern.replace(at, 11, " ");
    }
    if (!glob_match(pattern, path)) continue;
    std::string attributes = " " + line.substr(end) + " ";
    for (char& c : attributes) c = c == '\t' ? ' ' : c;
    if (attributes.find(" filter=lfs ") != std::string::npos) {
      tracked = true;
    } else if (attributes.find(" -filter ") != std::string::npos ||
               attributes.find(" !filter ") != std::string::npos ||
               attributes.find(" filter=") != std::string::npos) {
      tracked = false;
    }
  }
  return tracked;
}

bool git_ignored(std::string_view gitignore, std::string_view path) {
  bool ignored = false;
  for (const auto& raw : split(gitignore, '\n')) {
    std::string pattern = raw;
    while (!pattern.empty() && (pattern.back() == '\r' || pattern.back() == ' '))
      pattern.pop_back();
    if (pattern.empty() || pattern[0] == '#') continue;
    bool negate = pattern[0] == '!';
    if (negate) pattern.erase(0, 1);
    bool folder_only = !pattern.empty() && pattern.back() == '/';
    if (folder_only) pattern.pop_back();
    if (pattern.empty()) continue;
    // The path itself, or any folder above it.
    bool matched = !folder_only && glob_match(pattern, path);
    std::string_view prefix = path;
    while (!matched) {
      size_t slash = prefix.rfind('/');
      if (slash == std::string_view::npos) break;
      prefix = prefix.substr(0, slash);
      matched = glob_match(pattern, prefix);
    }
    if (matched) ignored = !negate;
  }
  return ignored;
}

}  // namespace neuron_cache::hub_server
