// Hub answers of the wrong shape (a 200 whose JSON is not what the request gets) and exceptions
// thrown inside libcurl callbacks: every request kind fails with an Error that names the request
// and what was expected, the commands handle it like a 5xx, and nothing aborts.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "hub_fixture.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "test_support.h"

namespace neuron_cache::hub {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::TempDir;
using testing::write_file;

constexpr const char* kRepo = testing::kHubPublicRepo;

// Answers every request whose path contains `path` with 200 and `body`.
json answer_with(const std::string& path, const json& body) {
  return json::array({{{"match", {{"path_contains", path}}},
                       {"count", -1},
                       {"action", "status"},
                       {"status", 200},
                       {"body", body}}});
}

class HubAnswersTest : public ::testing::Test {
 protected:
  HubAnswersTest() : server(HubServer::example_config(), {"--lfs-threshold", "10"}) {}

  ClientOptions options() const {
    ClientOptions options;
    options.endpoint = server.url();
    options.token = testing::kHubWriteToken;
    options.retry = {2, std::chrono::milliseconds(10), std::chrono::milliseconds(20)};
    return options;
  }

  // Uploads one file of `content` to kRepo (LFS when longer than 10 bytes).
  void upload(const std::string& content) {
    write_file(local / "file.bin", content);
    HubClient client(options());
    client.commit(kRepo, {{CommitOperation::Kind::Add, "file.bin", local / "file.bin"}}, "test",
                  std::nullopt);
  }

  // Runs `request` once per wrong-shaped `bodies` served at `path`: each must throw an
  // operational Error naming `request_name` and saying the answer is not what was expected.
  void expect_named_failures(const std::string& path, const std::vector<json>& bodies,
                             const std::string& request_name,
                             const std::function<void(HubClient&)>& request) {
    for (const json& body : bodies) {
      server.set_faults(answer_with(path, body));
      HubClient client(options());
      try {
        request(client);
        ADD_FAILURE() << request_name << " took " << body.dump();
      } catch (const Error& error) {
        std::string message = error.what();
        EXPECT_EQ(error.kind(), ErrorKind::Operational) << message;
        EXPECT_TRUE(contains(message, request_name + " failed: "))
            << body.dump() << ": " << message;
        EXPECT_TRUE(contains(message, "HF_ENDPOINT")) << message;
        EXPECT_FALSE(contains(message, "json.exception")) << message;
        EXPECT_FALSE(contains(message, testing::kHubWriteToken)) << message;
      } catch (const std::exception& other) {
        ADD_FAILURE() << request_name << " with " << body.dump()
                      << ": not the project's Error: " << other.what();
      }
    }
    server.clear_faults();
  }

