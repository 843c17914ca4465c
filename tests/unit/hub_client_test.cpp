// The Hub client against the local Hub server: auth, listings, verified downloads through the
// CDN redirect, resumes, retries, one-commit uploads, conflicts. Request counts come from the
// server's access log.
#include "neuron_cache/hub/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <random>
#include <set>

#include "hub_fixture.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/local/entry_install.h"
#include "test_support.h"

namespace neuron_cache::hub {
namespace {

using nlohmann::json;
using testing::HubServer;
using testing::TempDir;
using testing::write_file;

ClientOptions options_for(const HubServer& server, const std::string& token) {
  ClientOptions options;
  options.endpoint = server.url();
  options.token = token;
  options.retry = {6, std::chrono::milliseconds(20), std::chrono::milliseconds(200)};
  return options;
}

std::string random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::string bytes(size, '\0');
  for (auto& c : bytes) c = static_cast<char>(generator() & 0xFF);
  return bytes;
}

class HubClientTest : public ::testing::Test {
 protected:
  HubClientTest()
      : server(HubServer::example_config(), {"--page-size", "3", "--multipart-threshold", "3145728",
                                             "--multipart-chunk-size", "1048576"}),
        client(options_for(server, testing::kHubWriteToken)) {}

  // Uploads `files` (path -> content) to `repo` in one commit.
  CommitResult upload(const std::string& repo, const std::map<std::string, std::string>& files) {
    std::vector<CommitOperation> operations;
    for (const auto& [path, content] : files) {
      write_file(local / path, content);
      operations.push_back({CommitOperation::Kind::Add, path, local / path});
    }
    return client.commit(repo, operations, "test upload", std::nullopt);
  }

  // Downloads `path` of `repo` and returns its bytes.
  std::string download(const std::string& repo, const std::string& path,
                       DownloadResult* out = nullptr) {
    TreeEntry expected;
    for (const auto& entry : client.paths_info(repo, {path})) expected = entry;
    std::FILE* file = std::tmpfile();
    std::vector<DownloadRequest> requests{{path, fileno(file), expected}};
    DownloadResult result = client.download(repo, "main", requests)[0];
    if (out != nullptr) *out = result;
    std::string content;
    std::rewind(file);
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) content.append(buffer, n);
    std::fclose(file);
    EXPECT_TRUE(result.ok) << result.error;
    return content;
  }

  HubServer server;
  HubClient client;
  TempDir local;
};

size_t count_on(const json& log, const std::string& listener) {
  return testing::count_requests(log, [&](const json& e) { return e["listener"] == listener; });
}

// The cdn listener plays a foreign host that answers whatever it is asked with `body`.
json redirect_to_foreign_host(const std::string& method, const std::string& path, int status,
                              const json& body) {
  return json::array(
      {{{"match", {{"method", method}, {"path_contains", path}, {"listener", "hub"}}},
        {"action", "redirect"},
        {"status", status},
        {"to", "cdn"}},
       {{"match", {{"listener", "cdn"}, {"path_contains", path}}},
        {"action", "status"},
        {"status", 200},
        {"body", body}}});
}

TEST_F(HubClientTest, ACommitRedirectedToAnotherHostIsNeitherSentThereNorASuccess) {
  std::string repo = client.create_repo("redirected-commit", "", true);
  for (int status : {302, 307, 308}) {
    server.set_faults(redirect_to_foreign_host("POST", "/commit/", status,
                                               {{"success", true}, {"commitOid", ""}}));
    server.clear_log();
    try {
      upload(repo, {{"file-" + std::to_string(status) + ".txt", "content"}});
      FAIL() << status << ": another host's 200 is not a commit";
    } catch (const Error& e) {
      EXPECT_TRUE(testing::contains(e.what(), "another host")) << e.what();
      EXPECT_FALSE(testing::contains(e.what(), testing::kHubWriteToken)) << e.what();
    }
    EXPECT_EQ(count_on(server.access_log(), "cdn"), 0u)
        << status << ": neither the commit body nor anything else reached the foreign host: "
        << server.access_log().dump(1);
  }
}

TEST_F(HubClientTest, ACommitAnswerWithoutCommitIdIsAFailure) {
  std::string repo = client.create_repo("no-oid", "", true);
  server.set_faults(json::array({{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                                  {"action", "status"},
                                  {"status", 200},
                                  {"body", {{"success", true}}}}}));
  try {
    upload(repo, {{"a.txt", "a"}});
    FAIL() << "a 200 without commitOid proves no commit";
  } catch (const Error& e) {
    EXPECT_TRUE(testing::contains(e.what(), "no commit id")) << e.what();
  }
}

