// Uploads: preupload, the Git LFS batch API (basic and multipart), the CDN's signed PUT URLs,
// multipart completion, and the NDJSON commit.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <set>

#include "hash.h"
#include "server.h"
#include "text.h"

namespace neuron_cache::hub_server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxRegularFile = 10 * kMiB;
constexpr uint64_t kMaxRegularBinary = 1000 * 1000;
constexpr size_t kSampleSize = 512;

json parse_json(const std::string& body, ErrorStyle style = ErrorStyle::Hub) {
  json document = json::parse(body, nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw HttpError{style == ErrorStyle::Lfs ? 422 : 400, "the request body is not a JSON object",
                    "", style};
  }
  return document;
}

std::string string_field(const json& object, const char* key) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : "";
}

uint64_t number_param(const Call& call, const char* name) {
  try {
    return std::stoull(call.param(name).value_or(""));
  } catch (const std::exception&) {
    throw HttpError{400, std::string("missing or bad '") + name + "' in the signed URL", "",
                    call.listener == Listener::Cdn ? ErrorStyle::S3 : ErrorStyle::Hub};
  }
}

uint64_t part_count(uint64_t size, uint64_t chunk) {
  return size == 0 ? 1 : (size + chunk - 1) / chunk;
}

std::string unquote(std::string etag) {
  if (etag.starts_with("W/")) etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// Paths git (and the Hub) accept: relative, no empty, '.' or '..' components, nothing in .git/.
std::string checked_path(const json& value) {
  std::string path = string_field(value, "path");
  bool ok = !path.empty() && path.front() != '/' && path.find('\0') == std::string::npos;
  for (const auto& part : split(path, '/')) {
    if (part.empty() || part == "." || part == "..") ok = false;
  }
  if (path == ".git" || path.starts_with(".git/")) ok = false;
  if (!ok) {
    throw HttpError{400,
                    "invalid path \"" + path +
                        "\": paths are relative, '/'-separated, without "
                        "empty, '.' or '..' parts, and not inside .git/",
                    ""};
  }
  return path;
}

std::string gitattributes_line(const std::string& path) {
  std::string pattern;
  for (char c : path) pattern += c == ' ' ? std::string("[[:space:]]") : std::string(1, c);
  return pattern + " filter=lfs diff=lfs merge=lfs -text\n";
}

}  // namespace

void Server::preupload(Call& call, const std::string& type, const std::string& id,
                       const std::string& revision) {
  Identity who = identify(call, ErrorStyle::Hub);
  json body = parse_json(read_body(call));
  if (!body.contains("files") || !body["files"].is_array()) {
    throw HttpError{400, "expected {\"files\": [{\"path\", \"size\", \"sample\"}, ...]}", ""};
  }
  if (body["files"].size() > 256) {
    throw HttpError{400, "at most 256 files per preupload call", ""};
  }
  std::lock_guard lock(state_mutex_);
  const Repo& repo = find_repo(who, type, id);
  require_write(who, repo.ns(), ErrorStyle::Hub);
  const Commit& commit = find_revision(repo, revision);
  auto repo_text = [&](const std::string& path) {
    auto it = commit.files.find(path);
    return it == commit.files.end() || it->second.lfs ? "" : blobs_.read_git(it->second.oid);
  };
  // The JS client sends the .gitattributes of the commit being prepared, Python a .gitignore.
  std::string attributes = body.contains("gitAttributes") && body["gitAttributes"].is_string()
                               ? body["gitAttributes"].get<std::string>()
                               : repo_text(".gitattributes");
  std::string ignore = body.contains("gitIgnore") && body["gitIgnore"].is_string()
                           ? body["gitIgnore"].get<std::string>()
                           : repo_text(".gitignore");
  json files = json::array();
  for (const auto& file : body["files"]) {
    std::string path = string_field(file, "path");
    if (path.empty() || !file.contains("size") || !file["size"].is_number_integer() ||
        file["size"].get<int64_t>() < 0) {
      throw HttpError{400, "each file needs a \"path\" and a non-negative integer \"size\"", ""};
    }
    uint64_t size = file["size"].get<uint64_t>();
    std::string sample = base64_decode(string_field(file, "sample")).value_or("");
    bool lfs = size > 0 && (lfs_tracked(attributes, path) || size > options_.lfs_threshold ||
                            (looks_binary(sample) && size > kMaxRegularBinary));
    json oid = nullptr;
    if (auto it = commit.files.find(path); it != commit.files.end()) {
      oid = it->second.lfs ? it->second.sha256 : it->second.oid;
    }
    files.push_back({{"path", path},
                     {"uploadMode", lfs ? "lfs" : "regular"},
                     {"shouldIgnore", git_ignored(ignore, path)},
                     {"oid", oid}});
  }
  send_json(call, 200, {{"files", files}, {"commitOid", commit.oid}});
}

