// Identity, repo management and listings: whoami-v2, repos/create and delete, repo info, tree,
// paths-info, commits and refs.
#include <algorithm>
#include <ctime>
#include <optional>
#include <set>

#include "hash.h"
#include "server.h"
#include "text.h"

namespace neuron_cache::hub_server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json parse_json(const std::string& body) {
  json document = json::parse(body, nullptr, false);
  if (document.is_discarded()) throw HttpError{400, "the request body is not valid JSON", ""};
  return document;
}

std::string fake_id(const std::string& kind, const std::string& name) {
  return sha256_hex(kind + ":" + name).substr(0, 24);
}

// What `expand` may name (hub-docs api.md, GET /api/models): anything else is a 400, as on the
// Hub. Properties this server does not model are left out of its answers, as for a repo that
// does not have them.
const std::set<std::string>& expandable_properties() {
  static const std::set<std::string> names = [] {
    auto words = split(
        "author baseModels cardData childrenModelCount config createdAt disabled downloads "
        "downloadsAllTime gated gguf inference inferenceProviderMapping lastModified library_name "
        "likes mask_token model-index pipeline_tag private resourceGroup safetensors sha siblings "
        "spaces tags transformersInfo trendingScore usedStorage widgetData xetEnabled",
        ' ');
    return std::set<std::string>(words.begin(), words.end());
  }();
  return names;
}

// The properties a repo info request asks for: huggingface_hub and the JS client's modelInfo
// repeat `expand=`, its repoExists sends `expand[]=`. Nothing when neither is given: then every
// property is answered, siblings included.
std::optional<std::set<std::string>> requested_properties(const Call& call) {
  std::vector<std::string> names = call.params("expand");
  for (auto& name : call.params("expand[]")) names.push_back(std::move(name));
  if (names.empty()) return std::nullopt;
  for (const auto& name : names) {
    if (!expandable_properties().count(name)) {
      throw HttpError{400, "\"expand\" cannot be \"" + name + "\": not a property of a repo", ""};
    }
  }
  return std::set<std::string>(names.begin(), names.end());
}

// The file list of a repo info answer: every file of the commit, with `blobs` its size and ids.
json siblings(const Commit& commit, bool blobs) {
  json out = json::array();
  for (const auto& [path, file] : commit.files) {
    json sibling = {{"rfilename", path}};
    if (blobs) {
      sibling["size"] = file.size;
      sibling["blobId"] = file.oid;
      if (file.lfs) {
        sibling["lfs"] = {
            {"sha256", file.sha256}, {"size", file.size}, {"pointerSize", file.pointer_size()}};
      }
    }
    out.push_back(std::move(sibling));
  }
  return out;
}

size_t cursor_offset(const Call& call, size_t total) {
  auto cursor = call.param("cursor");
  if (!cursor) return 0;
  auto decoded = base64_decode(*cursor);
  size_t offset = 0;
  try {
    if (!decoded || !decoded->starts_with("offset:")) throw std::invalid_argument("cursor");
    offset = std::stoull(decoded->substr(7));
  } catch (const std::exception&) {
    throw HttpError{400, "invalid cursor: follow the Link header as given", ""};
  }
  if (offset > total) throw HttpError{400, "cursor past the end of the listing", ""};
  return offset;
}

// The namespace and name of a repos/create or repos/delete body ("organization" null or absent
// means the caller's own namespace; a "name" with a '/' carries its namespace).
std::string body_repo_id(const json& body, const Identity& who) {
  std::string name =
      body.contains("name") && body["name"].is_string() ? body["name"].get<std::string>() : "";
  std::string ns;
  if (body.contains("organization") && body["organization"].is_string()) {
    ns = body["organization"].get<std::string>();
  }
  if (ns.empty() && name.find('/') != std::string::npos) {
    ns = name.substr(0, name.find('/'));
    name = name.substr(name.find('/') + 1);
  }
  if (ns.empty() && who.user != nullptr) ns = who.user->name;
  std::string id = ns + "/" + name;
  if (!valid_repo_id(id)) {
    throw HttpError{400,
                    "Invalid repo name \"" + id +
                        "\": use letters, digits, '-', '_' and '.', at most 96 characters, no "
                        "'--' or '..'",
                    ""};
  }
  return id;
}

