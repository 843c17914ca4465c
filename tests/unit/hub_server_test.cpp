// The test Hub server itself, checked with plain HTTP: what the Hub's clients rely on (auth
// errors, Link pagination, ranges, the CDN redirect, preupload, LFS basic and multipart uploads,
// NDJSON commits) and the test hooks (access log, faults). The official JS client runs against
// the same server in tests/js.
#include <httplib.h>

#include <gtest/gtest.h>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "hub_fixture.h"
#include "neuron_cache/format/digest.h"

namespace neuron_cache::testing {
namespace {

using nlohmann::json;

httplib::Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// httplib's client, whose GET and HEAD follow the Hub's relative redirects as huggingface_hub
// does (a regular file's resolve answers 307 to /api/resolve-cache/...), never one to another
// origin (the CDN an LFS file's resolve sends to).
class Following {
 public:
  explicit Following(httplib::Client& client) : client_(client) {}
  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    return follow(path, [&](const std::string& to) { return client_.Get(to, headers); });
  }
  httplib::Result Get(const std::string& path, httplib::ContentReceiver receiver) {
    return follow(path, [&](const std::string& to) { return client_.Get(to, receiver); });
  }
  httplib::Result Head(const std::string& path, const httplib::Headers& headers = {}) {
    return follow(path, [&](const std::string& to) { return client_.Head(to, headers); });
  }
  template <class... Args>
  httplib::Result Post(Args&&... args) {
    return client_.Post(std::forward<Args>(args)...);
  }
  template <class... Args>
  httplib::Result Put(Args&&... args) {
    return client_.Put(std::forward<Args>(args)...);
  }
  template <class... Args>
  httplib::Result Delete(Args&&... args) {
    return client_.Delete(std::forward<Args>(args)...);
  }
  void set_read_timeout(time_t seconds, time_t microseconds) {
    client_.set_read_timeout(seconds, microseconds);
  }

 private:
  template <class Send>
  httplib::Result follow(const std::string& path, const Send& send) {
    httplib::Result result = send(path);
    for (int hops = 0; hops < 5 && result && is_redirect(result->status); ++hops) {
      std::string location = result->get_header_value("Location");
      if (!location.starts_with("/") || location.starts_with("//")) break;
      result = send(location);
    }
    return result;
  }
  httplib::Client& client_;
};

// A client for one origin that sends paths exactly as given (no re-encoding). `hub->` follows
// relative redirects; `(*hub).` sees every answer as sent.
class Http {
 public:
  // httplib's 5 s read timeout is too short on a loaded CI machine (a 10 MiB commit): a failed
  // request is a null Result that the tests dereference.
  explicit Http(const std::string& origin) : client_(origin), following_(client_) {
    client_.set_url_encode(false);
    client_.set_connection_timeout(10);
    client_.set_read_timeout(120);
    client_.set_write_timeout(120);
  }
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;
  httplib::Client& operator*() { return client_; }
  Following* operator->() { return &following_; }