json Server::upload_action(const std::string& sha256, uint64_t size) const {
  std::string base = "/lfs/upload/" + sha256;
  if (size > 0 && size >= options_.multipart_threshold) {
    uint64_t chunk = options_.multipart_chunk_size;
    uint64_t parts = part_count(size, chunk);
    std::string query = "size=" + std::to_string(size) + "&chunk=" + std::to_string(chunk);
    json header = {{"chunk_size", std::to_string(chunk)}};
    for (uint64_t part = 1; part <= parts; ++part) {
      std::string key = std::to_string(part);
      key.insert(0, key.size() < 5 ? 5 - key.size() : 0, '0');
      header[key] = signed_url(upload_base(), "PUT", base + "/part/" + std::to_string(part), query);
    }
    // The completion URL lives on the Hub, as on huggingface.co, and is signed: no token needed.
    return {{"href", signed_url(hub_base(), "POST", "/api/complete_multipart",
                                "oid=" + sha256 + "&" + query)},
            {"header", header},
            {"expires_in", kUrlLifetimeSeconds}};
  }
  return {{"href", signed_url(upload_base(), "PUT", base, "size=" + std::to_string(size))},
          {"header", json::object()},
          {"expires_in", kUrlLifetimeSeconds}};
}

void Server::lfs_batch(Call& call, const std::string& type, const std::string& id) {
  Identity who = identify(call, ErrorStyle::Lfs);
  json body = parse_json(read_body(call), ErrorStyle::Lfs);
  std::string operation = string_field(body, "operation");
  if (operation != "upload" && operation != "download") {
    throw HttpError{422, "operation must be \"upload\" or \"download\"", "", ErrorStyle::Lfs};
  }
  // The JS client sends "sha_256"; git-lfs says 409 for an algorithm the server lacks.
  std::string algorithm = string_field(body, "hash_algo");
  if (body.contains("hash_algo") && algorithm != "sha256" && algorithm != "sha_256") {
    throw HttpError{409, "unsupported hash_algo \"" + algorithm + "\": only sha256", "",
                    ErrorStyle::Lfs};
  }
  if (body.contains("transfers") && body["transfers"].is_array()) {
    const json& transfers = body["transfers"];
    bool usable = std::any_of(transfers.begin(), transfers.end(),
                              [](const json& t) { return t == "basic" || t == "multipart"; });
    if (!usable) {
      throw HttpError{422, "this server only offers the basic and multipart transfers (no xet)", "",
                      ErrorStyle::Lfs};
    }
  }
  if (!body.contains("objects") || !body["objects"].is_array()) {
    throw HttpError{422, "objects must be a list of {oid, size}", "", ErrorStyle::Lfs};
  }
  std::string prefix;
  {
    std::lock_guard lock(state_mutex_);
    const Repo& repo = find_repo(who, type, id, ErrorStyle::Lfs);
    if (operation == "upload") require_write(who, repo.ns(), ErrorStyle::Lfs);
    prefix = repo.type == "dataset" ? "/datasets/" : "/";
  }
  json objects = json::array();
  for (const auto& object : body["objects"]) {
    std::string oid = string_field(object, "oid");
    bool valid_size = object.contains("size") && object["size"].is_number_integer() &&
                      object["size"].get<int64_t>() >= 0;
    json result = {{"oid", oid}, {"size", valid_size ? object["size"] : json(0)}};
    if (!is_hex(oid, 64) || !valid_size) {
      result["error"] = {{"code", 422},
                         {"message",
                          "oid must be 64 lowercase hex digits (sha256) "
                          "and size a non-negative integer"}};
      objects.push_back(result);
      continue;
    }
    uint64_t size = object["size"].get<uint64_t>();
    auto stored = blobs_.lfs_size(oid);
    if (stored && *stored != size) {
      result["error"] = {
          {"code", 422},
          {"message", "object " + oid + " is stored with size " + std::to_string(*stored) +
                          ", not " + std::to_string(size)}};
    } else if (operation == "upload" && !stored) {
      result["authenticated"] = true;
      result["actions"] = {{"upload", upload_action(oid, size)},
                           {"verify",
                            {{"href", hub_base() + prefix + id + ".git/info/lfs/objects/verify"},
                             {"header", json::object()},
                             {"expires_in", kUrlLifetimeSeconds}}}};
    } else if (operation == "download" && stored) {
      result["authenticated"] = true;
      result["actions"] = {{"download",
                            {{"href", signed_url(cdn_base(), "GET", "/lfs/objects/" + oid, "")},
                             {"header", json::object()},
                             {"expires_in", kUrlLifetimeSeconds}}}};
    } else if (operation == "download") {
      result["error"] = {{"code", 404}, {"message", "Object does not exist"}};
    }
    objects.push_back(result);
  }
  send_json(call, 200, {{"transfer", "basic"}, {"objects", objects}, {"hash_algo", "sha256"}},
            "application/vnd.git-lfs+json");
}