TEST_F(HubClientTest, WhoamiDoesNotFollowARedirectToAnotherHost) {
  server.set_faults(redirect_to_foreign_host(
      "GET", "/api/whoami-v2", 302,
      {{"name", "mallory"}, {"auth", {{"accessToken", {{"role", "write"}}}}}}));
  try {
    std::string name = client.whoami().name;
    FAIL() << "the foreign host's user was taken: " << name;
  } catch (const Error& e) {
    EXPECT_TRUE(testing::contains(e.what(), "another host")) << e.what();
  }
  EXPECT_EQ(count_on(server.access_log(), "cdn"), 0u) << server.access_log().dump(1);
}

TEST(HubClientStorage, LfsUploadsCarryNoTokenEvenOnTheHubsOwnOrigin) {
  HubServer server(HubServer::example_config(),
                   {"--storage-on-hub", "--lfs-threshold", "1024", "--multipart-threshold",
                    "3145728", "--multipart-chunk-size", "1048576"});
  HubClient client(options_for(server, testing::kHubWriteToken));
  std::string repo = client.create_repo("same-origin-storage", "", true);
  TempDir local;
  write_file(local / "single.neff", random_bytes(1536 * 1024, 5));
  write_file(local / "parts.neff", random_bytes(5 << 20, 6));
  CommitResult commit =
      client.commit(repo,
                    {{CommitOperation::Kind::Add, "single.neff", local / "single.neff"},
                     {CommitOperation::Kind::Add, "parts.neff", local / "parts.neff"}},
                    "lfs", std::nullopt);
  EXPECT_TRUE(commit.committed);
  EXPECT_EQ(commit.lfs_uploaded, 2u);
  json log = server.access_log();
  auto storage = [](const json& e) {
    std::string path = e["path"].get<std::string>();
    return e["method"] == "PUT" || path.starts_with("/api/complete_multipart");
  };
  EXPECT_GE(testing::count_requests(log, storage), 7u) << "1 PUT, 5 parts, 1 completion";
  EXPECT_EQ(testing::count_requests(
                log, [&](const json& e) { return storage(e) && e["authorization"] == true; }),
            0u)
      << "signed storage URLs get no token: " << log.dump(1);
}

TEST_F(HubClientTest, WhoamiIsAskedOnce) {
  EXPECT_EQ(client.whoami().name, "alice");
  EXPECT_EQ(client.whoami().orgs, std::vector<std::string>{"acme"});
  EXPECT_EQ(client.whoami().role, "write");
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [](const json& e) { return e["path"] == "/api/whoami-v2"; }),
            1u);
}

TEST_F(HubClientTest, BadTokenGivesAnActionableError) {
  HubClient bad(options_for(server, "hf_not_a_real_token"));
  try {
    bad.whoami();
    FAIL() << "an invalid token must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HF_TOKEN"), std::string::npos) << e.what();
  }
}

TEST_F(HubClientTest, OfflineMakesNoRequest) {
  ClientOptions options = options_for(server, testing::kHubWriteToken);
  options.offline = true;
  HubClient offline(options);
  server.clear_log();
  EXPECT_THROW(offline.list_tree(testing::kHubPublicRepo), Error);
  EXPECT_THROW(offline.repo_info(testing::kHubPublicRepo), Error);
  EXPECT_TRUE(server.access_log().empty());
}