 private:
  httplib::Client client_;
  Following following_;
};

// Absolute URLs the server hands out (Link, Location, LFS hrefs): origin and path.
std::pair<std::string, std::string> split_url(const std::string& url) {
  size_t slash = url.find('/', std::string("http://").size());
  return {url.substr(0, slash), url.substr(slash)};
}

httplib::Result get_url(const std::string& url, const httplib::Headers& headers = {}) {
  auto [origin, path] = split_url(url);
  Http http(origin);
  return http->Get(path, headers);
}

std::string base64_sample(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

json body_of(const httplib::Result& result) {
  return json::parse(result->body);
}

std::string ndjson(const std::vector<json>& lines) {
  std::string body;
  for (const auto& line : lines) body += line.dump() + "\n";
  return body;
}

json header_line(const std::string& summary, const std::string& parent = "") {
  json value = {{"summary", summary}};
  if (!parent.empty()) value["parentCommit"] = parent;
  return {{"key", "header"}, {"value", value}};
}

json file_line(const std::string& path, const std::string& content) {
  return {{"key", "file"},
          {"value", {{"path", path}, {"content", content}, {"encoding", "utf-8"}}}};
}

httplib::Result commit(Http& hub, const std::string& repo, const std::vector<json>& lines,
                       const std::string& token = kHubWriteToken) {
  return hub->Post("/api/models/" + repo + "/commit/main", bearer(token), ndjson(lines),
                   "application/x-ndjson");
}

std::string head_commit(Http& hub, const std::string& repo) {
  return body_of(hub->Get("/api/models/" + repo, bearer(kHubWriteToken)))["sha"];
}

httplib::Result lfs_batch(Http& hub, const std::string& repo, const json& objects,
                          const std::string& token = kHubWriteToken,
                          const std::string& hash_algo = "sha256") {
  json request = {{"operation", "upload"},
                  {"transfers", {"basic", "multipart"}},
                  {"hash_algo", hash_algo},
                  {"ref", {{"name", "main"}}},
                  {"objects", objects}};
  return hub->Post("/" + repo + ".git/info/lfs/objects/batch", bearer(token), request.dump(),
                   "application/vnd.git-lfs+json");
}

// Uploads `content` as an LFS object (batch + single PUT to the CDN) and commits it at `path`.
std::string upload_lfs_file(Http& hub, const std::string& repo, const std::string& path,
                            const std::string& content) {
  std::string oid = sha256_hex(content);
  auto batch = lfs_batch(hub, repo, {{{"oid", oid}, {"size", content.size()}}});
  EXPECT_EQ(batch->status, 200) << batch->body;
  json object = body_of(batch)["objects"][0];
  if (object.contains("actions")) {
    auto put = split_url(object["actions"]["upload"]["href"]);
    Http cdn(put.first);
    auto result = cdn->Put(put.second, content, "application/octet-stream");
    EXPECT_EQ(result->status, 200) << result->body;
  }
  json lfs_line = {
      {"key", "lfsFile"},
      {"value", {{"path", path}, {"algo", "sha256"}, {"oid", oid}, {"size", content.size()}}}};
  auto result = commit(hub, repo, {header_line("add " + path), lfs_line});
  EXPECT_EQ(result->status, 200) << result->body;
  return oid;
}

TEST(HubServerTest, WhoamiAndAuthErrors) {
  HubServer server;
  Http hub(server.url());
  auto me = hub->Get("/api/whoami-v2", bearer(kHubWriteToken));
  ASSERT_EQ(me->status, 200);
  EXPECT_EQ(body_of(me)["name"], "alice");
  EXPECT_EQ(body_of(me)["orgs"][0]["name"], "acme");
  EXPECT_EQ(body_of(me)["auth"]["accessToken"]["role"], "write");

  auto bad = hub->Get("/api/whoami-v2", bearer("hf_unknown"));
  EXPECT_EQ(bad->status, 401);
  EXPECT_EQ(bad->get_header_value("X-Error-Message"),
            "Invalid credentials in Authorization header");
  EXPECT_EQ(body_of(bad)["error"], "Invalid credentials in Authorization header");
  EXPECT_EQ(hub->Get("/api/whoami-v2")->status, 401);
  // A bad token is refused everywhere, even on public reads.
  EXPECT_EQ(hub->Get(std::string("/api/models/") + kHubPublicRepo, bearer("hf_unknown"))->status,
            401);
}

TEST(HubServerTest, CreateAndDeleteRepos) {
  HubServer server;
  Http hub(server.url());
  auto create = [&](const json& body, const std::string& token) {
    return hub->Post("/api/repos/create", bearer(token), body.dump(), "application/json");
  };
  auto created = create(
      {{"name", "m1"}, {"organization", "alice"}, {"type", "model"}, {"visibility", "private"}},
      kHubWriteToken);
  ASSERT_EQ(created->status, 200) << created->body;
  EXPECT_EQ(body_of(created)["url"], server.url() + "/alice/m1");
  // huggingface_hub's exist_ok reads url from the 409.
  auto again = create({{"name", "m1"}, {"organization", "alice"}}, kHubWriteToken);
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(body_of(again)["url"], server.url() + "/alice/m1");
  // Legacy "private", and a null organization meaning the caller.
  ASSERT_EQ(create({{"name", "m2"}, {"organization", nullptr}, {"private", true}}, kHubWriteToken)
                ->status,
            200);
  EXPECT_EQ(body_of(hub->Get("/api/models/alice/m2", bearer(kHubWriteToken)))["private"], true);
  EXPECT_EQ(body_of(hub->Get("/api/models/alice/m1", bearer(kHubWriteToken)))["private"], true);

  EXPECT_EQ(create({{"name", "m3"}}, kHubReadToken)->status, 403);
  EXPECT_EQ(create({{"name", "m3"}, {"organization", "alice"}}, kHubAcmeOnlyToken)->status, 403);
  EXPECT_EQ(create({{"name", "m3"}, {"organization", "acme"}}, kHubAcmeOnlyToken)->status, 200);
  EXPECT_EQ(create({{"name", "m3"}, {"organization", "acme"}}, kHubBobToken)->status, 403);
  EXPECT_EQ(hub->Post("/api/repos/create", json{{"name", "x"}}.dump(), "application/json")->status,
            401);
  EXPECT_EQ(create({{"name", "bad--name"}}, kHubWriteToken)->status, 400);

  json target = {{"name", "m1"}, {"organization", "alice"}, {"type", "model"}};
  EXPECT_EQ(
      hub->Delete("/api/repos/delete", bearer(kHubReadToken), target.dump(), "application/json")
          ->status,
      403);
  EXPECT_EQ(
      hub->Delete("/api/repos/delete", bearer(kHubWriteToken), target.dump(), "application/json")
          ->status,
      200);
  auto gone = hub->Get("/api/models/alice/m1", bearer(kHubWriteToken));
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(gone->get_header_value("X-Error-Code"), "RepoNotFound");
  EXPECT_EQ(
      hub->Delete("/api/repos/delete", bearer(kHubWriteToken), target.dump(), "application/json")
          ->status,
      404);
}

TEST(HubServerTest, RepoInfoAnswersOnlyTheExpandedProperties) {
  HubServer server;
  Http hub(server.url());
  std::string info = std::string("/api/models/") + kHubPublicRepo;
  json full = body_of(hub->Get(info));
  ASSERT_TRUE(full.contains("siblings")) << "no expand: every property, the file list too";
  EXPECT_EQ(full["siblings"].size(), 3u) << full;  // .gitattributes, README.md, registry/entry.json
  EXPECT_FALSE(full["siblings"][0].contains("size")) << "sizes only with blobs=true";

  // huggingface_hub repeats `expand`; the JS client's repoExists sends `expand[]`.
  for (const std::string query : {"?expand=sha&expand=private", "?expand[]=sha&expand[]=private",
                                  "?expand%5B%5D=sha&expand%5B%5D=private"}) {
    SCOPED_TRACE(query);
    json small = body_of(hub->Get(info + "/revision/main" + query));
    EXPECT_EQ(small, json({{"_id", full["_id"]},
                           {"id", kHubPublicRepo},
                           {"sha", full["sha"]},
                           {"private", false}}));
  }
  json listed = body_of(hub->Get(info + "?expand=siblings&blobs=true"));
  EXPECT_EQ(listed.size(), 3u) << listed;  // _id, id, siblings
  ASSERT_EQ(listed["siblings"].size(), 3u) << listed;
  EXPECT_TRUE(listed["siblings"][0].contains("size")) << listed;

  auto unknown = hub->Get(info + "?expand=sha&expand=nonsense");
  EXPECT_EQ(unknown->status, 400);
  EXPECT_NE(unknown->body.find("nonsense"), std::string::npos) << unknown->body;
}

TEST(HubServerTest, PrivateReposAnswer401WithoutAccess) {
  HubServer server;
  Http hub(server.url());
  std::string info = std::string("/api/models/") + kHubPrivateRepo;
  std::string file = std::string("/") + kHubPrivateRepo + "/resolve/main/README.md";
  for (const auto& headers : {httplib::Headers{}, bearer(kHubBobToken)}) {
    auto result = hub->Get(info, headers);
    EXPECT_EQ(result->status, 401);
    EXPECT_EQ(result->get_header_value("X-Error-Code"), "RepoNotFound");
    EXPECT_EQ(hub->Get(file, headers)->status, 401);
  }
  EXPECT_EQ(hub->Get("/api/models/acme/missing")->status, 401);  // anonymous: can't tell
  EXPECT_EQ(hub->Get("/api/models/acme/missing", bearer(kHubWriteToken))->status, 404);
  EXPECT_EQ(hub->Get(info, bearer(kHubReadToken))->status, 200);
  auto content = hub->Get(file, bearer(kHubReadToken));
  EXPECT_EQ(content->status, 200);
  EXPECT_EQ(content->body, "# private acme cache\n");
}

TEST(HubServerTest, TreePaginatesWithAnAbsoluteLink) {
  HubServer server(HubServer::example_config(), {"--page-size", "2"});
  Http hub(server.url());
  std::string url =
      server.url() + "/api/models/" + kHubPublicRepo + "/tree/main?recursive=true&expand=false";
  std::vector<std::string> paths;
  int pages = 0;
  while (!url.empty()) {
    auto page = get_url(url);
    ASSERT_EQ(page->status, 200) << page->body;
    ++pages;
    for (const auto& entry : body_of(page)) paths.push_back(entry["path"]);
    std::string link = page->get_header_value("Link");
    url.clear();
    if (!link.empty()) {
      ASSERT_TRUE(link.starts_with("<" + server.url() + "/api/models/")) << link;
      ASSERT_TRUE(link.ends_with(">; rel=\"next\"")) << link;
      url = link.substr(1, link.find('>') - 1);
      EXPECT_NE(url.find("recursive=true"), std::string::npos);
      EXPECT_NE(url.find("cursor="), std::string::npos);
    }
  }
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(paths, (std::vector<std::string>{".gitattributes", "README.md", "registry",
                                             "registry/entry.json"}));
}

TEST(HubServerTest, TreeEntriesSubPathsAndFlags) {
  HubServer server;
  Http hub(server.url());
  std::string base = std::string("/api/models/") + kHubPublicRepo + "/tree/main";
  // Python sends True, JS true, older links 1.
  for (const char* flag : {"true", "True", "1"}) {
    EXPECT_EQ(body_of(hub->Get(base + "?recursive=" + flag)).size(), 4u) << flag;
  }
  json top = body_of(hub->Get(base));
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[2]["type"], "directory");
  EXPECT_EQ(top[2]["path"], "registry");
  EXPECT_EQ(top[1]["oid"], git_blob_id("# acme cache\n"));
  EXPECT_EQ(top[1]["size"], 13);
  // Sub-folders arrive with '/' raw (JS) or as %2F (Python).
  ASSERT_EQ(
      commit(hub, kHubPublicRepo, {header_line("nested"), file_line("a/b/c.txt", "c")})->status,
      200);
  for (const char* sub : {"/a/b", "/a/b/", "/a%2Fb", "/a%2fb%2F"}) {
    auto listed = hub->Get(base + sub);
    ASSERT_EQ(listed->status, 200) << sub;
    EXPECT_EQ(
        body_of(listed),
        (json{{{"type", "file"}, {"oid", git_blob_id("c")}, {"size", 1}, {"path", "a/b/c.txt"}}}))
        << sub;
  }
  auto missing = hub->Get(base + "/nope");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("X-Error-Code"), "EntryNotFound");
  auto no_revision = hub->Get(std::string("/api/models/") + kHubPublicRepo + "/tree/nope");
  EXPECT_EQ(no_revision->status, 404);
  EXPECT_EQ(no_revision->get_header_value("X-Error-Code"), "RevisionNotFound");
  json expanded = body_of(hub->Get(base + "?expand=true"));
  EXPECT_EQ(expanded[1]["lastCommit"]["title"], "initial commit");
}