  HubServer server;
  TempDir local;
};

TEST_F(HubAnswersTest, WhoamiNamesItsRequest) {
  expect_named_failures("/api/whoami-v2",
                        {"text",
                         json::array({1}),
                         {{"name", 5}},
                         {{"orgs", "acme"}},
                         {{"orgs", json::array({7})}},
                         {{"auth", {{"accessToken", {{"role", 1}}}}}}},
                        "GET /api/whoami-v2", [](HubClient& client) { client.whoami(); });
}

TEST_F(HubAnswersTest, RepoInfoNamesItsRequest) {
  expect_named_failures("/revision/", {"text", json::array(), {{"sha", 5}}, {{"private", "no"}}},
                        std::string("GET /api/models/") + kRepo + "/revision/main",
                        [](HubClient& client) { client.repo_info(kRepo); });
}

TEST_F(HubAnswersTest, ListingsNameTheirRequest) {
  std::vector<json> bodies = {{{"path", "a"}},
                              json::array({1}),
                              json::array({{{"path", 5}}}),
                              json::array({{{"path", "a"}, {"size", "big"}}}),
                              json::array({{{"path", "a"}, {"lfs", "yes"}}}),
                              json::array({{{"path", "a"}, {"lfs", {{"oid", 3}}}}})};
  expect_named_failures("/tree/", bodies, std::string("GET /api/models/") + kRepo + "/tree/main",
                        [](HubClient& client) { client.list_tree(kRepo); });
  expect_named_failures("/paths-info/", bodies,
                        std::string("POST /api/models/") + kRepo + "/paths-info/main",
                        [](HubClient& client) { client.paths_info(kRepo, {"README.md"}); });
}

// Answers beyond what an answer of their kind holds (deep, many values, huge) are refused while
// they stream in, quickly and without growing a DOM: what reading each costs is measured as the
// peak resident memory during the call above what the test itself held (its bodies included).
TEST_F(HubAnswersTest, AnswersBeyondTheirBoundsAreRefusedQuicklyAndSmall) {
  json deep = json::array();
  for (int i = 0; i < 10'000; ++i) deep = json::array({deep});
  json many = json::array();
  for (int i = 0; i < 4'000'000; ++i) many.push_back(0);  // an unbounded DOM of it: > 128 MiB
  const std::vector<json> bodies = {deep, many, std::string(40u << 20, 'x')};
  deep = json();
  many = json();
  long worst_kib = 0;
  auto start = std::chrono::steady_clock::now();
  expect_named_failures("/tree/", bodies, std::string("GET /api/models/") + kRepo + "/tree/main",
                        [&](HubClient& client) {
                          testing::reset_peak_rss();
                          long before = testing::resident_kib();
                          try {
                            client.list_tree(kRepo);
                          } catch (...) {
                            worst_kib = std::max(worst_kib, testing::peak_resident_kib() - before);
                            throw;
                          }
                        });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // Heap the test freed earlier may be reused, so the cost can read as 0: a lower bound.
  EXPECT_GT(testing::peak_resident_kib(), 0) << "the peak could not be read";
  // The most an API answer may hold (1M values) costs about 50 MiB as a DOM.
  EXPECT_LT(worst_kib, 96L << 10) << "KiB a refused answer cost at its worst";
  std::cout << "worst peak above the test's own memory: " << worst_kib / 1024 << " MiB\n";
}

// An answer that drips in is cut at its deadline (8 times the timeout), not waited on forever.
TEST_F(HubAnswersTest, AnAnswerThatDripsIsCutAtItsDeadline) {
  server.set_faults(json::array({{{"match", {{"path_contains", "/tree/"}}},
                                  {"count", -1},
                                  {"action", "trickle"},
                                  {"bytes_per_second", 2}}}));
  ClientOptions slow = options();
  slow.hub_timeout = std::chrono::milliseconds(500);
  HubClient client(slow);
  auto start = std::chrono::steady_clock::now();
  try {
    client.list_tree(kRepo);
    ADD_FAILURE() << "a dripping answer was waited for";
  } catch (const Error& error) {
    EXPECT_TRUE(contains(error.what(), "not whole within 4 s")) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  server.clear_faults();
}

// A file that trickles in below the rate rule (1 KiB/s averaged over the window) is cut when the
// window ends instead of holding the run: the window is 60 s in the product, 2 s here. A file
// above the rate is not cut by it.
TEST_F(HubAnswersTest, AFileThatTricklesBelowTheRateIsCutAtTheEndOfTheWindow) {
  // 64 KiB is a regular file there: no CDN (its resolve redirects to /api/resolve-cache/ on the
  // same host, where the body comes from).
  HubServer plain(HubServer::example_config());
  write_file(local / "file.txt", std::string(64u << 10, 'f'));
  ClientOptions to_plain = options();
  to_plain.endpoint = plain.url();
  HubClient(to_plain).commit(kRepo, {{CommitOperation::Kind::Add, "file.txt", local / "file.txt"}},
                             "test", std::nullopt);
  auto trickle = [&](uint64_t rate) {
    plain.set_faults(json::array({{{"match", {{"path_contains", "file.txt"}}},
                                   {"count", -1},
                                   {"action", "trickle"},
                                   {"bytes_per_second", rate}}}));
  };
  net::HttpOptions http = net::timed_options(plain.url(), std::chrono::milliseconds(5000));
  http.stall_timeout = std::chrono::seconds(2);
  http.answer_deadline = std::chrono::seconds(120);  // only the rate rule can end it early
  net::HttpEngine engine(http);
  net::HttpRequest request{"GET", plain.url() + "/" + kRepo + "/resolve/main/file.txt"};
  trickle(300);
  auto start = std::chrono::steady_clock::now();
  net::HttpResponse slow = engine.perform(request);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(slow.status, 0) << slow.body.size();
  EXPECT_FALSE(slow.error.empty());
  EXPECT_GT(seconds, 1.5);
  EXPECT_LT(seconds, 10.0) << "cut at the end of the 2 s window, not at the 120 s deadline";
  trickle(32u << 10);  // 64 KiB in 2 s: above the rate
  net::HttpResponse steady = engine.perform(request);
  EXPECT_EQ(steady.status, 200) << steady.error;
  EXPECT_EQ(steady.body.size(), 64u << 10);
}

// An LFS upload PUT that meets one transient 503 is retried and the commit lands with the file:
// no push test saw a missing retry before (the only 503 test failed every request).
TEST_F(HubAnswersTest, AnUploadThatMetOneTransient503IsRetried) {
  server.set_faults(json::array({{{"match", {{"method", "PUT"}, {"path_contains", "/lfs/upload/"}}},
                                  {"action", "status"},
                                  {"status", 503}}}));
  const std::string content(1000, 'u');
  upload(content);
  json rules = server.faults();
  EXPECT_EQ(rules[0]["remaining"], 0) << rules.dump();
  HubClient client(options());
  EXPECT_EQ(client.read_file(kRepo, "file.bin"), content);
  server.clear_faults();
}

TEST_F(HubAnswersTest, PreuploadNamesItsRequest) {
  expect_named_failures("/preupload/",
                        {"text",
                         json::object(),
                         {{"files", json::object()}},
                         {{"files", json::array({1})}},
                         {{"files", json::array({{{"path", 1}}})}},
                         {{"files", json::array({{{"path", "file.bin"}, {"shouldIgnore", "no"}}})}},
                         {{"files", json::array({{{"path", "file.bin"}, {"oid", 5}}})}},
                         {{"files", json::array({{{"path", "file.bin"}, {"uploadMode", 1}}})}}},
                        std::string("POST /api/models/") + kRepo + "/preupload/main",
                        [&](HubClient&) { upload("short"); });
}

TEST_F(HubAnswersTest, LfsBatchNamesItsRequest) {
  std::string content(100, 'l');
  std::string oid = sha256_hex(content);
  auto object = [&](const json& more) {
    json item = {{"oid", oid}, {"size", content.size()}};
    item.update(more);
    return json{{"objects", json::array({item})}};
  };
  expect_named_failures(
      "/info/lfs/objects/batch",
      {"text", json::object(), json{{"objects", json::object()}},
       json{{"objects", json::array({1})}}, json{{"objects", json::array({{{"oid", 5}}})}},
       object({{"actions", "upload"}}), object({{"actions", {{"upload", "somewhere"}}}}),
       object({{"actions", {{"upload", {{"href", 5}}}}}}),
       object({{"actions", {{"upload", {{"href", "http://x/"}, {"header", "h"}}}}}}),
       object({{"actions",
                {{"upload", {{"href", "http://x/"}, {"header", {{"chunk_size", "many"}}}}}}}}),
       object(
           {{"actions", {{"upload", {{"href", "http://x/"}, {"header", {{"chunk_size", 50}}}}}}}}),
       object({{"actions",
                {{"upload",
                  {{"href", "http://x/"},
                   {"header", {{"chunk_size", "50"}, {"1", "http://x/1"}, {"2", 2}}}}}}}})},
      std::string("POST /") + kRepo + ".git/info/lfs/objects/batch",
      [&](HubClient&) { upload(content); });
}

TEST_F(HubAnswersTest, CommitAnswersNameTheirRequest) {
  expect_named_failures("/commit/", {"text", json::array(), {{"commitOid", 5}}},
                        std::string("POST /api/models/") + kRepo + "/commit/main",
                        [&](HubClient&) { upload("short"); });
}

// Only a git commit id proves a commit: a commitOid of another shape is a failed commit, its
// value quoted escaped, never a success ("Synchronization complete" with the repo unchanged).
TEST_F(HubAnswersTest, ACommitIdThatIsNotFortyHexDigitsIsAFailedCommit) {
  const std::string request = std::string("POST /api/models/") + kRepo + "/commit/main";
  expect_named_failures("/commit/",
                        {{{"commitOid", "../../x"}},
                         {{"commitOid", std::string(39, 'a')}},
                         {{"commitOid", std::string(41, 'a')}},
                         {{"commitOid", std::string(40, 'g')}},
                         {{"commitOid", std::string(40, 'A')}}},
                        request, [&](HubClient&) { upload("short"); });
  server.set_faults(answer_with("/commit/", {{"commitOid", "../..\n\x1b[31mx"}}));
  write_file(local / "file.bin", "short");
  HubClient client(options());
  try {
    client.commit(kRepo, {{CommitOperation::Kind::Add, "file.bin", local / "file.bin"}}, "test",
                  std::nullopt);
    ADD_FAILURE() << "a commit id with control characters was taken as a commit";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_TRUE(contains(message, "is not 40 hex digits")) << message;
    EXPECT_FALSE(contains(message, "\x1b")) << message;
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << "the escape reached the message";
  }
  server.clear_faults();
}

TEST_F(HubAnswersTest, ACommitWithAnOddUrlIsStillACommit) {
  // The commit id proves the commit was made: a strange commitUrl beside it cannot undo that.
  server.set_faults(
      answer_with("/commit/", {{"commitOid", std::string(40, 'a')}, {"commitUrl", 5}}));
  write_file(local / "file.bin", "short");
  HubClient client(options());
  CommitResult result = client.commit(
      kRepo, {{CommitOperation::Kind::Add, "file.bin", local / "file.bin"}}, "test", std::nullopt);
  EXPECT_TRUE(result.committed);
  EXPECT_EQ(result.commit_oid, std::string(40, 'a'));
  EXPECT_EQ(result.commit_url, "");
}

// An exception thrown by code libcurl calls back (progress, a streamed body) must not cross
// libcurl's C frames: it comes out of run() once curl has returned, and the engine still works.
TEST_F(HubAnswersTest, ExceptionsInCallbacksComeOutOfRun) {
  net::HttpEngine http({server.url(), testing::kHubWriteToken});
  http.on_progress = [](uint64_t, uint64_t) { throw std::runtime_error("progress display broke"); };
  net::HttpRequest whoami{"GET", server.url() + "/api/whoami-v2"};
  try {
    http.perform(whoami);
    ADD_FAILURE() << "the progress callback's exception was lost";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "progress display broke");
  }
  http.on_progress = nullptr;
  EXPECT_EQ(http.perform(whoami).status, 200) << "the engine is usable after the exception";

  class Throwing : public net::Exchange {
   public:
    explicit Throwing(std::string url) : url_(std::move(url)) {}
    net::HttpRequest request() override {
      net::HttpRequest request{"GET", url_};
      request.may_leave_origin = true;  // the file comes from the CDN the Hub redirects to
      return request;
    }
    bool streams_body() const override { return true; }
    bool on_body(std::string_view) override { throw std::length_error("no room for the body"); }
    std::optional<std::chrono::milliseconds> on_complete(const net::HttpResponse&) override {
      return std::nullopt;
    }

   private:
    std::string url_;
  };
  Throwing one(server.url() + "/" + kRepo + "/resolve/main/README.md");
  Throwing two(server.url() + "/" + kRepo + "/resolve/main/README.md");
  EXPECT_THROW(http.run({&one, &two}, 2), std::length_error);
  EXPECT_EQ(http.perform(whoami).status, 200);
}

// The tool on the Hub's wrong-shaped answers: a command says which request got what, in one
// line, and never prints the JSON library's words.
class HubAnswersCliTest : public HubAnswersTest {
 protected:
  testing::ToolRun tool(const std::string& args, const std::string& extra_env = "") {
    std::string command =
        "cd '" + work.path().string() + "' && " + std::string(testing::kCleanEnv) +
        " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" + home.path().string() +
        "' HF_ENDPOINT=" + server.url() + " HF_TOKEN=" + testing::kHubWriteToken +
        " NEURON_COMPILE_CACHE_URL='" + cache.path().string() +
        "' NEURON_CACHE_RETRY_BASE_MS=10 STAND_IN_DELAY=0 " + extra_env + " " +
        testing::tool_path() + " " + args + " 2>&1";
    testing::ToolRun run{};
    run.code = testing::run_command(command, &run.output);
    return run;
  }

  // neuron-cache.yaml in `work`: two configurations the stand-in compiler builds, no Hub needed
  // to make their keys (revision and model_type given), kRepo as the cache repo.
  void write_manifest() {
    std::string conf = ", sequence_length: 128, num_cores: 2, precision: bf16}\n";
    write_file(work / "neuron-cache.yaml",
               std::string("cache_repo: ") + kRepo +
                   "\ncompiler_version: \"2.21.33363.0+82129205\"\n"
                   "optimum_neuron_version: \"0.4.5\"\ninstance_type: trn1\ncompile:\n"
                   "  command: \"" +
                   STAND_IN_EXPORT +
                   " --model {model_id} --task {task} --batch_size {batch_size} "
                   "--sequence_length {sequence_length} --num_cores {num_cores} --auto_cast_type "
                   "{precision} --instance_type {instance_type} {output}\"\nmodels:\n"
                   "  - model_id: org/llama\n    model_type: llama\n"
                   "    revision: \"0123456789abcdef0123456789abcdef01234567\"\n"
                   "    task: text-generation\n    configurations:\n"
                   "      - {name: a, batch_size: 1" +
                   conf + "      - {name: b, batch_size: 2" + conf);
  }

  TempDir work;
  TempDir home;
  TempDir cache;
};

TEST_F(HubAnswersCliTest, LookupAndSynchronizeNameTheRequestThatGotAWrongAnswer) {
  server.set_faults(answer_with("/tree/", {{"not", "a list"}}));
  testing::ToolRun lookup = tool(std::string("lookup llamafactory/tiny-random-Llama-3 ") +
                                 "--compiler-version 2.21.1.0 --repo " + kRepo);
  EXPECT_EQ(lookup.code, 1) << lookup.output;
  EXPECT_TRUE(contains(lookup.output, std::string("GET /api/models/") + kRepo + "/tree/main"))
      << lookup.output;
  EXPECT_TRUE(contains(lookup.output, "is not a list of files")) << lookup.output;
  EXPECT_FALSE(contains(lookup.output, "json.exception")) << lookup.output;

  testing::make_entry(cache.path(), "MODULE_11+d7cde3b5", testing::Kind::Success);
  server.set_faults(answer_with("/preupload/", "not an object"));
  testing::ToolRun sync = tool(std::string("synchronize --repo ") + kRepo + " --cache-dir '" +
                               cache.path().string() + "'");
  EXPECT_EQ(sync.code, 1) << sync.output;
  EXPECT_TRUE(contains(sync.output, std::string("POST /api/models/") + kRepo + "/preupload/main"))
      << sync.output;
  EXPECT_FALSE(contains(sync.output, "json.exception")) << sync.output;
}

// The line about the push, with the reason (between "failed: " and the fallback) cut out.
std::string push_warning(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    size_t failed = line.find("push to ");
    if (failed == std::string::npos) continue;
    size_t reason = line.find(" failed: ", failed);
    size_t fallback = line.rfind(": the compiled artifacts");
    if (reason == std::string::npos || fallback == std::string::npos || fallback < reason)
      return line;
    return line.substr(0, reason + 9) + "..." + line.substr(fallback);
  }
  return "";
}

TEST_F(HubAnswersCliTest, APushWithAWrongPreuploadAnswerWarnsLikeA503) {
  write_manifest();
  testing::ToolRun compile = tool("compile neuron-cache.yaml --output-dir out", "HF_HUB_OFFLINE=1");
  ASSERT_EQ(compile.code, 0) << compile.output;

  server.set_faults(json::array({{{"match", {{"path_contains", "/preupload/"}}},
                                  {"count", -1},
                                  {"action", "status"},
                                  {"status", 503}}}));
  testing::ToolRun unavailable = tool("push neuron-cache.yaml");
  server.set_faults(answer_with("/preupload/", {{"files", "all of them"}}));
  testing::ToolRun wrong = tool("push neuron-cache.yaml");

  EXPECT_EQ(unavailable.code, 0) << unavailable.output;
  EXPECT_EQ(wrong.code, unavailable.code) << wrong.output;
  std::string warning = push_warning(unavailable.output);
  ASSERT_TRUE(contains(warning, "the compiled artifacts stay in the local cache only"))
      << unavailable.output;
  EXPECT_EQ(push_warning(wrong.output), warning) << wrong.output;
  EXPECT_TRUE(contains(wrong.output, std::string("POST /api/models/") + kRepo + "/preupload/main"))
      << wrong.output;
  EXPECT_TRUE(contains(wrong.output, "\"files\" is string, not a list")) << wrong.output;
  EXPECT_FALSE(contains(wrong.output, "json.exception")) << wrong.output;
}

// Parallel compiles run on worker threads: whatever a configuration throws is handed back, so
// a bad --output-dir is a one-line failure and exit 1, never std::terminate (exit 134).
TEST_F(HubAnswersCliTest, ParallelCompilesWithABadOutputDirFailInOneLine) {
  write_manifest();
  write_file(work / "regular", "a file, not a folder");
  for (const std::string dir : {"''", "regular/out"}) {
    testing::ToolRun compile =
        tool("compile neuron-cache.yaml -j 2 --output-dir " + dir, "HF_HUB_OFFLINE=1");
    EXPECT_EQ(compile.code, 1) << dir << ": " << compile.output;
    EXPECT_FALSE(contains(compile.output, "terminate")) << compile.output;
    EXPECT_TRUE(contains(compile.output, "neuron-cache: error: 2 of 2 compiles failed"))
        << compile.output;
  }
  testing::ToolRun empty =
      tool("compile neuron-cache.yaml -j 2 --output-dir ''", "HF_HUB_OFFLINE=1");
  EXPECT_TRUE(contains(empty.output, "FAILED a: --output-dir is empty")) << empty.output;
  EXPECT_FALSE(contains(empty.output, "filesystem error")) << empty.output;
}

}  // namespace
}  // namespace neuron_cache::hub