TEST_F(HubClientTest, CreateRepoIsPrivateAndRefusesDuplicates) {
  std::string repo = client.create_repo("my-cache", "", true);
  EXPECT_EQ(repo, "alice/my-cache");
  EXPECT_TRUE(client.repo_info(repo).is_private);
  EXPECT_TRUE(client.repo_exists(repo));
  try {
    client.create_repo("my-cache", "", true);
    FAIL() << "creating an existing repo must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  HubClient bob(options_for(server, testing::kHubBobToken));
  EXPECT_FALSE(bob.repo_exists(testing::kHubPrivateRepo)) << "private repos look missing";
  EXPECT_FALSE(client.repo_exists("acme/no-such-repo"));
}

// The head commit of a large cache repo costs a few hundred bytes, not its file list.
TEST(HubClientMetadata, RepoInfoOfAnEightThousandFileRepoStaysSmall) {
  json config = HubServer::example_config();
  json files = json::object();
  for (int i = 0; i < 8000; ++i) {
    files["neuronxcc-2.21/MODULE_" + std::to_string(1000000 + i) + "+d7517139/model.done"] = "";
  }
  config["repos"].push_back({{"id", "acme/big-cache"}, {"private", false}, {"files", files}});
  HubServer server(config);
  HubClient client(options_for(server, testing::kHubWriteToken));
  server.clear_log();
  RepoInfo info = client.repo_info("acme/big-cache");
  EXPECT_EQ(info.sha.size(), 40u);
  EXPECT_TRUE(client.repo_exists("acme/big-cache"));
  json log = server.access_log();
  ASSERT_EQ(log.size(), 2u) << log;
  for (const auto& request : log) EXPECT_LT(request["bytes_out"], 200) << request;

  // What the same request without `expand` costs: the whole file list.
  net::HttpEngine http({server.url(), testing::kHubWriteToken});
  EXPECT_GT(http.perform({"GET", server.url() + "/api/models/acme/big-cache"}).body.size(),
            400000u);
}

TEST_F(HubClientTest, ListingFollowsEveryPage) {
  std::string repo = client.create_repo("paged", "", false);
  std::map<std::string, std::string> files;
  for (int i = 0; i < 8; ++i) files["dir/f" + std::to_string(i) + ".txt"] = std::to_string(i);
  upload(repo, files);
  server.clear_log();
  auto entries = client.list_tree(repo, "dir");
  EXPECT_EQ(entries.size(), 8u);
  EXPECT_GE(testing::count_requests(server.access_log(),
                                    [](const json& e) {
                                      return e["path"].get<std::string>().find("/tree/") !=
                                             std::string::npos;
                                    }),
            3u)
      << "8 entries at 3 per page need at least 3 pages";
  EXPECT_TRUE(client.list_tree(repo, "missing-folder").empty());
}

TEST_F(HubClientTest, UploadThenDownloadByteIdenticalWithoutTokenOnTheCdn) {
  std::string repo = client.create_repo("roundtrip", "", true);
  std::map<std::string, std::string> files = {
      {"neuronxcc-2.21/MODULE_1+d7cde3b5/compile_flags.json", "[\"--target=trn1\"]"},
      {"neuronxcc-2.21/MODULE_1+d7cde3b5/model.done", ""},
      {"neuronxcc-2.21/MODULE_1+d7cde3b5/model.neff", random_bytes(1536 * 1024, 1)},
      {"neuronxcc-2.21/MODULE_1+d7cde3b5/model.hlo_module.pb", random_bytes(5 << 20, 2)},
  };
  CommitResult commit = upload(repo, files);
  EXPECT_TRUE(commit.committed);
  EXPECT_EQ(commit.commit_oid.size(), 40u);
  EXPECT_EQ(commit.lfs_uploaded, 2u);
  server.clear_log();
  for (const auto& [path, content] : files) {
    DownloadResult result;
    EXPECT_EQ(download(repo, path, &result), content) << path;
    // An empty file needs no request at all, so only fetched files report X-Repo-Commit.
    if (!content.empty()) {
      EXPECT_EQ(result.commit, commit.commit_oid) << "X-Repo-Commit";
    }
  }
  json log = server.access_log();
  EXPECT_GE(testing::count_requests(log, [](const json& e) { return e["listener"] == "cdn"; }), 2u);
  EXPECT_EQ(
      testing::count_requests(
          log, [](const json& e) { return e["listener"] == "cdn" && e["authorization"] == true; }),
      0u)
      << "the token must never reach the CDN";
}

// Bytes the client hashed itself and storage refused as not matching (S3's BadDigest for a PUT,
// the Hub's "Content does not match oid/size" for assembled parts) changed in transit: the object
// is sent once more, to fresh URLs, and the commit lands; refused again, the push fails, naming
// the network path, and commits nothing.
TEST_F(HubClientTest, ContentChangedInTransitIsSentOnceMoreThenTheCommitLands) {
  std::string repo = client.create_repo("transit", "", true);
  const std::string neff = "neuronxcc-2.21/MODULE_1+d7cde3b5/model.neff";          // one PUT
  const std::string hlo = "neuronxcc-2.21/MODULE_1+d7cde3b5/model.hlo_module.pb";  // 5 parts
  std::map<std::string, std::string> files = {{neff, random_bytes(1536 * 1024, 3)},
                                              {hlo, random_bytes(5 << 20, 4)}};
  auto flip_once = [](const std::string& path_part, int times) {
    return json{{"match", {{"listener", "cdn"}, {"method", "PUT"}, {"path_contains", path_part}}},
                {"action", "corrupt_upload"},
                {"offset", 4321},
                {"count", times}};
  };
  std::string neff_oid = sha256_hex(files[neff]), hlo_oid = sha256_hex(files[hlo]);
  server.set_faults(json::array({flip_once(neff_oid, 1), flip_once(hlo_oid + "/part/2", 1)}));
  CommitResult commit = upload(repo, files);
  EXPECT_TRUE(commit.committed);
  EXPECT_EQ(commit.lfs_uploaded, 2u);
  for (const auto& [path, content] : files) EXPECT_EQ(download(repo, path), content) << path;
  json log = server.access_log();
  EXPECT_EQ(testing::count_requests(log,
                                    [](const json& e) {
                                      return e["path"].get<std::string>().ends_with(
                                          "/info/lfs/objects/batch");
                                    }),
            2u)
      << "one batch request, then one for the refused objects";

  std::string again = client.create_repo("transit-again", "", true);
  files = {{neff, random_bytes(1536 * 1024, 5)}};
  server.set_faults(json::array({flip_once(sha256_hex(files[neff]), 2)}));
  try {
    upload(again, files);
    FAIL() << "a push whose bytes are changed on every try must fail";
  } catch (const Error& error) {
    std::string text = error.what();
    EXPECT_TRUE(testing::contains(text, "twice")) << text;
    EXPECT_TRUE(testing::contains(text, "network")) << text;
    EXPECT_TRUE(testing::contains(text, "BadDigest")) << text;
  }
  EXPECT_TRUE(client.paths_info(again, {neff}).empty()) << "nothing was committed";
}

// The Hub answers a regular file's resolve with a 307 to /api/resolve-cache/... on the same host,
// whose answer alone names the file (ETag: its git blob id) and the commit (X-Repo-Commit), as
// huggingface_hub reads them: the client takes both from that final answer.
TEST_F(HubClientTest, ARegularFileIsKnownByTheFinalAnswerOfTheHubsRedirect) {
  std::string repo = client.create_repo("pinned", "", true);
  CommitResult first = upload(repo, {{"flags.json", "[\"--target=trn1\"]"}});
  server.clear_log();
  DownloadResult result;
  EXPECT_EQ(download(repo, "flags.json", &result), "[\"--target=trn1\"]");
  EXPECT_EQ(result.commit, first.commit_oid);
  json log = server.access_log();
  ASSERT_EQ(log.size(), 3u) << log;  // paths-info, the resolve's 307, the pinned URL
  EXPECT_EQ(log[1]["status"], 307);
  EXPECT_TRUE(log[2]["path"].get<std::string>().starts_with("/api/resolve-cache/models/" + repo +
                                                            "/" + first.commit_oid + "/"))
      << log[2];
  EXPECT_EQ(log[2]["authorization"], true) << "the same host gets the token";

  // Listed, then changed on the Hub: the ETag of the final answer says so before any byte is
  // taken for the listed file.
  TreeEntry listed = client.paths_info(repo, {"flags.json"}).at(0);
  upload(repo, {{"flags.json", "[\"--target=trn2\"]"}});
  std::FILE* file = std::tmpfile();
  std::vector<DownloadRequest> requests{{"flags.json", fileno(file), listed}};
  DownloadResult stale = client.download(repo, "main", requests)[0];
  std::fclose(file);
  EXPECT_FALSE(stale.ok);
  EXPECT_NE(stale.error.find("flags.json changed on the Hub since it was listed"),
            std::string::npos)
      << stale.error;
}

TEST_F(HubClientTest, UnchangedFilesAndStoredLfsObjectsAreNotSentAgain) {
  std::string repo = client.create_repo("dedup", "", true);
  std::string neff = random_bytes(2 << 20, 3);
  upload(repo, {{"a/model.neff", neff}, {"a/flags.json", "[]"}});
  server.clear_log();
  CommitResult again = upload(repo, {{"a/model.neff", neff}, {"a/flags.json", "[]"}});
  EXPECT_FALSE(again.committed) << "nothing changed: no commit";
  EXPECT_EQ(again.unchanged, 2u);
  CommitResult copy = upload(repo, {{"b/model.neff", neff}});
  EXPECT_TRUE(copy.committed);
  EXPECT_EQ(copy.lfs_already_stored, 1u);
  EXPECT_EQ(copy.lfs_uploaded, 0u);
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [](const json& e) { return e["method"] == "PUT"; }),
            0u)
      << "no byte of a stored LFS object is uploaded again";
}