void Server::lfs_verify(Call& call, const std::string& type, const std::string& id) {
  Identity who = identify(call, ErrorStyle::Lfs);
  json body = parse_json(read_body(call), ErrorStyle::Lfs);
  {
    std::lock_guard lock(state_mutex_);
    const Repo& repo = find_repo(who, type, id, ErrorStyle::Lfs);
    require_write(who, repo.ns(), ErrorStyle::Lfs);
  }
  std::string oid = string_field(body, "oid");
  auto stored = is_hex(oid, 64) ? blobs_.lfs_size(oid) : std::nullopt;
  if (!stored) throw HttpError{404, "object " + oid + " was not uploaded", "", ErrorStyle::Lfs};
  if (!body.contains("size") || body["size"] != *stored) {
    throw HttpError{422, "object " + oid + " has size " + std::to_string(*stored), "",
                    ErrorStyle::Lfs};
  }
  send_json(call, 200, json::object(), "application/vnd.git-lfs+json");
}

void Server::cdn_upload(Call& call, const std::string& sha256) {
  refuse_hub_auth(call);
  check_signature(call);
  uint64_t size = number_param(call, "size");
  fs::path temp = blobs_.new_temp();
  Digest content_hash(Algorithm::Sha256);
  Digest md5(Algorithm::Md5);
  uint64_t received = 0;
  {
    std::ofstream out(temp, std::ios::binary);
    received = receive_body(call, [&](std::string_view data) {
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      content_hash.update(data);
      md5.update(data);
    });
    if (!out) {
      fs::remove(temp);
      throw std::runtime_error("cannot write the upload to " + temp.string());
    }
  }
  std::string digest = content_hash.hex();
  if (received != size || digest != sha256) {
    fs::remove(temp);
    bool short_body = received != size;
    throw HttpError{400,
                    short_body ? "received " + std::to_string(received) +
                                     " bytes, the LFS batch call announced " + std::to_string(size)
                               : "the sha256 of the body is " + digest + ", not the oid " + sha256 +
                                     " this URL was issued for",
                    short_body ? "IncompleteBody" : "BadDigest", ErrorStyle::S3};
  }
  blobs_.install_lfs(temp, sha256);
  call.res.set_header("ETag", "\"" + md5.hex() + "\"");
  send_text(call, 200, "", "application/xml");
}