TEST(HubServerTest, PathsInfoAcceptsJsonAndForm) {
  HubServer server;
  Http hub(server.url());
  std::string path = std::string("/api/models/") + kHubPublicRepo + "/paths-info/main";
  auto from_json = hub->Post(path, json{{"paths", {"README.md", "registry", "nope"}}}.dump(),
                             "application/json");
  ASSERT_EQ(from_json->status, 200);
  EXPECT_EQ(body_of(from_json).size(), 2u);
  auto from_form = hub->Post(path, "paths=README.md&paths=registry%2Fentry.json&expand=True",
                             "application/x-www-form-urlencoded");
  ASSERT_EQ(from_form->status, 200);
  json entries = body_of(from_form);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1]["path"], "registry/entry.json");
  EXPECT_TRUE(entries[1].contains("lastCommit"));
}

TEST(HubServerTest, ResolveServesRangesAndErrors) {
  HubServer server;
  Http hub(server.url());
  std::string commit_id = head_commit(hub, kHubPublicRepo);
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  auto head = hub->Head(file);
  ASSERT_EQ(head->status, 200);
  EXPECT_EQ(head->get_header_value("ETag"), "\"" + git_blob_id("# acme cache\n") + "\"");
  EXPECT_EQ(head->get_header_value("X-Repo-Commit"), commit_id);
  EXPECT_EQ(head->get_header_value("Content-Length"), "13");

  auto part = hub->Get(file, {{"Range", "bytes=2-5"}});
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->body, "acme");
  EXPECT_EQ(part->get_header_value("Content-Range"), "bytes 2-5/13");
  auto first = hub->Get(file, {{"Range", "bytes=0-0"}});
  EXPECT_EQ(first->status, 206);
  EXPECT_EQ(first->get_header_value("Content-Range"), "bytes 0-0/13");
  EXPECT_EQ(hub->Get(file, {{"Range", "bytes=-6"}})->body, "cache\n");
  EXPECT_EQ(hub->Get(file, {{"Range", "bytes=10-"}})->body, "he\n");
  auto beyond = hub->Get(file, {{"Range", "bytes=13-"}});
  EXPECT_EQ(beyond->status, 416);
  EXPECT_EQ(beyond->get_header_value("Content-Range"), "bytes */13");

  // By commit id, and under raw/.
  EXPECT_EQ(
      hub->Get(std::string("/") + kHubPublicRepo + "/resolve/" + commit_id + "/README.md")->status,
      200);
  EXPECT_EQ(hub->Get(std::string("/") + kHubPublicRepo + "/raw/main/README.md")->body,
            "# acme cache\n");

  auto missing = hub->Get(std::string("/") + kHubPublicRepo + "/resolve/main/nope.txt");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("X-Error-Code"), "EntryNotFound");
  EXPECT_EQ(missing->get_header_value("X-Repo-Commit"), commit_id);
  auto no_revision = hub->Head(std::string("/") + kHubPublicRepo + "/resolve/nope/README.md");
  EXPECT_EQ(no_revision->status, 404);
  EXPECT_EQ(no_revision->get_header_value("X-Error-Code"), "RevisionNotFound");
}