TEST_F(HubClientTest, DroppedDownloadResumesWithRange) {
  std::string repo = client.create_repo("resume", "", true);
  std::string neff = random_bytes(2 << 20, 4);
  upload(repo, {{"model.neff", neff}});
  server.set_faults(json::array({{{"match", {{"method", "GET"}, {"listener", "cdn"}}},
                                  {"count", 2},
                                  {"action", "drop_after"},
                                  {"bytes", 300000}}}));
  server.clear_log();
  EXPECT_EQ(download(repo, "model.neff"), neff);
  EXPECT_GE(testing::count_requests(
                server.access_log(),
                [](const json& e) { return e["listener"] == "cdn" && e["range"].is_string(); }),
            2u)
      << "each resume asks for the missing bytes only";
}

TEST_F(HubClientTest, ResumeAnsweredWith200StartsOver) {
  std::string repo = client.create_repo("restart", "", true);
  std::string neff = random_bytes(2 << 20, 8);
  upload(repo, {{"model.neff", neff}});
  server.set_faults(json::array({{{"match", {{"method", "GET"}, {"listener", "cdn"}}},
                                  {"count", 1},
                                  {"action", "drop_after"},
                                  {"bytes", 500000}},
                                 {{"match", {{"method", "GET"}, {"listener", "cdn"}}},
                                  {"count", 1},
                                  {"action", "ignore_range"}}}));
  server.clear_log();
  DownloadResult result;
  EXPECT_EQ(download(repo, "model.neff", &result), neff);
  json log = server.access_log();
  EXPECT_EQ(testing::count_requests(log,
                                    [](const json& e) {
                                      return e["listener"] == "cdn" && e["range"].is_string() &&
                                             e["status"] == 200;
                                    }),
            1u)
      << "the resume was answered with the whole file, and the client started over";
}