void Server::cdn_upload_part(Call& call, const std::string& sha256, const std::string& part) {
  refuse_hub_auth(call);
  check_signature(call);
  uint64_t size = number_param(call, "size");
  uint64_t chunk = number_param(call, "chunk");
  uint64_t parts = part_count(size, chunk);
  int number = std::atoi(part.c_str());
  if (number < 1 || static_cast<uint64_t>(number) > parts) {
    throw HttpError{400, "part number " + part + " is outside 1.." + std::to_string(parts),
                    "InvalidArgument", ErrorStyle::S3};
  }
  uint64_t expected = static_cast<uint64_t>(number) < parts ? chunk : size - (parts - 1) * chunk;
  fs::path temp = blobs_.new_temp();
  Digest md5(Algorithm::Md5);
  uint64_t received = 0;
  {
    std::ofstream out(temp, std::ios::binary);
    received = receive_body(call, [&](std::string_view data) {
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      md5.update(data);
    });
  }
  if (received != expected) {
    fs::remove(temp);
    throw HttpError{400,
                    "part " + part + " must hold " + std::to_string(expected) +
                        " bytes (chunk_size " + std::to_string(chunk) + "), got " +
                        std::to_string(received),
                    "IncompleteBody", ErrorStyle::S3};
  }
  fs::path destination = blobs_.part_path(sha256, number);
  fs::create_directories(destination.parent_path());
  fs::rename(temp, destination);
  std::string etag = "\"" + md5.hex() + "\"";
  {
    std::lock_guard lock(state_mutex_);
    part_etags_[sha256][number] = etag;
  }
  call.res.set_header("ETag", etag);
  send_text(call, 200, "", "application/xml");
}

void Server::complete_multipart(Call& call) {
  check_signature(call);
  std::string oid = call.param("oid").value_or("");
  uint64_t size = number_param(call, "size");
  uint64_t parts = part_count(size, number_param(call, "chunk"));
  json body = parse_json(read_body(call));
  if (string_field(body, "oid") != oid) {
    throw HttpError{400, "the body's oid is not the one this completion URL was issued for", ""};
  }
  if (!body.contains("parts") || !body["parts"].is_array() || body["parts"].size() != parts) {
    throw HttpError{400, "expected " + std::to_string(parts) + " parts [{partNumber, etag}]", ""};
  }
  std::map<int, std::string> uploaded;
  {
    std::lock_guard lock(state_mutex_);
    uploaded = part_etags_[oid];
  }
  std::set<int> seen;
  for (const auto& item : body["parts"]) {
    int number = item.contains("partNumber") && item["partNumber"].is_number_integer()
                     ? item["partNumber"].get<int>()
                     : 0;
    if (number < 1 || static_cast<uint64_t>(number) > parts || !seen.insert(number).second) {
      throw HttpError{400, "partNumber must be 1.." + std::to_string(parts) + ", each once", ""};
    }
    if (!uploaded.contains(number)) {
      throw HttpError{400, "part " + std::to_string(number) + " was never uploaded", ""};
    }
    if (unquote(string_field(item, "etag")) != unquote(uploaded[number])) {
      throw HttpError{400,
                      "part " + std::to_string(number) + ": etag " + string_field(item, "etag") +
                          " is not the ETag its upload returned (" + uploaded[number] + ")",
                      ""};
    }
  }
  if (!blobs_.lfs_size(oid)) {
    fs::path temp = blobs_.new_temp();
    Digest content_hash(Algorithm::Sha256);
    uint64_t total = 0;
    {
      std::ofstream out(temp, std::ios::binary);
      std::vector<char> buffer(1 << 20);
      for (uint64_t part = 1; part <= parts; ++part) {
        std::ifstream in(blobs_.part_path(oid, static_cast<int>(part)), std::ios::binary);
        while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount()) {
          std::string_view data(buffer.data(), static_cast<size_t>(in.gcount()));
          out.write(data.data(), static_cast<std::streamsize>(data.size()));
          content_hash.update(data);
          total += data.size();
        }
      }
    }
    std::string digest = content_hash.hex();
    if (total != size || digest != oid) {
      fs::remove(temp);
      throw HttpError{400,
                      "Content does not match oid/size (the assembled parts have sha256 " + digest +
                          " and " + std::to_string(total) + " bytes, expected " + oid + " and " +
                          std::to_string(size) + ")",
                      ""};
    }
    blobs_.install_lfs(temp, oid);
  }
  blobs_.drop_parts(oid);
  {
    std::lock_guard lock(state_mutex_);
    part_etags_.erase(oid);
  }
  send_json(call, 200, {{"oid", oid}, {"size", size}});
}