std::string body_repo_type(const json& body) {
  std::string type =
      body.contains("type") && body["type"].is_string() ? body["type"].get<std::string>() : "model";
  if (type != "model" && type != "dataset") {
    throw HttpError{400, "the test Hub server only stores model and dataset repos, not " + type,
                    ""};
  }
  return type;
}

}  // namespace

void Server::whoami(Call& call) {
  Identity who = identify(call, ErrorStyle::Hub);
  if (who.user == nullptr) {
    throw HttpError{401, "Invalid credentials in Authorization header: no token was sent", ""};
  }
  const User& user = *who.user;
  json orgs = json::array();
  for (const auto& org : user.orgs) {
    orgs.push_back({{"type", "org"},
                    {"id", fake_id("org", org)},
                    {"name", org},
                    {"fullname", org},
                    {"email", nullptr},
                    {"canPay", false},
                    {"avatarUrl", ""},
                    {"periodEnd", nullptr},
                    {"roleInOrg", "write"}});
  }
  json access_token = {{"displayName", who.token->display_name},
                       {"role", who.token->role},
                       {"createdAt", "2024-01-01T00:00:00.000Z"}};
  if (who.token->write_namespaces) {
    access_token["fineGrained"] = {
        {"canReadGatedRepos", false}, {"global", json::array()}, {"scoped", json::array()}};
    for (const auto& ns : *who.token->write_namespaces) {
      access_token["fineGrained"]["scoped"].push_back(
          {{"entity", {{"type", ns == user.name ? "user" : "org"}, {"name", ns}}},
           {"permissions", {"repo.content.read", "repo.write"}}});
    }
  }
  send_json(call, 200,
            {{"type", "user"},
             {"id", fake_id("user", user.name)},
             {"name", user.name},
             {"fullname", user.fullname},
             {"email", user.name + "@example.org"},
             {"emailVerified", true},
             {"isPro", false},
             {"canPay", false},
             {"billingMode", "postpaid"},
             {"avatarUrl", ""},
             {"periodEnd", nullptr},
             {"orgs", orgs},
             {"auth", {{"type", "access_token"}, {"accessToken", access_token}}}});
}

Server::RepoRequest Server::read_repo_request(Call& call) {
  Identity who = identify(call, ErrorStyle::Hub);
  json body = parse_json(read_body(call));
  if (!body.is_object()) throw HttpError{400, "the request body must be a JSON object", ""};
  if (who.user == nullptr) require_write(who, "", ErrorStyle::Hub);
  std::string type = body_repo_type(body);
  std::string id = body_repo_id(body, who);
  return {std::move(who), std::move(body), std::move(type), std::move(id)};
}

void Server::create_repo(Call& call) {
  auto [who, body, type, id] = read_repo_request(call);
  require_write(who, id.substr(0, id.find('/')), ErrorStyle::Hub);
  bool is_private = false;
  if (body.contains("visibility") && body["visibility"].is_string()) {
    std::string visibility = body["visibility"].get<std::string>();
    if (visibility != "public" && visibility != "private") {
      throw HttpError{400,
                      "visibility must be \"public\" or \"private\" (\"protected\" is for "
                      "Spaces)",
                      ""};
    }
    is_private = visibility == "private";
  } else if (body.contains("private") && body["private"].is_boolean()) {
    is_private = body["private"].get<bool>();
  }
  std::vector<SeedFile> files;
  if (body.contains("files") && body["files"].is_array()) {
    for (const auto& file : body["files"]) {
      std::string content = file.value("content", "");
      if (file.value("encoding", "utf-8") == "base64") {
        auto decoded = base64_decode(content);
        if (!decoded) throw HttpError{400, "files[].content is not valid base64", ""};
        content = *decoded;
      }
      files.push_back({file.value("path", ""), content});
    }
  }
  std::lock_guard lock(state_mutex_);
  if (auto it = repos_.find(type + "/" + id); it != repos_.end()) {
    // huggingface_hub's create_repo(exist_ok=True) reads `url` from this 409 body.
    std::string message = "You already created this " + type + " repo";
    call.res.set_header("X-Error-Message", message);
    return send_json(call, 409, {{"error", message}, {"url", repo_url(it->second)}});
  }
  Repo& repo = create_repo_locked(type, id, is_private, who.user->name, files);
  send_json(call, 200, {{"url", repo_url(repo)}, {"id", repo.id}, {"name", repo.id}});
}