TEST_F(HubClientTest, DeletesAreCommitsAndMissingFilesAreReported) {
  std::string repo = client.create_repo("deletes", "", true);
  upload(repo, {{"a.txt", "a"}, {"b.txt", "b"}});
  CommitResult removed =
      client.commit(repo, {{CommitOperation::Kind::Delete, "a.txt", {}}}, "remove a", std::nullopt);
  EXPECT_TRUE(removed.committed);
  EXPECT_EQ(removed.deleted, 1u);
  auto entries = client.list_tree(repo);
  bool has_a = false, has_b = false;
  for (const auto& e : entries) {
    has_a = has_a || e.path == "a.txt";
    has_b = has_b || e.path == "b.txt";
  }
  EXPECT_FALSE(has_a);
  EXPECT_TRUE(has_b);
  try {
    client.commit(repo, {{CommitOperation::Kind::Delete, "missing.txt", {}}}, "x", std::nullopt);
    FAIL() << "deleting a missing file must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EntryNotFound"), std::string::npos) << e.what();
  }
}

TEST_F(HubClientTest, CorruptedBytesAreDetectedAndFetchedAgain) {
  std::string repo = client.create_repo("corrupt", "", true);
  std::string neff = random_bytes(1 << 20, 5);
  upload(repo, {{"model.neff", neff}, {"small.txt", "hello world"}});
  server.set_faults(json::array(
      {{{"match", {{"method", "GET"}}}, {"count", 1}, {"action", "corrupt"}, {"offset", 5}}}));
  EXPECT_EQ(download(repo, "model.neff"), neff);
  server.set_faults(json::array(
      {{{"match", {{"method", "GET"}}}, {"count", 10}, {"action", "corrupt"}, {"offset", 1}}}));
  DownloadResult result;
  TreeEntry expected = client.paths_info(repo, {"small.txt"})[0];
  std::FILE* file = std::tmpfile();
  std::vector<DownloadRequest> requests{{"small.txt", fileno(file), expected}};
  result = client.download(repo, "main", requests)[0];
  std::fclose(file);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("checksum"), std::string::npos) << result.error;
}

TEST_F(HubClientTest, ACorruptDownloadInstallsNothing) {
  std::string repo = client.create_repo("corrupt-install", "", true);
  std::string neff = random_bytes(1 << 20, 7);
  upload(repo, {{"model.neff", neff}});
  server.set_faults(json::array(
      {{{"match", {{"method", "GET"}}}, {"count", -1}, {"action", "corrupt"}, {"offset", 100}}}));
  TempDir cache;
  {
    local::EntryInstall install(cache.path(), testing::kCompilerDir, "MODULE_7+d7cde3b5");
    sys::UniqueFd fd = install.create_file("model.neff");
    std::vector<DownloadRequest> requests{
        {"model.neff", fd.get(), client.paths_info(repo, {"model.neff"})[0]}};
    DownloadResult result = client.download(repo, "main", requests)[0];
    EXPECT_FALSE(result.ok);
    EXPECT_NE(result.error.find("checksum"), std::string::npos) << result.error;
    // A failed download is never committed: the staged bytes go away with `install`.
  }
  EXPECT_FALSE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_7+d7cde3b5"));
  std::vector<std::string> leftovers;
  for (const auto& item : std::filesystem::recursive_directory_iterator(cache.path())) {
    if (item.is_regular_file()) leftovers.push_back(item.path().string());
  }
  EXPECT_TRUE(leftovers.empty()) << leftovers.front();
}