// The Hub since 2025: a regular file's resolve is a same-host 307 (relative Location) to a
// commit-pinned /api/resolve-cache/ URL, and only that final answer carries the ETag (git blob id)
// and X-Repo-Commit, which is where huggingface_hub reads them.
TEST(HubServerTest, RegularFilesRedirectToTheResolveCacheOfTheirCommit) {
  HubServer server;
  Http hub(server.url());
  std::string commit_id = head_commit(hub, kHubPublicRepo);
  std::string etag = "\"" + git_blob_id("# acme cache\n") + "\"";
  for (const std::string method : {"HEAD", "GET"}) {
    auto first = method == "HEAD"
                     ? (*hub).Head(std::string("/") + kHubPublicRepo + "/resolve/main/README.md")
                     : (*hub).Get(std::string("/") + kHubPublicRepo + "/resolve/main/README.md");
    ASSERT_EQ(first->status, 307) << method;
    std::string location = first->get_header_value("Location");
    EXPECT_TRUE(location.starts_with(std::string("/api/resolve-cache/models/") + kHubPublicRepo +
                                     "/" + commit_id + "/README.md?"))
        << location;
    EXPECT_FALSE(first->has_header("ETag")) << method;
    EXPECT_FALSE(first->has_header("X-Repo-Commit")) << method;
    auto final_answer = method == "HEAD" ? (*hub).Head(location) : (*hub).Get(location);
    ASSERT_EQ(final_answer->status, 200) << method;
    EXPECT_EQ(final_answer->get_header_value("ETag"), etag);
    EXPECT_EQ(final_answer->get_header_value("X-Repo-Commit"), commit_id);
    if (method == "GET") {
      EXPECT_EQ(final_answer->body, "# acme cache\n");
    }
  }
  // The pinned URL keeps serving that commit's file after main moved on.
  std::string pinned =
      std::string("/api/resolve-cache/models/") + kHubPublicRepo + "/" + commit_id + "/README.md";
  ASSERT_EQ(
      commit(hub, kHubPublicRepo, {header_line("x"), file_line("README.md", "changed\n")})->status,
      200);
  EXPECT_EQ(hub->Get(pinned)->body, "# acme cache\n");
  EXPECT_EQ(hub->Get(pinned, {{"Range", "bytes=2-5"}})->body, "acme");
  EXPECT_EQ(hub->Get(pinned, {{"If-None-Match", etag}})->status, 304);
  auto missing = hub->Get(std::string("/api/resolve-cache/models/") + kHubPublicRepo + "/" +
                          commit_id + "/nope.txt");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("X-Error-Code"), "EntryNotFound");
  EXPECT_EQ(hub->Get(std::string("/api/resolve-cache/models/") + kHubPublicRepo + "/main/README.md")
                ->status,
            400);
  // A private repo's pinned URL wants the token as its resolve does.
  std::string private_commit = head_commit(hub, kHubPrivateRepo);
  std::string secret = std::string("/api/resolve-cache/models/") + kHubPrivateRepo + "/" +
                       private_commit + "/README.md";
  EXPECT_EQ(hub->Get(secret)->status, 401);
  EXPECT_EQ(hub->Get(secret, bearer(kHubReadToken))->body, "# private acme cache\n");
  EXPECT_EQ(hub->Get(std::string("/") + kHubPrivateRepo + "/resolve/main/README.md",
                     bearer(kHubReadToken))
                ->body,
            "# private acme cache\n");
}

TEST(HubServerTest, LfsFilesRedirectToTheCdnWhichRefusesTheHubToken) {
  HubServer server;
  Http hub(server.url());
  std::string content(300 * 1000, 'n');
  ASSERT_EQ(hub->Post("/api/repos/create", bearer(kHubWriteToken),
                      json{{"name", "files"}, {"organization", "alice"}}.dump(), "application/json")
                ->status,
            200);
  std::string oid = upload_lfs_file(hub, "alice/files", "model.neff", content);

  auto head = hub->Head("/alice/files/resolve/main/model.neff", bearer(kHubWriteToken));
  ASSERT_EQ(head->status, 302);
  EXPECT_EQ(head->get_header_value("X-Linked-Etag"), "\"" + oid + "\"");
  EXPECT_EQ(head->get_header_value("X-Linked-Size"), std::to_string(content.size()));
  EXPECT_EQ(head->get_header_value("X-Repo-Commit"), head_commit(hub, "alice/files"));
  std::string location = head->get_header_value("Location");
  ASSERT_TRUE(location.starts_with(server.cdn_url() + "/")) << location;

  auto download = get_url(location);
  ASSERT_EQ(download->status, 200);
  EXPECT_EQ(download->body, content);
  EXPECT_EQ(download->get_header_value("ETag"), "\"" + oid + "\"");
  auto ranged = get_url(location, {{"Range", "bytes=0-0"}});
  EXPECT_EQ(ranged->status, 206);
  EXPECT_EQ(ranged->get_header_value("Content-Range"), "bytes 0-0/300000");

  // Storage is another origin: the Hub token must not be sent there (S3 answers 400).
  EXPECT_EQ(get_url(location, bearer(kHubWriteToken))->status, 400);
  std::string tampered = location;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ(get_url(tampered)->status, 403);

  auto pointer = hub->Get("/alice/files/raw/main/model.neff");
  EXPECT_EQ(pointer->status, 200);
  EXPECT_EQ(pointer->body,
            "version https://git-lfs.github.com/spec/v1\noid sha256:" + oid + "\nsize 300000\n");
  json tree = body_of(hub->Get("/api/models/alice/files/tree/main"));
  EXPECT_EQ(tree[1]["path"], "model.neff");
  EXPECT_EQ(tree[1]["oid"], git_blob_id(pointer->body));
  EXPECT_EQ(tree[1]["lfs"],
            (json{{"oid", oid}, {"size", 300000}, {"pointerSize", pointer->body.size()}}));
}

TEST(HubServerTest, PreuploadChoosesTheUploadMode) {
  HubServer server(HubServer::example_config(), {"--lfs-threshold", "5000"});
  Http hub(server.url());
  std::string text_sample = base64_sample("plain text");
  std::string binary_sample = base64_sample(std::string("\0\1\2bin", 6));
  json files = json::array({
      {{"path", "README.md"}, {"size", 13}, {"sample", text_sample}},
      {{"path", "model.neff"}, {"size", 10}, {"sample", binary_sample}},
      {{"path", "weights.safetensors"}, {"size", 10}, {"sample", text_sample}},
      {{"path", "empty.bin"}, {"size", 0}, {"sample", ""}},
      {{"path", "big.txt"}, {"size", 5001}, {"sample", text_sample}},
      {{"path", "blob.dat"}, {"size", 4000}, {"sample", binary_sample}},
      {{"path", "logs/run.log"}, {"size", 10}, {"sample", text_sample}},
  });
  std::string path = std::string("/api/models/") + kHubPublicRepo + "/preupload/main";
  auto result =
      hub->Post(path, bearer(kHubWriteToken),
                json{{"files", files}, {"gitIgnore", "logs/\n"}}.dump(), "application/json");
  ASSERT_EQ(result->status, 200) << result->body;
  std::map<std::string, json> by_path;
  json answer = body_of(result);
  for (const auto& file : answer["files"]) by_path[file["path"]] = file;
  EXPECT_EQ(by_path["README.md"]["uploadMode"], "regular");
  EXPECT_EQ(by_path["README.md"]["oid"], git_blob_id("# acme cache\n"));  // the remote file
  EXPECT_EQ(by_path["model.neff"]["uploadMode"], "lfs");
  EXPECT_EQ(by_path["model.neff"]["oid"], nullptr);
  EXPECT_EQ(by_path["weights.safetensors"]["uploadMode"], "lfs");
  EXPECT_EQ(by_path["empty.bin"]["uploadMode"], "regular");  // empty files never go LFS
  EXPECT_EQ(by_path["big.txt"]["uploadMode"], "lfs");        // over --lfs-threshold
  EXPECT_EQ(by_path["blob.dat"]["uploadMode"], "regular");   // binary but under 1 MB
  for (const auto& [name, file] : by_path) {
    ASSERT_TRUE(file.contains("shouldIgnore")) << name;  // huggingface_hub needs the key
    EXPECT_EQ(file["shouldIgnore"], name == "logs/run.log") << name;
  }
  files = json::array({{{"path", "huge.dat"}, {"size", 2000000}, {"sample", binary_sample}}});
  auto big_binary =
      hub->Post(path, bearer(kHubWriteToken), json{{"files", files}}.dump(), "application/json");
  EXPECT_EQ(body_of(big_binary)["files"][0]["uploadMode"], "lfs");
  EXPECT_EQ(
      hub->Post(path, bearer(kHubReadToken), json{{"files", files}}.dump(), "application/json")
          ->status,
      403);
}