void Server::commit(Call& call, const std::string& type, const std::string& id,
                    const std::string& revision) {
  Identity who = identify(call, ErrorStyle::Hub);
  std::string branch = revision == "HEAD" ? "main" : revision;
  auto check_target = [&]() -> Repo& {
    Repo& repo = find_repo(who, type, id);
    require_write(who, repo.ns(), ErrorStyle::Hub);
    if (!repo.branches.contains(branch)) {
      throw HttpError{404, "Invalid rev id: " + revision + " is not a branch of " + repo.id,
                      "RevisionNotFound"};
    }
    check_commit_quota(repo);
    return repo;
  };
  {
    std::lock_guard lock(state_mutex_);
    check_target();  // before reading a possibly large body
  }
  CommitPayload payload = read_commit_payload(call);

  std::lock_guard lock(state_mutex_);
  Repo& repo = check_target();  // again: it may have changed while the body arrived
  std::string head = repo.branches.at(branch);
  std::string parent_commit = string_field(payload.header, "parentCommit");
  bool create_pr = call.param("create_pr") && truthy(*call.param("create_pr"));
  std::string base = head;
  std::string target = branch;
  if (create_pr) {
    if (!parent_commit.empty()) {
      if (!repo.commits.contains(parent_commit)) {
        throw HttpError{400, "parentCommit " + parent_commit + " is not a commit of " + repo.id,
                        ""};
      }
      base = parent_commit;
    }
    target = "refs/pr/" + std::to_string(repo.next_pr);
  } else if (!parent_commit.empty() && parent_commit != head) {
    throw HttpError{412, "A commit has happened since. Please refresh and try again.", ""};
  }
  FileTree files = repo.commits.at(base).files;
  apply_operations(files, payload.operations);
  track_lfs_files(files, payload.operations);
  std::string title = string_field(payload.header, "summary");
  if (title.empty()) title = "Upload files with the test Hub server";
  const Commit& made =
      add_commit(repo, target, base, std::move(files), title,
                 string_field(payload.header, "description"), who.user->name, std::time(nullptr));
  json pull_request = nullptr;
  if (create_pr) pull_request = repo_url(repo) + "/discussions/" + std::to_string(repo.next_pr++);
  save(repo);
  quotas_.add_commit(repo.key());
  send_json(call, 200,
            {{"success", true},
             {"commitOid", made.oid},
             {"commitUrl", repo_url(repo) + "/commit/" + made.oid},
             {"hookOutput", ""},
             {"pullRequestUrl", pull_request}});
}