TEST_F(HubClientTest, TransientErrorsAreRetriedHonouringRetryAfter) {
  std::string repo = client.create_repo("retry", "", true);
  server.set_faults(json::array({{{"match", {{"path_contains", "/tree/"}}},
                                  {"count", 2},
                                  {"action", "status"},
                                  {"status", 503}}}));
  EXPECT_NO_THROW(client.list_tree(repo));
  server.set_faults(json::array({{{"match", {{"path_contains", "/tree/"}}},
                                  {"count", 1},
                                  {"action", "status"},
                                  {"status", 429},
                                  {"retry_after", 1}}}));
  auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(client.list_tree(repo));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900))
      << "Retry-After: 1 is honoured";
  server.set_faults(json::array({{{"match", {{"path_contains", "/tree/"}}},
                                  {"count", 100},
                                  {"action", "status"},
                                  {"status", 500}}}));
  EXPECT_THROW(client.list_tree(repo), Error) << "retries are bounded";
}

TEST_F(HubClientTest, StaleParentCommitIsAConflict) {
  std::string repo = client.create_repo("conflict", "", true);
  upload(repo, {{"a.txt", "1"}});
  std::string stale = client.repo_info(repo).sha;
  upload(repo, {{"b.txt", "2"}});
  write_file(local / "c.txt", "3");
  EXPECT_THROW(
      client.commit(repo, {{CommitOperation::Kind::Add, "c.txt", local / "c.txt"}}, "late", stale),
      CommitConflict);
}

TEST_F(HubClientTest, ReadOnlyTokenCannotCommit) {
  HubClient reader(options_for(server, testing::kHubReadToken));
  write_file(local / "x.txt", "x");
  try {
    reader.commit(testing::kHubPublicRepo, {{CommitOperation::Kind::Add, "x.txt", local / "x.txt"}},
                  "nope", std::nullopt);
    FAIL() << "a read token must not commit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("write access"), std::string::npos) << e.what();
  }
}

TEST_F(HubClientTest, SuperSquashLeavesOneCommitAndFreesDeletedStorage) {
  std::string repo = client.create_repo("squash", "", true);
  std::string big = random_bytes(2 << 20, 7);
  upload(repo, {{"a.neff", big}, {"b.txt", "b"}});
  client.commit(repo, {{CommitOperation::Kind::Delete, "a.neff", {}}}, "remove a", std::nullopt);
  auto used = [&] {
    net::HttpResponse answer = client.http().perform(
        {"GET", server.url() + "/api/models/" + repo + "?expand=usedStorage"});
    return json::parse(answer.body)["usedStorage"].get<uint64_t>();
  };
  EXPECT_GE(used(), big.size());  // the history still holds the deleted file
  std::string old_head = client.repo_info(repo).sha;
  std::string squashed = client.super_squash(repo, "main", "squash it");
  EXPECT_EQ(squashed.size(), 40u);
  EXPECT_EQ(client.repo_info(repo).sha, squashed);
  EXPECT_LT(used(), 4096u);  // .gitattributes and b.txt
  net::HttpResponse commits =
      client.http().perform({"GET", server.url() + "/api/models/" + repo + "/commits/main"});
  json history = json::parse(commits.body);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0]["title"], "squash it");
  EXPECT_THROW(client.repo_info(repo, old_head), Error);  // older revisions stop resolving
  auto files = client.list_tree(repo);
  ASSERT_EQ(files.size(), 2u);  // .gitattributes and b.txt
}

// What `gc` asks of a Hub that lists no times: when each folder or file was last committed;
// and whether a revision still resolves, which a squash answers no for.
TEST_F(HubClientTest, PathsInfoExpandedGivesLastCommitTimesAndRevisionsCanBeChecked) {
  std::string repo = client.create_repo("times", "", true);
  int64_t before = static_cast<int64_t>(std::time(nullptr));
  upload(repo, {{"dir/a.neff", "a"}, {"b.txt", "b"}});
  std::string first = client.repo_info(repo).sha;
  auto plain = client.paths_info(repo, {"dir", "b.txt"});
  ASSERT_EQ(plain.size(), 2u);
  for (const auto& entry : plain) EXPECT_EQ(entry.last_commit_time, 0) << entry.path;
  auto timed = client.paths_info(repo, {"dir", "b.txt", "missing"}, "main", true);
  ASSERT_EQ(timed.size(), 2u);
  for (const auto& entry : timed) {
    EXPECT_GE(entry.last_commit_time, before - 1) << entry.path;
    EXPECT_LE(entry.last_commit_time, static_cast<int64_t>(std::time(nullptr)) + 1) << entry.path;
  }
  EXPECT_TRUE(client.revision_exists(repo, first));
  client.super_squash(repo, "main", "squash");
  EXPECT_FALSE(client.revision_exists(repo, first));
  EXPECT_TRUE(client.revision_exists(repo, "main"));
  EXPECT_THROW(client.revision_exists("acme/no-such-repo", "main"), Error);
}