TEST(HubServerTest, BasicLfsUploadChecksTheContent) {
  HubServer server;
  Http hub(server.url());
  std::string content = "some LFS content";
  std::string oid = sha256_hex(content);
  json objects = {{{"oid", oid}, {"size", content.size()}}};
  EXPECT_EQ(lfs_batch(hub, kHubPublicRepo, objects, kHubReadToken)->status, 403);
  EXPECT_EQ(lfs_batch(hub, kHubPublicRepo, objects, kHubBobToken)->status, 403);
  EXPECT_EQ(lfs_batch(hub, kHubPublicRepo, objects, kHubWriteToken, "md5")->status, 409);
  auto batch = lfs_batch(hub, kHubPublicRepo, objects, kHubWriteToken, "sha_256");  // JS spelling
  ASSERT_EQ(batch->status, 200) << batch->body;
  EXPECT_EQ(batch->get_header_value("Content-Type"), "application/vnd.git-lfs+json");
  json object = body_of(batch)["objects"][0];
  EXPECT_EQ(body_of(batch)["transfer"], "basic");
  auto [origin, path] = split_url(object["actions"]["upload"]["href"]);
  EXPECT_EQ(origin, server.cdn_url());
  EXPECT_FALSE(object["actions"]["upload"]["header"].contains("chunk_size"));
  Http cdn(origin);
  EXPECT_EQ(cdn->Put(path, "wrong content!!!", "application/octet-stream")->status, 400);
  EXPECT_EQ(cdn->Put(path, "short", "application/octet-stream")->status, 400);
  EXPECT_EQ(cdn->Put(path, bearer(kHubWriteToken), content, "application/octet-stream")->status,
            400);
  EXPECT_EQ(cdn->Put(path, content, "application/octet-stream")->status, 200);
  // Stored objects come back without actions.
  json again = body_of(lfs_batch(hub, kHubPublicRepo, objects))["objects"][0];
  EXPECT_FALSE(again.contains("actions"));
  auto verify = split_url(object["actions"]["verify"]["href"]);
  EXPECT_EQ(hub->Post(verify.second, bearer(kHubWriteToken),
                      json{{"oid", oid}, {"size", 16}}.dump(), "application/vnd.git-lfs+json")
                ->status,
            200);
}

TEST(HubServerTest, MultipartUploadFlow) {
  HubServer server(HubServer::example_config(),
                   {"--multipart-threshold", "1000", "--multipart-chunk-size", "400"});
  Http hub(server.url());
  std::string content;
  for (int i = 0; i < 1000; ++i) content += static_cast<char>('a' + i % 26);
  std::string oid = sha256_hex(content);
  auto batch = lfs_batch(hub, kHubPublicRepo, {{{"oid", oid}, {"size", 1000}}});
  ASSERT_EQ(batch->status, 200);
  json upload = body_of(batch)["objects"][0]["actions"]["upload"];
  json header = upload["header"];
  EXPECT_EQ(header["chunk_size"], "400");
  ASSERT_TRUE(header.contains("00001") && header.contains("00002") && header.contains("00003"));
  EXPECT_FALSE(header.contains("00004"));

  json parts = json::array();
  for (int part = 1; part <= 3; ++part) {
    auto [origin, path] = split_url(header["0000" + std::to_string(part)]);
    EXPECT_EQ(origin, server.cdn_url());
    Http cdn(origin);
    if (part == 2) {  // a part of the wrong size is refused
      EXPECT_EQ(cdn->Put(path, content.substr(0, 10), "application/octet-stream")->status, 400);
    }
    auto put = cdn->Put(path, content.substr((part - 1) * 400, 400), "application/octet-stream");
    ASSERT_EQ(put->status, 200) << put->body;
    std::string etag = put->get_header_value("ETag");
    ASSERT_FALSE(etag.empty());
    parts.push_back({{"partNumber", part}, {"etag", etag}});
  }
  auto [origin, completion] = split_url(upload["href"]);
  EXPECT_EQ(origin, server.url());  // on the Hub, as on huggingface.co, signed: no token
  json wrong = {{"oid", oid}, {"parts", parts}};
  wrong["parts"][1]["etag"] = "\"0000\"";
  EXPECT_EQ(hub->Post(completion, wrong.dump(), "application/vnd.git-lfs+json")->status, 400);
  auto complete = hub->Post(completion, json{{"oid", oid}, {"parts", parts}}.dump(),
                            "application/vnd.git-lfs+json");
  ASSERT_EQ(complete->status, 200) << complete->body;
  EXPECT_FALSE(
      body_of(lfs_batch(hub, kHubPublicRepo, {{{"oid", oid}, {"size", 1000}}}))["objects"][0]
          .contains("actions"));
  json line = {{"key", "lfsFile"},
               {"value", {{"path", "big.bin"}, {"algo", "sha256"}, {"oid", oid}, {"size", 1000}}}};
  ASSERT_EQ(commit(hub, kHubPublicRepo, {header_line("multipart"), line})->status, 200);
  auto location = hub->Head(std::string("/") + kHubPublicRepo + "/resolve/main/big.bin")
                      ->get_header_value("Location");
  EXPECT_EQ(get_url(location)->body, content);
}