void Server::super_squash(Call& call, const std::string& type, const std::string& id,
                          const std::string& branch) {
  Identity who = identify(call, ErrorStyle::Hub);
  json body = json::parse(read_body(call), nullptr, false);
  std::string message = body.is_object() ? string_field(body, "message") : "";
  if (message.empty()) message = "Super-squash branch '" + branch + "' using huggingface_hub";
  std::lock_guard lock(state_mutex_);
  Repo& repo = find_repo(who, type, id);
  require_write(who, repo.ns(), ErrorStyle::Hub);
  if (!repo.branches.contains(branch)) {
    throw HttpError{404, "Invalid rev id: " + branch + " is not a branch of " + repo.id,
                    "RevisionNotFound"};
  }
  FileTree files = repo.commits.at(repo.branches.at(branch)).files;
  const Commit& made = add_commit(repo, branch, "", std::move(files), message, "", who.user->name,
                                  std::time(nullptr));
  std::string made_oid = made.oid;
  forget_unreachable(repo);
  save(repo);
  send_json(call, 200, {{"commitId", made_oid}});
}

CommitPayload Server::read_commit_payload(Call& call) {
  // NDJSON is parsed as it arrives: only one line (at most one file's content) is held.
  CommitPayload payload;
  size_t line_number = 0;
  std::optional<HttpError> failure;
  auto feed = [&](std::string_view text) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (failure || text.empty()) return;
    try {
      parse_commit_line(text, ++line_number, payload);
    } catch (const HttpError& error) {
      failure = error;  // keep reading: the client is still sending
    }
  };
  std::string pending;
  receive_body(call, [&](std::string_view data) {
    pending.append(data);
    size_t start = 0;
    for (size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1) {
      feed(std::string_view(pending).substr(start, end - start));
    }
    pending.erase(0, start);
  });
  feed(pending);
  if (failure) throw *failure;
  if (line_number == 0) throw HttpError{400, "empty commit: no NDJSON header line", ""};
  return payload;
}

void Server::parse_commit_line(std::string_view text, size_t line_number, CommitPayload& payload) {
  std::string where = "line " + std::to_string(line_number);
  json line = json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object() || !line.contains("value") ||
      !line["value"].is_object()) {
    throw HttpError{400, where + " is not a JSON object {\"key\": ..., \"value\": {...}}", ""};
  }
  std::string key = string_field(line, "key");
  const json& value = line["value"];
  if ((line_number == 1) != (key == "header")) {
    throw HttpError{400, "the first NDJSON line, and only it, must be {\"key\": \"header\"}", ""};
  }
  if (key == "header") {
    payload.header = value;
  } else if (key == "file") {
    payload.operations.push_back({Operation::Kind::Put, checked_path(value), regular_file(value)});
  } else if (key == "lfsFile") {
    payload.operations.push_back({Operation::Kind::Put, checked_path(value), lfs_file(value)});
  } else if (key == "deletedFile") {
    payload.operations.push_back({Operation::Kind::Delete, checked_path(value), {}});
  } else if (key == "deletedFolder") {
    json folder = value;
    std::string path = string_field(value, "path");
    while (path.ends_with('/')) path.pop_back();
    folder["path"] = path;
    payload.operations.push_back({Operation::Kind::DeleteFolder, checked_path(folder), {}});
  } else {
    throw HttpError{400,
                    where + ": unknown key \"" + key +
                        "\" (expected header, file, lfsFile, deletedFile or deletedFolder)",
                    ""};
  }
}

FileEntry Server::regular_file(const json& value) {
  std::string path = string_field(value, "path");
  std::string content = string_field(value, "content");
  if (string_field(value, "encoding") == "base64") {
    auto decoded = base64_decode(content);
    if (!decoded) throw HttpError{400, path + ": content is not valid base64", ""};
    content = std::move(*decoded);
  }
  if (content.size() > kMaxRegularFile) {
    throw HttpError{400,
                    "Your push was rejected because it contains files larger than 10 MiB (" + path +
                        "). Upload it as an LFS file (preupload says uploadMode lfs)",
                    ""};
  }
  if (content.size() > kMaxRegularBinary &&
      looks_binary(std::string_view(content).substr(0, kSampleSize))) {
    throw HttpError{400,
                    "Your push was rejected because it contains binary files (" + path +
                        "). Upload binary files over 1 MB as LFS files",
                    ""};
  }
  FileEntry entry;
  entry.size = content.size();
  entry.oid = blobs_.put_git(content);  // content-addressed: harmless if the commit fails
  return entry;
}