TEST_F(HubClientTest, SuperSquashNeedsWriteAccess) {
  HubClient reader(options_for(server, testing::kHubReadToken));
  server.clear_log();
  EXPECT_THROW(reader.super_squash(testing::kHubPublicRepo, "main", "x"), Error);
  EXPECT_EQ(server.access_log().size(), 1u);  // whoami only: nothing was sent
  HubClient bob(options_for(server, "hf_bob_write"));
  try {
    bob.super_squash(testing::kHubPublicRepo, "main", "x");
    FAIL() << "another user's repo must not be squashed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("squashing the history"), std::string::npos) << e.what();
  }
}

// A server without the super-squash route (a mirror, an older Hub) answers 404 without
// RepoNotFound: named as a missing route of a repo that exists, not as a missing repo.
TEST_F(HubClientTest, AMissingSuperSquashRouteIsNotCalledAMissingRepo) {
  std::string repo = client.create_repo("no-squash", "", true);
  server.set_faults(json::array({{{"match", {{"path_contains", "/super-squash/"}}},
                                  {"action", "status"},
                                  {"status", 404},
                                  {"message", "Not Found"}}}));
  try {
    client.super_squash(repo, "main", "x");
    FAIL() << "a missing route must fail";
  } catch (const Error& e) {
    std::string text = e.what();
    EXPECT_TRUE(testing::contains(text, "no super-squash route")) << text;
    EXPECT_FALSE(testing::contains(text, "does not exist")) << text;
  }
  server.set_faults(json::array());
  try {
    client.super_squash("acme/never-made", "main", "x");
    FAIL() << "a missing repo must fail";
  } catch (const Error& e) {
    EXPECT_TRUE(testing::contains(e.what(), "does not exist")) << e.what();
  }
}

TEST_F(HubClientTest, ParallelDownloadsOfLargeFilesUseRanges) {
  ClientOptions options = options_for(server, testing::kHubWriteToken);
  options.part_size = 1 << 20;
  HubClient ranged(options);
  std::string repo = client.create_repo("ranges", "", true);
  std::string big = random_bytes((4 << 20) + 123, 6);
  upload(repo, {{"big.neff", big}});
  server.clear_log();
  TreeEntry expected = ranged.paths_info(repo, {"big.neff"})[0];
  std::FILE* file = std::tmpfile();
  std::vector<DownloadRequest> requests{{"big.neff", fileno(file), expected}};
  DownloadResult result = ranged.download(repo, "main", requests)[0];
  ASSERT_TRUE(result.ok) << result.error;
  std::string content(big.size(), '\0');
  ASSERT_EQ(pread(fileno(file), content.data(), content.size(), 0),
            static_cast<ssize_t>(big.size()));
  std::fclose(file);
  EXPECT_EQ(content, big);
  EXPECT_EQ(testing::count_requests(
                server.access_log(),
                [](const json& e) { return e["listener"] == "cdn" && e["range"].is_string(); }),
            5u)
      << "4 MiB + 123 B in 1 MiB parts";
}

// A CDN that answers every ranged part with the whole file (200): each part skips to its range.
TEST_F(HubClientTest, RangedPartsAnsweredWithTheWholeFileAreVerified) {
  ClientOptions options = options_for(server, testing::kHubWriteToken);
  options.part_size = 1 << 20;
  HubClient ranged(options);
  std::string repo = client.create_repo("ranges-ignored", "", true);
  std::string big = random_bytes((3 << 20) + 5, 9);
  upload(repo, {{"big.neff", big}});
  server.set_faults(json::array({{{"match", {{"method", "GET"}, {"listener", "cdn"}}},
                                  {"count", -1},
                                  {"action", "ignore_range"}}}));
  TreeEntry expected = ranged.paths_info(repo, {"big.neff"})[0];
  std::FILE* file = std::tmpfile();
  std::vector<DownloadRequest> requests{{"big.neff", fileno(file), expected}};
  DownloadResult result = ranged.download(repo, "main", requests)[0];
  ASSERT_TRUE(result.ok) << result.error;
  std::string content(big.size(), '\0');
  ASSERT_EQ(pread(fileno(file), content.data(), content.size(), 0),
            static_cast<ssize_t>(big.size()));
  std::fclose(file);
  EXPECT_TRUE(content == big);
}

