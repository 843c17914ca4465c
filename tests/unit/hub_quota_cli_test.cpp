// The Hub's quotas end to end (issue 42): `ci` runs against the test Hub server started with a
// small commit quota or request quota and a short window. A run that meets the quota waits for
// the reset and succeeds; the process pauses the bucket for all its requests, so it meets few
// 429s, not one per request.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "hub_fixture.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::HubServer;
using testing::TempDir;
using testing::ToolResult;
namespace fs = std::filesystem;

constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";

std::string manifest(int configurations) {
  testing::StandInModel model{kLlama, {}};
  for (int i = 1; i <= configurations; ++i)
    model.configurations.push_back({"c" + std::to_string(i), i});
  return testing::stand_in_manifest({model});
}

json hub_config() {
  return testing::cache_hub_config(testing::kTestCacheRepo,
                                   {{kLlama, {{"config.json", R"({"model_type": "llama"})"}}}});
}

bool is_commit(const json& entry) {
  return entry["method"] == "POST" &&
         entry["path"].get<std::string>().find("/commit/") != std::string::npos;
}

class HubQuotaCliTest : public ::testing::Test {
 protected:
  // Machine `i`: its own folder, HF home and local cache.
  testing::ToolRunner machine(int i, const HubServer& hub) {
    fs::path dir = work / ("machine" + std::to_string(i));
    fs::create_directories(dir / "home");
    testing::ToolRunner runner(dir, dir / "home", hub.url(), dir / "cache");
    runner.call_log = work / "calls.jsonl";
    return runner;
  }

  // `ci` of `configurations` on machines 1..n at once; what each printed.
  std::vector<ToolResult> fleet(const HubServer& hub, int n, int configurations) {
    fs::path file = work / "neuron-cache.yaml";
    testing::write_file(file, manifest(configurations));
    std::vector<std::future<ToolResult>> runs;
    for (int i = 1; i <= n; ++i) {
      runs.push_back(std::async(std::launch::async, [this, &hub, &file, i] {
        return machine(i, hub).run(
            "ci '" + file.string() + "' --repo " + testing::kTestCacheRepo,
            "STAND_IN_DELAY=0.5 NEURON_CACHE_LEASE_POLL_MS=200 RUNNER_NAME=runner-" +
                std::to_string(i));
      }));
    }
    std::vector<ToolResult> results;
    for (auto& run : runs) results.push_back(run.get());
    return results;
  }

  // Compiles the stand-in finished, by batch size.
  std::map<std::string, int> compiles() const {
    return testing::compiles_by_batch(work / "calls.jsonl");
  }

  std::map<std::string, int> once_each(int configurations) const {
    std::map<std::string, int> expected;
    for (int i = 1; i <= configurations; ++i) expected[std::to_string(i)] = 1;
    return expected;
  }

  TempDir work;
};

// Two machines, three new configurations, two commits per repo per 5 s: the claims, the pushes
// and the leases' ends need more, so the machines meet the commit quota; each waits for the
// window's end (Retry-After) and commits then. Nothing fails and each configuration is compiled
// once.
TEST_F(HubQuotaCliTest, AFleetMeetingTheCommitQuotaWaitsForTheResetAndSucceeds) {
  HubServer hub(hub_config(), {"--commit-quota", "2", "--commit-window", "5"});
  std::vector<ToolResult> runs = fleet(hub, 2, 3);
  for (const ToolResult& run : runs) ASSERT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(compiles(), once_each(3)) << runs[0].all() << runs[1].all();
  json log = hub.access_log();
  size_t commits = testing::count_requests(
      log, [](const json& e) { return is_commit(e) && e["status"] == 200; });
  size_t refused = testing::count_requests(
      log, [](const json& e) { return is_commit(e) && e["status"] == 429; });
  std::cout << "commits: " << commits << " landed, " << refused << " refused (429); "
            << runs[0].seconds << " s and " << runs[1].seconds << " s\n";
  EXPECT_GT(commits, 2u);
  EXPECT_GE(refused, 1u) << "the quota was met";
  // Each machine's refused commit waits for the window's end, then lands or meets the other
  // machine's commits of that window: at most one 429 per machine per window.
  double windows = std::max(runs[0].seconds, runs[1].seconds) / 5 + 1;
  EXPECT_LE(static_cast<double>(refused), 2 * windows);
}

// A request quota of the api bucket smaller than one run's requests: the answer that says
// nothing is left (RateLimit r=0) pauses the process's api requests until the reset, so the run
// meets few 429s (those already on their way), not one per request, and succeeds.
TEST_F(HubQuotaCliTest, ARunOverTheRequestQuotaPausesInsteadOfMeetingA429PerRequest) {
  HubServer hub(hub_config(), {"--api-quota", "6", "--quota-window", "2"});
  std::vector<ToolResult> runs = fleet(hub, 1, 3);
  ASSERT_EQ(runs[0].code, 0) << runs[0].all();
  EXPECT_EQ(compiles(), once_each(3)) << runs[0].all();
  json log = hub.access_log();
  size_t api = testing::count_requests(log, [](const json& e) {
    return e["listener"] == "hub" &&
           e["path"].get<std::string>().find("/resolve") == std::string::npos;
  });
  size_t refused = testing::count_requests(log, [](const json& e) { return e["status"] == 429; });
  std::cout << "api requests: " << api << ", refused (429): " << refused << " in "
            << runs[0].seconds << " s\n";
  EXPECT_GT(api, 2 * 6u) << "the quota was met, more than once";
  EXPECT_LE(refused, 4u) << runs[0].all();
}

}  // namespace
}  // namespace neuron_cache