TEST(HubServerTest, CommitOperationsAndErrors) {
  HubServer server;
  Http hub(server.url());
  std::string repo = kHubPublicRepo;
  std::string before = head_commit(hub, repo);
  json base64_file = {
      {"key", "file"},
      {"value", {{"path", "dir/b64.txt"}, {"content", "aGVsbG8="}, {"encoding", "base64"}}}};
  auto made =
      commit(hub, repo, {header_line("add files"), file_line("dir/a.txt", "A"), base64_file});
  ASSERT_EQ(made->status, 200) << made->body;
  json result = body_of(made);
  EXPECT_EQ(result["success"], true);
  std::string oid = result["commitOid"];
  EXPECT_EQ(oid.size(), 40u);
  EXPECT_EQ(result["commitUrl"], server.url() + "/" + repo + "/commit/" + oid);
  EXPECT_EQ(result["pullRequestUrl"], nullptr);
  EXPECT_TRUE(result.contains("hookOutput"));
  EXPECT_EQ(hub->Get("/" + repo + "/resolve/main/dir/b64.txt")->body, "hello");
  json history = body_of(hub->Get("/api/models/" + repo + "/commits/main"));
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0]["id"], oid);
  EXPECT_EQ(history[1]["id"], before);
  // The old commit still resolves to the old tree.
  EXPECT_EQ(hub->Get("/" + repo + "/resolve/" + before + "/dir/a.txt")->status, 404);

  auto missing = commit(
      hub, repo, {header_line("del"), {{"key", "deletedFile"}, {"value", {{"path", "nope"}}}}});
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("X-Error-Code"), "EntryNotFound");
  auto folder = commit(
      hub, repo, {header_line("del"), {{"key", "deletedFolder"}, {"value", {{"path", "dir/"}}}}});
  EXPECT_EQ(folder->status, 200);
  EXPECT_EQ(hub->Get("/api/models/" + repo + "/tree/main/dir")->status, 404);
  json unknown_lfs = {
      {"key", "lfsFile"},
      {"value",
       {{"path", "x.bin"}, {"algo", "sha256"}, {"oid", std::string(64, 'a')}, {"size", 3}}}};
  EXPECT_EQ(commit(hub, repo, {header_line("lfs"), unknown_lfs})->status, 400);
  std::string big(10 * 1024 * 1024 + 1, 'x');
  EXPECT_EQ(commit(hub, repo, {header_line("big"), file_line("big.txt", big)})->status, 400);
  EXPECT_EQ(commit(hub, repo, {file_line("a.txt", "no header")})->status, 400);
  EXPECT_EQ(commit(hub, repo, {header_line("x"), file_line("../up", "x")})->status, 400);
  EXPECT_EQ(commit(hub, repo, {header_line("x"), file_line("a", "x")}, kHubReadToken)->status, 403);
  EXPECT_EQ(hub->Post("/api/models/" + repo + "/commit/main", ndjson({header_line("x")}),
                      "application/x-ndjson")
                ->status,
            401);
}

TEST(HubServerTest, CommitWithAStaleParentIs412) {
  HubServer server;
  Http hub(server.url());
  std::string parent = head_commit(hub, kHubPublicRepo);
  ASSERT_EQ(
      commit(hub, kHubPublicRepo, {header_line("one", parent), file_line("1.txt", "1")})->status,
      200);
  auto stale = commit(hub, kHubPublicRepo, {header_line("two", parent), file_line("2.txt", "2")});
  EXPECT_EQ(stale->status, 412);
  EXPECT_EQ(body_of(stale)["error"], "A commit has happened since. Please refresh and try again.");
  EXPECT_EQ(commit(hub, kHubPublicRepo,
                   {header_line("two", head_commit(hub, kHubPublicRepo)), file_line("2.txt", "2")})
                ->status,
            200);
}

TEST(HubServerTest, PullRequestCommitsGoToRefsPr) {
  HubServer server;
  Http hub(server.url());
  std::string main_before = head_commit(hub, kHubPublicRepo);
  auto made = hub->Post(std::string("/api/models/") + kHubPublicRepo + "/commit/main?create_pr=1",
                        bearer(kHubWriteToken),
                        ndjson({header_line("proposal"), file_line("pr.txt", "pr")}),
                        "application/x-ndjson");
  ASSERT_EQ(made->status, 200) << made->body;
  EXPECT_EQ(body_of(made)["pullRequestUrl"],
            server.url() + "/" + kHubPublicRepo + "/discussions/1");
  EXPECT_EQ(head_commit(hub, kHubPublicRepo), main_before);
  // Revisions are percent-encoded with no safe characters (refs%2Fpr%2F1).
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/refs%2Fpr%2F1/pr.txt";
  EXPECT_EQ(hub->Get(file)->body, "pr");
  EXPECT_EQ(
      hub->Get(std::string("/api/models/") + kHubPublicRepo + "/revision/refs%2Fpr%2F1")->status,
      200);
  json refs =
      body_of(hub->Get(std::string("/api/models/") + kHubPublicRepo + "/refs?include_prs=1"));
  EXPECT_EQ(refs["pullRequests"][0]["name"], "refs/pr/1");
  EXPECT_EQ(refs["branches"][0]["name"], "main");
}

TEST(HubServerTest, AccessLogRecordsBothListeners) {
  HubServer server;
  Http hub(server.url());
  hub->Get(std::string("/") + kHubPublicRepo + "/resolve/main/README.md",
           {{"Range", "bytes=0-3"}, {"Authorization", std::string("Bearer ") + kHubReadToken}});
  ASSERT_EQ(hub->Post("/api/repos/create", bearer(kHubWriteToken), json{{"name", "logged"}}.dump(),
                      "application/json")
                ->status,
            200);
  upload_lfs_file(hub, "alice/logged", "w.bin", "weights");
  server.access_log();  // admin calls are not logged
  json log = server.access_log();
  ASSERT_GE(log.size(), 6u);
  json redirected = log[0];
  EXPECT_EQ(redirected["method"], "GET");
  EXPECT_EQ(redirected["path"], std::string("/") + kHubPublicRepo + "/resolve/main/README.md");
  EXPECT_EQ(redirected["status"], 307);
  EXPECT_EQ(redirected["authorization"], true);
  EXPECT_EQ(redirected["bytes_out"], 0);
  json get = log[1];
  EXPECT_EQ(get["method"], "GET");
  EXPECT_TRUE(get["path"].get<std::string>().starts_with(std::string("/api/resolve-cache/models/") +
                                                         kHubPublicRepo + "/"))
      << get;
  EXPECT_EQ(get["status"], 206);
  EXPECT_EQ(get["authorization"], true);
  EXPECT_EQ(get["listener"], "hub");
  EXPECT_EQ(get["range"], "bytes=0-3");
  EXPECT_EQ(get["bytes_out"], 4);
  json put = log[4];
  EXPECT_EQ(put["method"], "PUT");
  EXPECT_EQ(put["listener"], "cdn");
  EXPECT_EQ(put["authorization"], false);
  EXPECT_EQ(put["bytes_in"], 7);
  EXPECT_NE(put["query"].get<std::string>().find("signature="), std::string::npos);
  EXPECT_EQ(log[5]["path"], "/api/models/alice/logged/commit/main");
  for (const auto& entry : log) {
    EXPECT_FALSE(entry["path"].get<std::string>().starts_with("/_admin")) << entry;
  }
  server.clear_log();
  EXPECT_TRUE(server.access_log().empty());
}