void Server::delete_repo(Call& call) {
  auto [who, body, type, id] = read_repo_request(call);
  std::lock_guard lock(state_mutex_);
  Repo& repo = find_repo(who, type, id);
  require_write(who, repo.ns(), ErrorStyle::Hub);
  std::error_code error;
  fs::remove(repo_file(type, id), error);
  repos_.erase(repo.key());
  send_json(call, 200, json::object());
}

void Server::repo_info(Call& call, const std::string& type, const std::string& id,
                       const std::string& revision) {
  Identity who = identify(call, ErrorStyle::Hub);
  bool blobs = call.param("blobs") && truthy(*call.param("blobs"));
  std::optional<std::set<std::string>> wanted = requested_properties(call);
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  const Commit& commit = find_revision(repo, revision);
  json info = {{"_id", fake_id("repo", repo.key())},
               {"id", repo.id},
               {"author", repo.ns()},
               {"sha", commit.oid},
               {"lastModified", iso_time(commit.time)},
               {"createdAt", iso_time(repo.created)},
               {"private", repo.is_private},
               {"gated", false},
               {"disabled", false},
               {"downloads", 0},
               {"likes", 0},
               {"tags", json::array()},
               {"usedStorage", used_storage(repo)},
               {"xetEnabled", false}};
  if (type == "model") info["modelId"] = repo.id;
  if (!wanted) {
    info.erase("xetEnabled");  // only answered when asked for
    info["siblings"] = siblings(commit, blobs);
    return send_json(call, 200, info);
  }
  // Like the Hub: only what was asked for, plus the ids.
  json answer = {{"_id", info["_id"]}, {"id", info["id"]}};
  for (const auto& name : *wanted) {
    if (name == "siblings") answer["siblings"] = siblings(commit, blobs);
    if (info.contains(name)) answer[name] = info[name];
  }
  send_json(call, 200, answer);
}

json Server::entry_json(const Repo& repo, const Commit& commit, const TreeEntry& entry,
                        bool expand) const {
  json item = {{"type", entry.directory ? "directory" : "file"},
               {"oid", entry.oid},
               {"size", entry.directory ? 0 : entry.file->size},
               {"path", entry.path}};
  if (entry.file != nullptr && entry.file->lfs) {
    item["lfs"] = {{"oid", entry.file->sha256},
                   {"size", entry.file->size},
                   {"pointerSize", entry.file->pointer_size()}};
  }
  if (expand) {
    const Commit& last = last_commit_touching(repo, commit, entry.path);
    item["lastCommit"] = {{"id", last.oid}, {"title", last.title}, {"date", iso_time(last.time)}};
    if (!entry.directory) item["securityFileStatus"] = {{"status", "safe"}};
  }
  return item;
}

void Server::list_tree(Call& call, const std::string& type, const std::string& id,
                       const std::string& revision, const std::string& path) {
  Identity who = identify(call, ErrorStyle::Hub);
  bool recursive = call.param("recursive") && truthy(*call.param("recursive"));
  bool expand = call.param("expand") && truthy(*call.param("expand"));
  std::string folder = path;
  while (folder.ends_with('/')) folder.pop_back();
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  const Commit& commit = find_revision(repo, revision);
  TreeView view(commit.files);
  if (!view.has_folder(folder)) {
    throw HttpError{
        404,
        "Entry not found: there is no folder \"" + folder + "\" in " + repo.id + " at " + revision,
        "EntryNotFound",
        ErrorStyle::Hub,
        {{"X-Repo-Commit", commit.oid}}};
  }
  std::vector<TreeEntry> entries = view.list(folder, recursive);
  // The Hub pages 1000 entries, 50 when expanded (expansion is costly).
  size_t page = expand ? std::min<size_t>(options_.page_size, 50) : options_.page_size;
  size_t offset = cursor_offset(call, entries.size());
  size_t end = std::min(entries.size(), offset + page);
  json items = json::array();
  for (size_t i = offset; i < end; ++i)
    items.push_back(entry_json(repo, commit, entries[i], expand));
  if (end < entries.size()) call.res.set_header("Link", next_link(call, end));
  send_json(call, 200, items);
}