// The product's own descriptor (EntryInstall::create_file), parts of 1 MiB, one part corrupted
// on the way: the file is verified while its parts stream in and fetched again.
TEST_F(HubClientTest, CorruptedPartOfARangedDownloadIsFetchedAgain) {
  ClientOptions options = options_for(server, testing::kHubWriteToken);
  options.part_size = 1 << 20;
  HubClient ranged(options);
  std::string repo = client.create_repo("ranged-corrupt", "", true);
  std::string big = random_bytes((5 << 20) + 77, 8);
  upload(repo, {{"big.neff", big}});
  TreeEntry expected = ranged.paths_info(repo, {"big.neff"})[0];
  TempDir cache;
  local::EntryInstall install(cache.path(), testing::kCompilerDir, "MODULE_9+d7cde3b5");
  for (int always : {0, 1}) {
    server.set_faults(json::array({{{"match", {{"listener", "cdn"}, {"method", "GET"}}},
                                    {"count", always ? -1 : 1},
                                    {"action", "corrupt"},
                                    {"offset", 10}}}));
    sys::UniqueFd fd = install.create_file(always ? "always.neff" : "model.neff");
    std::vector<DownloadRequest> requests{{"big.neff", fd.get(), expected}};
    DownloadResult result = ranged.download(repo, "main", requests)[0];
    if (always) {
      EXPECT_FALSE(result.ok);
      EXPECT_NE(result.error.find("does not match its checksum"), std::string::npos)
          << result.error;
      continue;
    }
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_GT(result.bytes, big.size()) << "the refetch moved bytes too";
    std::string content(big.size(), '\0');
    ASSERT_EQ(pread(fd.get(), content.data(), content.size(), 0), static_cast<ssize_t>(big.size()));
    EXPECT_TRUE(content == big);
  }
}

// What an interrupted download left (the first 2.5 MiB of 5 MiB + 77 B, parts of 1 MiB): the CDN
// is asked only for the rest, the file verifies, and a CDN that ignores Range still gives the
// file (each part skipping to its range).
TEST_F(HubClientTest, AResumedDownloadAsksTheCdnOnlyForTheMissingBytes) {
  ClientOptions options = options_for(server, testing::kHubWriteToken);
  options.part_size = 1 << 20;
  HubClient ranged(options);
  std::string repo = client.create_repo("ranged-resume", "", true);
  std::string big = random_bytes((5 << 20) + 77, 10);
  const uint64_t on_disk = (5 << 20) / 2;
  upload(repo, {{"big.neff", big}});
  TreeEntry expected = ranged.paths_info(repo, {"big.neff"})[0];
  for (bool ignore_range : {false, true}) {
    SCOPED_TRACE(ignore_range ? "the CDN ignores Range" : "the CDN answers Range");
    server.clear_log();
    if (ignore_range) {
      server.set_faults(json::array({{{"match", {{"method", "GET"}, {"listener", "cdn"}}},
                                      {"count", -1},
                                      {"action", "ignore_range"}}}));
    }
    std::FILE* file = std::tmpfile();
    ASSERT_EQ(pwrite(fileno(file), big.data(), on_disk, 0), static_cast<ssize_t>(on_disk));
    std::vector<DownloadRequest> requests{{"big.neff", fileno(file), expected, {{0, on_disk - 1}}}};
    DownloadResult result = ranged.download(repo, "main", requests)[0];
    std::string content(big.size(), '\0');
    ASSERT_EQ(pread(fileno(file), content.data(), content.size(), 0),
              static_cast<ssize_t>(big.size()));
    std::fclose(file);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_TRUE(content == big);
    EXPECT_EQ(result.bytes_resumed, on_disk);
    uint64_t sent = 0;
    std::set<std::string> ranges;
    for (const auto& e : server.access_log()) {
      if (e["listener"] != "cdn") continue;
      sent += e["bytes_out"].get<uint64_t>();
      ranges.insert(e["range"].is_string() ? e["range"].get<std::string>() : "");
    }
    std::set<std::string> asked{"bytes=2621440-3145727", "bytes=3145728-4194303",
                                "bytes=4194304-5242879", "bytes=5242880-5242956"};
    EXPECT_EQ(ranges, asked) << "parts 0 and 1 are on disk, part 2 starts after its span";
    if (!ignore_range) {
      EXPECT_EQ(sent, big.size() - on_disk);
      EXPECT_EQ(result.bytes, big.size() - on_disk);
    }
    server.clear_faults();
  }
}

}  // namespace
}  // namespace neuron_cache::hub