TEST(HubServerTest, FaultStatusAppliesToCountMatchingRequests) {
  HubServer server;
  Http hub(server.url());
  server.set_faults({{{"match", {{"method", "GET"}, {"path_contains", "/resolve/"}}},
                      {"count", 2},
                      {"action", "status"},
                      {"status", 429},
                      {"retry_after", 3},
                      {"headers", {{"RateLimit", "\"resolvers\";r=0;t=3"}}}}});
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  EXPECT_EQ(hub->Get(std::string("/api/models/") + kHubPublicRepo)->status, 200);  // no match
  for (int i = 0; i < 2; ++i) {
    auto limited = hub->Get(file);
    EXPECT_EQ(limited->status, 429);
    EXPECT_EQ(limited->get_header_value("Retry-After"), "3");
    EXPECT_EQ(limited->get_header_value("RateLimit"), "\"resolvers\";r=0;t=3");
  }
  EXPECT_EQ(hub->Get(file)->status, 200);
  EXPECT_EQ(server.access_log()[1]["fault"], "status");

  server.set_faults({{{"match", {{"listener", "hub"}, {"method", "POST"}}},
                      {"action", "status"},
                      {"status", 503},
                      {"x_error_code", "ServiceUnavailable"}}});
  auto refused = commit(hub, kHubPublicRepo, {header_line("x"), file_line("a.txt", "a")});
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("X-Error-Code"), "ServiceUnavailable");
  // The body was drained, so the connection still works.
  EXPECT_EQ(commit(hub, kHubPublicRepo, {header_line("x"), file_line("a.txt", "a")})->status, 200);
  server.set_faults({{{"action", "status"}, {"status", 500}}});
  server.clear_faults();
  EXPECT_EQ(hub->Get(file)->status, 200);
}

TEST(HubServerTest, FaultDelayWaitsThenAnswers) {
  HubServer server;
  Http hub(server.url());
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  server.set_faults(
      {{{"match", {{"path_contains", "README.md"}}}, {"action", "delay"}, {"ms", 700}}});
  auto start = std::chrono::steady_clock::now();
  auto late = hub->Get(file);
  auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 200);
  EXPECT_GE(waited, std::chrono::milliseconds(700));
  EXPECT_EQ(server.access_log()[0]["fault"], "delay");
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(hub->Get(file)->status, 200);  // count 1: the next one is answered at once
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_THROW(server.set_faults({{{"action", "delay"}}}), std::runtime_error);  // no "ms"
  EXPECT_THROW(server.set_faults({{{"action", "delay"}, {"ms", 1}, {"apply_first", "yes"}}}),
               std::runtime_error);
}

TEST(HubServerTest, FaultDelayApplyFirstLandsACommitTheClientGaveUpOn) {
  HubServer server;
  Http hub(server.url());
  std::string before = head_commit(hub, kHubPublicRepo);
  server.set_faults({{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                      {"action", "delay"},
                      {"ms", 5000},
                      {"apply_first", true}}});
  hub->set_read_timeout(1, 0);
  auto gave_up = commit(hub, kHubPublicRepo, {header_line("late"), file_line("late.txt", "x")});
  EXPECT_FALSE(gave_up);  // no answer within 1 s
  Http other(server.url());
  EXPECT_NE(head_commit(other, kHubPublicRepo), before);
  EXPECT_EQ(other->Get(std::string("/") + kHubPublicRepo + "/resolve/main/late.txt")->body, "x");

  // Without apply_first the change waits too: nothing has landed while the answer is delayed.
  server.set_faults({{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                      {"action", "delay"},
                      {"ms", 3000}}});
  std::string landed = head_commit(other, kHubPublicRepo);
  Http impatient(server.url());
  impatient->set_read_timeout(1, 0);
  EXPECT_FALSE(commit(impatient, kHubPublicRepo, {header_line("later"), file_line("b.txt", "b")}));
  EXPECT_EQ(head_commit(other, kHubPublicRepo), landed);
}

TEST(HubServerTest, FaultHangNeverAnswersUntilTheServerStops) {
  auto server = std::make_unique<HubServer>();
  Http hub(server->url());
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  server->set_faults({{{"match", {{"path_contains", "README.md"}}}, {"action", "hang"}}});
  hub->set_read_timeout(2, 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(hub->Get(file));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  Http other(server->url());
  EXPECT_EQ(other->Get(file)->status, 200);  // count 1: only the first request hangs
  // A hanging request does not keep the server from stopping (SIGKILL would take 5 s).
  start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(4500));
}

TEST(HubServerTest, FaultDropAfterCutsTheBody) {
  HubServer server;
  Http hub(server.url());
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  server.set_faults(
      {{{"match", {{"path_contains", "README.md"}}}, {"action", "drop_after"}, {"bytes", 5}}});
  std::string received;
  auto cut = hub->Get(file, [&](const char* data, size_t length) {
    received.append(data, length);
    return true;
  });
  EXPECT_FALSE(cut);  // the connection closed before Content-Length bytes
  EXPECT_EQ(received, "# acm");
  // The resolve's redirect, a bodiless answer, left the fault to the answer with the body.
  json log = server.access_log();
  EXPECT_EQ(log[0]["status"], 307);
  EXPECT_TRUE(log[0]["fault"].is_null()) << log[0];
  EXPECT_EQ(log[1]["fault"], "drop_after");
  EXPECT_EQ(log[1]["bytes_out"], 5);
  EXPECT_EQ(hub->Get(file)->body, "# acme cache\n");
}

TEST(HubServerTest, FaultCorruptFlipsOneByte) {
  HubServer server;
  Http hub(server.url());
  std::string file = std::string("/") + kHubPublicRepo + "/resolve/main/README.md";
  server.set_faults({{{"action", "corrupt"}, {"offset", 2}}});
  std::string body = hub->Get(file)->body;
  std::string expected = "# acme cache\n";
  ASSERT_EQ(body.size(), expected.size());
  EXPECT_EQ(body[2], static_cast<char>(expected[2] ^ 0xFF));
  body[2] = expected[2];
  EXPECT_EQ(body, expected);
}

TEST(HubServerTest, FaultTrickleSlowsTheBody) {
  HubServer server;
  Http hub(server.url());
  ASSERT_EQ(
      commit(hub, kHubPublicRepo, {header_line("x"), file_line("slow.txt", std::string(3000, 's'))})
          ->status,
      200);
  server.set_faults(
      {{{"match", {{"listener", "hub"}}}, {"action", "trickle"}, {"bytes_per_second", 20000}}});
  auto start = std::chrono::steady_clock::now();
  auto result = hub->Get(std::string("/") + kHubPublicRepo + "/resolve/main/slow.txt");
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result->body, std::string(3000, 's'));
  EXPECT_GE(elapsed, std::chrono::milliseconds(140));  // 3000 B at 20000 B/s
}

TEST(HubServerTest, FaultRulesAreValidated) {
  HubServer server;
  Http hub(server.url());
  auto post = [&](const json& rules) {
    return hub->Post("/_admin/faults", rules.dump(), "application/json")->status;
  };
  EXPECT_EQ(post({{{"action", "explode"}}}), 400);
  EXPECT_EQ(post({{{"action", "status"}}}), 400);
  EXPECT_EQ(post({{{"action", "trickle"}, {"bytes_per_second", 0}}}), 400);
  EXPECT_EQ(post({{{"action", "drop_after"}, {"bytes", 1}, {"match", {{"listener", "s3"}}}}}), 400);
  EXPECT_EQ(post({{{"action", "status"}, {"status", 500}, {"count", -1}}}), 200);
  EXPECT_EQ(body_of(hub->Get("/_admin/faults"))[0]["remaining"], -1);
}