void Server::paths_info(Call& call, const std::string& type, const std::string& id,
                        const std::string& revision) {
  Identity who = identify(call, ErrorStyle::Hub);
  std::string body = read_body(call);
  std::vector<std::string> paths;
  bool expand = false;
  // huggingface_hub posts a form (paths=a&paths=b&expand=false), the JS client posts JSON.
  json document = json::parse(body, nullptr, false);
  if (!document.is_discarded() && document.is_object()) {
    if (document.contains("paths") && document["paths"].is_array()) {
      for (const auto& item : document["paths"]) {
        if (item.is_string()) paths.push_back(item.get<std::string>());
      }
    } else if (document.contains("paths") && document["paths"].is_string()) {
      paths.push_back(document["paths"].get<std::string>());
    }
    if (document.contains("expand")) {
      const json& value = document["expand"];
      expand = value.is_boolean() ? value.get<bool>()
                                  : value.is_string() && truthy(value.get<std::string>());
    }
  } else {
    for (const auto& [key, value] : parse_form(body)) {
      if (key == "paths" || key == "paths[]") paths.push_back(value);
      if (key == "expand") expand = truthy(value);
    }
  }
  if (paths.size() > 1000) throw HttpError{413, "too many parameters: at most 1000 paths", ""};
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  const Commit& commit = find_revision(repo, revision);
  TreeView view(commit.files);
  json items = json::array();
  for (std::string path : paths) {
    while (path.ends_with('/')) path.pop_back();
    if (auto entry = view.entry(path)) items.push_back(entry_json(repo, commit, *entry, expand));
  }
  send_json(call, 200, items);
}

void Server::list_commits(Call& call, const std::string& type, const std::string& id,
                          const std::string& revision) {
  Identity who = identify(call, ErrorStyle::Hub);
  size_t page = options_.page_size;
  if (auto limit = call.param("limit")) {
    try {
      page = std::clamp<size_t>(std::stoull(*limit), 1, page);
    } catch (const std::exception&) {
      throw HttpError{400, "limit must be a positive integer", ""};
    }
  }
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  std::vector<const Commit*> history;
  for (const Commit* commit = &find_revision(repo, revision); commit != nullptr;
       commit = commit->parent.empty() ? nullptr : &repo.commits.at(commit->parent)) {
    history.push_back(commit);
  }
  size_t offset = cursor_offset(call, history.size());
  size_t end = std::min(history.size(), offset + page);
  json items = json::array();
  for (size_t i = offset; i < end; ++i) {
    const Commit& commit = *history[i];
    std::string message = commit.title;
    if (!commit.description.empty()) message += "\n\n" + commit.description;
    items.push_back({{"id", commit.oid},
                     {"title", commit.title},
                     {"message", message},
                     {"authors", {{{"user", commit.author}, {"avatar", ""}}}},
                     {"date", iso_time(commit.time)}});
  }
  if (end < history.size()) call.res.set_header("Link", next_link(call, end));
  send_json(call, 200, items);
}

void Server::list_refs(Call& call, const std::string& type, const std::string& id) {
  Identity who = identify(call, ErrorStyle::Hub);
  bool include_prs = call.param("include_prs") && truthy(*call.param("include_prs"));
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  json branches = json::array();
  json pulls = json::array();
  for (const auto& [name, oid] : repo.branches) {
    if (name.starts_with("refs/pr/")) {
      pulls.push_back({{"name", name}, {"ref", name}, {"targetCommit", oid}});
    } else {
      branches.push_back({{"name", name}, {"ref", "refs/heads/" + name}, {"targetCommit", oid}});
    }
  }
  json refs = {{"branches", branches}, {"tags", json::array()}, {"converts", json::array()}};
  if (include_prs) refs["pullRequests"] = pulls;
  send_json(call, 200, refs);
}

}  // namespace neuron_cache::hub_server
