// A Hub that is down, stuck or slow to answer a commit, as `neuron-cache ci` meets it: the run
// decides once that the Hub is unreachable and falls back to compiling (exit 0), within a bounded
// time, and a commit whose answer was lost is checked on the head before being called failed.
// Faults come from the local Hub server (tests/README.md) or a closed port.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "hub_fixture.h"
#include "neuron_cache/hub/client.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::read_file;
using testing::TempDir;
using testing::ToolResult;
using testing::write_file;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kVersion = testing::kTestCompilerVersion;
constexpr const char* kRepo = testing::kTestCacheRepo;
constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";
constexpr const char* kQwen = "Qwen/Qwen2.5-0.5B";

json hub_config() {
  return testing::cache_hub_config(kRepo,
                                   {{kLlama, {{"config.json", R"({"model_type": "llama"})"}}},
                                    {kQwen, {{"config.json", R"({"model_type": "qwen2"})"}}}});
}

// One configuration per model: two models are two revisions to resolve.
std::string manifest_text(const std::vector<std::string>& models) {
  return testing::one_configuration_per_model(models);
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// A loopback port nothing listens on: connections to it are refused at once.
int closed_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class HubDownTest : public ::testing::Test {
 protected:
  HubDownTest() : server(hub_config()) {}

  // Runs neuron-cache in `work` with a clean environment against `endpoint`.
  ToolResult tool(const std::string& args, const std::string& endpoint,
                  const std::string& extra_env = "") {
    testing::ToolRunner runner(work.path(), home.path(), endpoint, cache);
    runner.call_log = call_log;
    return runner.run(args, extra_env);
  }

  fs::path write_manifest(const std::vector<std::string>& models) {
    fs::path path = work / "neuron-cache.yaml";
    write_file(path, manifest_text(models));
    return path;
  }

  // How many times the stand-in compiler ran.
  size_t calls() const {
    if (!fs::exists(call_log)) return 0;
    std::ifstream in(call_log);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
    return n;
  }

  // The fault rules with their remaining counts (GET /_admin/faults).
  json faults() const {
    httplib::Client admin(server.url());
    auto answer = admin.Get("/_admin/faults");
    return answer ? json::parse(answer->body) : json();
  }

  std::string head() const {
    hub::ClientOptions options;
    options.endpoint = server.url();
    options.token = testing::kHubWriteToken;
    return hub::HubClient(options).repo_info(kRepo).sha;
  }

  HubServer server;
  TempDir home;
  TempDir work;
  fs::path cache = work / "cache";
  fs::path call_log = work / "compiler-calls.jsonl";
};

// A fresh machine (no cache, no remembered revision) and a Hub that refuses connections: the
// revision cannot be resolved, yet the build compiles, says what was not keyed and not pushed,
// and exits 0 at once (it used to retry for 41 s, then fail without compiling).
TEST_F(HubDownTest, RefusedHubOnAFreshMachineCompilesAndSkipsThePush) {
  fs::path manifest = write_manifest({kLlama, kQwen});
  std::string refused = "http://127.0.0.1:" + std::to_string(closed_port());
  ToolResult run = tool("ci " + quoted(manifest), refused);
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(calls(), 2u) << run.all();  // both configurations compiled with the stand-in
  EXPECT_LT(run.seconds, 20.0);
  // The cause is said once, with what to check; the rest refers to it in a few words.
  EXPECT_EQ(occurrences(run.all(), "Couldn't connect to server"), 1u) << run.all();
  EXPECT_EQ(occurrences(run.all(), "check the network and HF_ENDPOINT"), 1u) << run.all();
  EXPECT_TRUE(contains(run.all(), refused + " could not be reached (Couldn't connect to server)"))
      << run.all();
  EXPECT_TRUE(contains(run.all(), "2 configurations (conf0, conf1) have no cache key"))
      << run.all();
  EXPECT_FALSE(contains(run.all(), "not pushed: conf1"))
      << "said by the plan's warning" << run.all();
  EXPECT_TRUE(contains(
      run.all(), "push skipped: " + refused + " could not be reached (see the warning above)"))
      << run.all();
  // Nothing was recorded under a key made without the revision: no index file names them.
  fs::path index = cache / ".cache/huggingface/neuron-cache-index";
  if (fs::exists(index)) {
    for (const auto& file : fs::recursive_directory_iterator(index)) {
      if (!file.is_regular_file()) continue;
      EXPECT_FALSE(contains(read_file(file.path()), "conf0")) << file.path();
    }
  }
  // Its NEFFs are kept in the cache all the same, where optimum-neuron finds them.
  EXPECT_TRUE(fs::exists(cache / (std::string("neuronxcc-") + kVersion))) << run.all();
}

// `plan` on the same machine says which configurations cannot be keyed instead of failing.
TEST_F(HubDownTest, RefusedHubPlanShowsTheUnkeyedRows) {
  fs::path manifest = write_manifest({kLlama});
  std::string refused = "http://127.0.0.1:" + std::to_string(closed_port());
  ToolResult run = tool("plan --json " + quoted(manifest), refused);
  ASSERT_EQ(run.code, 0) << run.all();
  json plan = json::parse(run.out);
  ASSERT_EQ(plan["configurations"].size(), 1u);
  const json& row = plan["configurations"][0];
  EXPECT_EQ(row["status"], "compile") << row.dump();
  EXPECT_TRUE(contains(row["reason"].get<std::string>(), "not keyed")) << row.dump();
}

// A Hub that accepts connections and never answers: the first request waits the timeout
// (NEURON_CACHE_HUB_TIMEOUT_MS) and is retried once (a stall alone is transient), the retry's
// stall spends the budget, then nothing else is asked; the build compiles and ends.
TEST_F(HubDownTest, HangingHubIsGivenUpOnWithinTheBudget) {
  fs::path manifest = write_manifest({kLlama, kQwen});
  server.set_faults({{{"match", {{"listener", "hub"}}}, {"count", 100}, {"action", "hang"}}});
  ToolResult run = tool("ci " + quoted(manifest), server.url(), "NEURON_CACHE_HUB_TIMEOUT_MS=2000");
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(calls(), 2u) << run.all();
  EXPECT_LT(run.seconds, 15.0) << run.all();
  EXPECT_TRUE(contains(run.all(), "no answer within")) << run.all();
  // The stall and its retry share the 2 s budget: the Hub costs the run 2 s, not 4.
  EXPECT_TRUE(contains(run.all(), "kept failing for 2 s")) << run.all();
  EXPECT_EQ(faults()[0]["remaining"], 98) << "a stall and its retry, then the Hub is not asked";
}

// One stall is a transient failure: it is retried within the run's budget, and everything the
// Hub holds is still installed; nothing is compiled.
TEST_F(HubDownTest, OneStallIsRetriedNotTakenForAnOutage) {
  fs::path manifest = write_manifest({kLlama, kQwen});
  ToolResult first = tool("ci " + quoted(manifest), server.url());
  ASSERT_EQ(first.code, 0) << first.all();
  ASSERT_EQ(calls(), 2u);
  fs::remove_all(cache);
  for (const std::string part : {"/paths-info/", "/resolve/"}) {
    SCOPED_TRACE(part);
    server.set_faults(
        {{{"match", {{"listener", "hub"}, {"path_contains", part}}}, {"action", "hang"}}});
    ToolResult run =
        tool("ci " + quoted(manifest), server.url(), "NEURON_CACHE_HUB_TIMEOUT_MS=1500");
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_EQ(calls(), 2u) << "nothing compiled: the stalled request was retried\n" << run.all();
    EXPECT_EQ(faults()[0]["remaining"], 0) << run.all();
    EXPECT_FALSE(contains(run.all(), "unreachable")) << run.all();
    fs::remove_all(cache);
  }
}

// A warm machine (revisions remembered, every configuration complete locally) with two models,
// and a Hub that takes connections and never answers, at the default 15 s timeout: the first
// revision asked is waited for 2 s (an earlier answer is at hand), the second model is not
// asked, nor the store's head; nothing compiled, nothing pushed. It used to cost the timeout.
TEST_F(HubDownTest, WarmCacheWithAHangingHubWaitsTwoSecondsNotTheTimeout) {
  fs::path manifest = write_manifest({kLlama, kQwen});
  ToolResult first = tool("ci " + quoted(manifest), server.url());
  ASSERT_EQ(first.code, 0) << first.all();
  ASSERT_EQ(calls(), 2u);
  server.set_faults({{{"match", {{"listener", "hub"}}}, {"count", 100}, {"action", "hang"}}});
  for (const std::string command : {"ci", "plan", "prefetch"}) {
    SCOPED_TRACE(command);
    ToolResult run = tool(command + " " + quoted(manifest), server.url());
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_EQ(calls(), 2u) << "nothing recompiled: both are complete locally\n" << run.all();
    EXPECT_EQ(faults()[0]["remaining"], 99) << "one request, not retried" << run.all();
    EXPECT_LT(run.seconds, 5.0) << run.all();
    EXPECT_TRUE(contains(run.all(), "no answer within 2 s)")) << run.all();
    EXPECT_TRUE(contains(run.all(), "using what an earlier run remembered")) << run.all();
    EXPECT_TRUE(contains(run.all(), "the Hub did not answer for meta-llama/Llama-3.2-1B"))
        << "the second model's reason names the first's stall\n"
        << run.all();
    if (command == "ci") {
      EXPECT_TRUE(contains(run.all(), "push skipped: the Hub did not answer in time")) << run.all();
    }
    server.set_faults({{{"match", {{"listener", "hub"}}}, {"count", 100}, {"action", "hang"}}});
  }
}

// The Hub makes the commit but its answer comes after the client gave up (a proxy timeout):
// the head is read, holds every pushed file, and the push is reported as done.
TEST_F(HubDownTest, CommitWhoseAnswerIsLostButLandedIsReportedPushed) {
  fs::path manifest = write_manifest({kLlama});
  std::string before = head();
  // The first commit claims the compile lease and passes; the second is the push's.
  server.set_faults({{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                      {"action", "delay"},
                      {"ms", 0}},
                     {{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                      {"action", "delay"},
                      {"ms", 14000},
                      {"apply_first", true}}});
  // 2 s budget: the commit's answer may take 8 s, then the head is read.
  ToolResult run = tool("ci " + quoted(manifest), server.url(), "NEURON_CACHE_HUB_TIMEOUT_MS=2000");
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(calls(), 1u);
  std::string after = head();
  EXPECT_NE(after, before);
  EXPECT_FALSE(contains(run.all(), "push failed")) << run.all();
  // The head moved once more after the push: the compile lease's end.
  EXPECT_TRUE(contains(run.all(), "pushed 1 configuration in commit ")) << run.all();
  EXPECT_TRUE(contains(run.all(), "holds every file of the commit: it landed")) << run.all();
  EXPECT_LT(run.seconds, 14.0) << "the delayed answer was not waited for\n" << run.all();
}

// The commit keeps failing (5xx) and does not land: it is retried once the head shows it did not
// land, then reported failed after three attempts, and the build still exits 0 (a cache problem
// never fails it).
TEST_F(HubDownTest, CommitThatFailedAndDidNotLandIsReportedFailed) {
  fs::path manifest = write_manifest({kLlama});
  std::string before = head();
  server.set_faults({{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                      {"count", -1},
                      {"action", "status"},
                      {"status", 502}}});
  ToolResult run = tool("ci " + quoted(manifest), server.url(), "NEURON_CACHE_HUB_TIMEOUT_MS=2000");
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(head(), before);
  EXPECT_TRUE(contains(run.all(), "push failed")) << run.all();
  EXPECT_TRUE(contains(run.all(), "3 attempts")) << run.all();
  EXPECT_TRUE(contains(run.all(), "does not hold the commit")) << run.all();
}

// A commit answered 429 (with Retry-After), 500 or 503 that did not land is retried, and the
// push succeeds in one commit.
TEST_F(HubDownTest, ACommitThatMetOneTransientFailureIsRetried) {
  int batch = 1;
  for (int status : {429, 500, 503}) {
    SCOPED_TRACE(status);
    // A configuration of its own each time, so that each run has something new to push.
    fs::path manifest = work / "neuron-cache.yaml";
    write_file(manifest,
               testing::stand_in_manifest({{kLlama, {{"b" + std::to_string(batch), batch}}}}));
    ++batch;
    std::string before = head();
    json fault = {{"match", {{"method", "POST"}, {"path_contains", "/commit/"}}},
                  {"action", "status"},
                  {"status", status}};
    if (status == 429) fault["retry_after"] = 1;
    server.set_faults({fault});
    ToolResult run =
        tool("ci " + quoted(manifest), server.url(), "NEURON_CACHE_HUB_TIMEOUT_MS=2000");
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_FALSE(contains(run.all(), "push failed")) << run.all();
    EXPECT_TRUE(contains(run.all(), "pushed 1 configuration")) << run.all();
    EXPECT_NE(head(), before) << run.all();
    EXPECT_EQ(faults()[0]["remaining"], 0) << run.all();
  }
}

}  // namespace
}  // namespace neuron_cache