FileEntry Server::lfs_file(const json& value) const {
  std::string path = string_field(value, "path");
  std::string oid = string_field(value, "oid");
  if (value.contains("algo") && string_field(value, "algo") != "sha256") {
    throw HttpError{400, path + ": algo must be sha256", ""};
  }
  auto stored = is_hex(oid, 64) ? blobs_.lfs_size(oid) : std::nullopt;
  if (!stored) {
    throw HttpError{400,
                    "Your push was rejected because an LFS pointer pointed to a file that does "
                    "not exist: " +
                        path + " (oid " + oid +
                        "). Upload it through the LFS batch API before committing",
                    ""};
  }
  // huggingface_hub leaves size out when it copies an LFS file that is already stored.
  if (value.contains("size") && value["size"] != *stored) {
    throw HttpError{400,
                    path + ": size " + value["size"].dump() +
                        " is not the size of the stored object (" + std::to_string(*stored) + ")",
                    ""};
  }
  return {true, git_blob_id(lfs_pointer(oid, *stored)), *stored, oid};
}

void apply_operations(FileTree& files, const std::vector<Operation>& operations) {
  for (const auto& operation : operations) {
    const std::string& path = operation.path;
    if (operation.kind == Operation::Kind::Put) {
      files[path] = operation.entry;
    } else if (operation.kind == Operation::Kind::Delete) {
      if (files.erase(path) == 0) {
        throw HttpError{404, "A file with this name doesn't exist: " + path, "EntryNotFound"};
      }
    } else {
      auto first = files.lower_bound(path + "/");
      auto last = first;
      while (last != files.end() && last->first.starts_with(path + "/")) ++last;
      if (first == last) {
        throw HttpError{404, "A folder with this name doesn't exist: " + path, "EntryNotFound"};
      }
      files.erase(first, last);
    }
  }
  // git cannot hold "a" and "a/b" together.
  for (const auto& operation : operations) {
    if (operation.kind != Operation::Kind::Put) continue;
    const std::string& path = operation.path;
    auto below = files.lower_bound(path + "/");
    bool conflict = below != files.end() && below->first.starts_with(path + "/");
    for (size_t slash = path.find('/'); slash != std::string::npos && !conflict;
         slash = path.find('/', slash + 1)) {
      conflict = files.contains(path.substr(0, slash));
    }
    if (conflict) {
      throw HttpError{400, "path " + path + " conflicts with a file or folder of the same name",
                      ""};
    }
  }
}

void Server::track_lfs_files(FileTree& files, const std::vector<Operation>& operations) {
  // The Hub makes .gitattributes track the LFS files of a commit that no pattern covers.
  auto it = files.find(".gitattributes");
  std::string attributes =
      it == files.end() || it->second.lfs ? "" : blobs_.read_git(it->second.oid);
  std::string updated = attributes;
  for (const auto& operation : operations) {
    if (operation.kind != Operation::Kind::Put || !operation.entry.lfs) continue;
    if (lfs_tracked(updated, operation.path)) continue;
    if (!updated.empty() && updated.back() != '\n') updated += '\n';
    updated += gitattributes_line(operation.path);
  }
  if (updated == attributes) return;
  FileEntry entry;
  entry.size = updated.size();
  entry.oid = blobs_.put_git(updated);
  files[".gitattributes"] = entry;
}

}  // namespace neuron_cache::hub_server