// The number after `name=` in a RateLimit header (`"api";r=2;t=57`), or -1 without one.
long rate_field(const std::string& header, const std::string& name) {
  size_t at = header.find(";" + name + "=");
  return at == std::string::npos ? -1 : std::stol(header.substr(at + name.size() + 2));
}

// The Hub's request quota (hub-http-api.md §7.2): every answer of the hub listener, errors
// included, says what is left of the caller's window; the token's quota counts for the token
// alone (an anonymous caller's for its address); past it comes the Hub's 429 with Retry-After,
// and the next window starts full.
TEST(HubServerTest, RateLimitHeadersCountDownToA429ThatSaysWhenToComeBack) {
  HubServer server(HubServer::example_config(), {"--api-quota", "3", "--quota-window", "4"});
  Http hub(server.url());
  for (long left : {2L, 1L, 0L}) {
    auto answer = hub->Get("/api/whoami-v2", bearer(kHubWriteToken));
    ASSERT_EQ(answer->status, 200);
    std::string limit = answer->get_header_value("RateLimit");
    EXPECT_TRUE(limit.starts_with("\"api\";")) << limit;
    EXPECT_EQ(rate_field(limit, "r"), left) << limit;
    EXPECT_GE(rate_field(limit, "t"), 1) << limit;
    EXPECT_LE(rate_field(limit, "t"), 4) << limit;
    EXPECT_EQ(answer->get_header_value("RateLimit-Policy"), "\"fixed window\";\"api\";q=3;w=4");
    server.access_log();  // admin calls count in no quota
  }
  auto refused = hub->Get("/api/whoami-v2", bearer(kHubWriteToken));
  ASSERT_EQ(refused->status, 429);
  EXPECT_EQ(rate_field(refused->get_header_value("RateLimit"), "r"), 0);
  std::string error = body_of(refused)["error"];
  EXPECT_TRUE(error.starts_with("We had to rate limit you")) << error;
  std::string retry_after = refused->get_header_value("Retry-After");
  ASSERT_FALSE(retry_after.empty());
  long wait = std::stol(retry_after);
  EXPECT_GE(wait, 1);
  EXPECT_LE(wait, 4);
  EXPECT_EQ(wait, rate_field(refused->get_header_value("RateLimit"), "t"));

  // Another token, and an anonymous caller, have windows of their own; an error carries the
  // headers too; file URLs are in the resolvers bucket, which has no quota here.
  auto bob = hub->Get("/api/whoami-v2", bearer(kHubBobToken));
  EXPECT_EQ(rate_field(bob->get_header_value("RateLimit"), "r"), 2);
  auto missing = hub->Get("/api/models/acme/nothing-here");
  EXPECT_EQ(missing->status, 401) << "anonymous: RepoNotFound as 401";
  EXPECT_EQ(rate_field(missing->get_header_value("RateLimit"), "r"), 2);
  auto file = (*hub).Get(std::string("/") + kHubPublicRepo + "/resolve/main/README.md",
                         bearer(kHubWriteToken));
  EXPECT_EQ(file->status, 307);
  EXPECT_FALSE(file->has_header("RateLimit"));

  std::this_thread::sleep_for(std::chrono::seconds(wait));
  auto again = hub->Get("/api/whoami-v2", bearer(kHubWriteToken));
  EXPECT_EQ(again->status, 200) << "a new window after Retry-After";
  EXPECT_EQ(rate_field(again->get_header_value("RateLimit"), "r"), 2);
  size_t limited =
      count_requests(server.access_log(), [](const json& entry) { return entry["status"] == 429; });
  EXPECT_EQ(limited, 1u);
}

// The Hub's commit quota, per repo per hour (here per 3 s): past it a commit is refused with the
// Hub's message and a Retry-After before anything is written; other repos still commit, and the
// next window takes commits again.
TEST(HubServerTest, TheCommitQuotaRefusesWithTheHubsMessageUntilItsWindowEnds) {
  HubServer server(HubServer::example_config(), {"--commit-quota", "2", "--commit-window", "3"});
  Http hub(server.url());
  // Two commits land per window; the third of a window is refused (a window that ends between
  // two commits lets a few more in).
  std::string head;
  auto commit_until_refused = [&] {
    for (int i = 0;; ++i) {
      head = head_commit(hub, kHubPublicRepo);
      std::string name = std::to_string(i) + ".txt";
      httplib::Result made = commit(hub, kHubPublicRepo, {header_line(name), file_line(name, "x")});
      if (made->status != 200 || i == 7) return made;
    }
  };
  httplib::Result refused = commit_until_refused();
  ASSERT_EQ(refused->status, 429) << refused->body;
  const std::string message =
      "You have exceeded our hourly quotas for action: commit. We invite you to retry later.";
  EXPECT_EQ(body_of(refused)["error"], message);
  EXPECT_EQ(refused->get_header_value("X-Error-Message"), message);
  long wait = std::stol(refused->get_header_value("Retry-After"));
  EXPECT_GE(wait, 1);
  EXPECT_LE(wait, 3);
  EXPECT_EQ(head_commit(hub, kHubPublicRepo), head) << "nothing was written";
  EXPECT_FALSE(refused->has_header("RateLimit")) << "no request quota was asked for";

  EXPECT_EQ(commit(hub, kHubPrivateRepo, {header_line("x"), file_line("x.txt", "x")})->status, 200)
      << "each repo has its own quota";
  std::this_thread::sleep_for(std::chrono::seconds(wait));
  EXPECT_EQ(commit(hub, kHubPublicRepo, {header_line("later"), file_line("l.txt", "l")})->status,
            200);
}

TEST(HubServerTest, DatasetReposUseTheirPrefix) {
  HubServer server;
  Http hub(server.url());
  ASSERT_EQ(hub->Post("/api/repos/create", bearer(kHubWriteToken),
                      json{{"name", "data"}, {"type", "dataset"}}.dump(), "application/json")
                ->status,
            200);
  auto made =
      hub->Post("/api/datasets/alice/data/commit/main", bearer(kHubWriteToken),
                ndjson({header_line("x"), file_line("rows.csv", "a,b\n")}), "application/x-ndjson");
  ASSERT_EQ(made->status, 200);
  EXPECT_EQ(body_of(made)["commitUrl"].get<std::string>().find(server.url() +
                                                               "/datasets/alice/data/commit/"),
            0u);
  EXPECT_EQ(hub->Get("/datasets/alice/data/resolve/main/rows.csv")->body, "a,b\n");
  EXPECT_EQ(hub->Get("/alice/data/resolve/main/rows.csv")->status, 401);  // not a model
  EXPECT_EQ(hub->Get("/api/spaces/alice/app")->status, 400);
}

}  // namespace
}  // namespace neuron_cache::testing
