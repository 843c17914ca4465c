// A fleet sharing one store (issue 26): several `ci` processes, each with its own local cache,
// against one Hub repo, S3 bucket or shared folder, with a slow stand-in compile. Each
// configuration is compiled exactly once; the other machines wait for its push and fetch it; a
// holder killed with SIGKILL stops renewing its lease, which expires, and a waiter takes over.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "hub_fixture.h"
#include "s3_stand_in.h"
#include "store_kinds.h"
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

constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// The machines' manifest: `n` configurations of one model (batch sizes 1, 2, 3, ...).
std::string manifest(int n) {
  testing::StandInModel model{kLlama, {}};
  for (int i = 1; i <= n; ++i) model.configurations.push_back({"c" + std::to_string(i), i});
  return testing::stand_in_manifest({model});
}

class LeaseCliTest : public testing::StoreKindTest {
 protected:
  std::string ci_args(int i, int configurations) {
    fs::path file = work / "neuron-cache.yaml";
    if (!fs::exists(file)) write_file(file, manifest(configurations));
    return "ci " + quoted(file) + " --repo " + store + " --report " +
           quoted(work / ("report" + std::to_string(i) + ".json"));
  }

  std::string env(const std::string& extra) const {
    return store_env + " NEURON_CACHE_LEASE_POLL_MS=200 NEURON_CACHE_RETRY_BASE_MS=10 " + extra;
  }

  // Runs `ci` on machines 1..n at once; returns what each printed.
  std::vector<ToolResult> fleet(int n, int configurations, const std::string& extra) {
    std::vector<std::future<ToolResult>> runs;
    for (int i = 1; i <= n; ++i) {
      // Here, not in the threads: the first call writes the manifest the others read.
      std::string args = ci_args(i, configurations);
      runs.push_back(std::async(std::launch::async, [this, i, args, extra] {
        testing::ToolRunner runner = machine(i);
        return runner.run(args, env(extra + " RUNNER_NAME=runner-" + std::to_string(i)));
      }));
    }
    std::vector<ToolResult> results;
    for (auto& run : runs) results.push_back(run.get());
    return results;
  }

  // Compiles the stand-in finished, by batch size ("1", "2", ...).
  std::map<std::string, int> compiles() const {
    return testing::compiles_by_batch(work / "calls.jsonl");
  }

  json report(int i) const {
    return json::parse(read_file(work / ("report" + std::to_string(i) + ".json")));
  }

  // How the machines' reports say each configuration's lease went, summed over the fleet.
  std::map<std::string, int> lease_outcomes(int n) const {
    std::map<std::string, int> counts;
    for (int i = 1; i <= n; ++i) {
      json machine_report = report(i);
      for (const auto& row : machine_report["configurations"]) {
        if (row.contains("lease")) ++counts[row["lease"]["outcome"].get<std::string>()];
      }
    }
    return counts;
  }

  void expect_each_compiled_once(int machines, int configurations) {
    std::vector<ToolResult> runs = fleet(machines, configurations, "STAND_IN_DELAY=2");
    for (const auto& run : runs) ASSERT_EQ(run.code, 0) << run.all();
    std::map<std::string, int> expected;
    for (int i = 1; i <= configurations; ++i) expected[std::to_string(i)] = 1;
    EXPECT_EQ(compiles(), expected) << runs[0].all() << runs[1].all();
    std::map<std::string, int> outcomes = lease_outcomes(machines);
    EXPECT_EQ(outcomes["held"], configurations) << json(outcomes).dump();
    EXPECT_EQ(outcomes["took_over"] + outcomes["not_waited"] + outcomes["wait_timed_out"] +
                  outcomes["no_lease"],
              0)
        << json(outcomes).dump();
    for (int i = 1; i <= machines; ++i) {
      json machine_report = report(i);
      for (const auto& row : machine_report["configurations"]) {
        std::string outcome = row["outcome"];
        EXPECT_TRUE(outcome == "compiled" || outcome.starts_with("fetched from "))
            << "machine " << i << ": " << row.dump();
        EXPECT_FALSE(row.contains("lease") && row["lease"]["advisory"].get<bool>()) << row.dump();
      }
    }
    // A machine that joins later compiles nothing: every configuration is in the store.
    ToolResult late = machine(machines + 1).run(ci_args(machines + 1, configurations), env(""));
    ASSERT_EQ(late.code, 0) << late.all();
    EXPECT_EQ(compiles(), expected);
  }
};

TEST_P(LeaseCliTest, TwoMachinesCompileEachConfigurationOnce) {
  expect_each_compiled_once(2, 2);
}

TEST_P(LeaseCliTest, FourMachinesCompileEachConfigurationOnce) {
  expect_each_compiled_once(4, 3);
}

// kill -9 of the holder: nothing releases its lease. A rerun on the same machine knows the
// holder's process has ended (the lease names it) and takes the lease back at once instead of
// waiting a minute for it to expire; it compiles, pushes; a third machine then fetches. (A holder
// on another machine is taken over when its lease expires:
// LeaseCoordinatorTest.AHolderThatStopsRenewingIsTakenOverWhenItsLeaseExpires.)
TEST_P(LeaseCliTest, AKilledHolderOnThisMachineIsTakenBackAtOnce) {
  fs::path log = work / "holder.log";
  std::string line = machine(1).command(
      ci_args(1, 1), env("STAND_IN_DELAY=120 NEURON_CACHE_LEASE_SECONDS=60 RUNNER_NAME=doomed"));
  pid_t holder = fork();
  if (holder == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", (line + " > " + quoted(log) + " 2>&1").c_str(), nullptr);
    _exit(127);
  }
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && !(fs::exists(log) && contains(read_file(log), "compiling c1")))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(contains(read_file(log), "compiling c1")) << read_file(log);
  kill(-holder, SIGKILL);
  waitpid(holder, nullptr, 0);

  auto start = Clock::now();
  ToolResult waiter = machine(2).run(
      ci_args(2, 1), env("STAND_IN_DELAY=0.2 NEURON_CACHE_LEASE_SECONDS=60 RUNNER_NAME=runner-2"));
  ASSERT_EQ(waiter.code, 0) << waiter.all();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30)) << "the dead lease was waited for";
  const json row = report(2)["configurations"][0];
  EXPECT_EQ(row["lease"]["outcome"], "took_over") << row.dump();
  EXPECT_EQ(row["lease"]["other_host"], "doomed") << row.dump();
  EXPECT_TRUE(contains(row["lease"]["note"].get<std::string>(), "has ended")) << row.dump();
  EXPECT_EQ(row["outcome"], "compiled");
  EXPECT_FALSE(contains(waiter.err, "is being compiled by doomed")) << waiter.err;
  EXPECT_EQ(compiles(), (std::map<std::string, int>{{"1", 1}})) << "the killed run logged nothing";

  ToolResult third = machine(3).run(ci_args(3, 1), env(""));
  ASSERT_EQ(third.code, 0) << third.all();
  EXPECT_TRUE(report(3)["configurations"][0]["outcome"].get<std::string>().starts_with("fetched"))
      << report(3).dump();
  EXPECT_EQ(compiles(), (std::map<std::string, int>{{"1", 1}}));
}

// --no-wait compiles what another machine compiles too, and says so.
TEST_P(LeaseCliTest, NoWaitCompilesAnywayAndTheReportSaysSo) {
  fs::path log = work / "holder.log";
  std::string line =
      machine(1).command(ci_args(1, 1), env("STAND_IN_DELAY=4 RUNNER_NAME=runner-1"));
  auto first = std::async(std::launch::async, [&] {
    return testing::run_command("(" + line + ") > " + quoted(log) + " 2>&1");
  });
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && !(fs::exists(log) && contains(read_file(log), "compiling c1")))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ToolResult eager = machine(2).run(ci_args(2, 1) + " --no-wait", env("STAND_IN_DELAY=0.2"));
  EXPECT_EQ(first.get(), 0) << read_file(log);
  ASSERT_EQ(eager.code, 0) << eager.all();
  const json row = report(2)["configurations"][0];
  EXPECT_EQ(row["lease"]["outcome"], "not_waited") << row.dump();
  EXPECT_EQ(row["lease"]["other_host"], "runner-1") << row.dump();
  EXPECT_EQ(compiles(), (std::map<std::string, int>{{"1", 2}}));
}

INSTANTIATE_TEST_SUITE_P(Stores, LeaseCliTest, ::testing::Values("folder", "hub", "s3"),
                         [](const auto& info) { return info.param; });

// An S3-compatible server that ignores If-None-Match (s3rver, older MinIO): leases still work
// through the read-back check, and the report says they are advisory.
TEST(LeaseAdvisoryCliTest, AStoreIgnoringConditionsMakesLeasesAdvisory) {
  HubServer hub(testing::cache_hub_config(
      testing::kTestCacheRepo, {{kLlama, {{"config.json", R"({"model_type": "llama"})"}}}}));
  testing::S3StandIn s3;
  s3.enforce_ = false;
  TempDir work;
  write_file(work / "neuron-cache.yaml", manifest(1));
  fs::create_directories(work / "home");
  testing::ToolRunner runner(work.path(), work / "home", hub.url(), work / "cache");
  ToolResult run =
      runner.run("ci neuron-cache.yaml --repo s3://bucket/fleet --report report.json",
                 "AWS_ACCESS_KEY_ID=KEY AWS_SECRET_ACCESS_KEY=SECRET AWS_REGION=us-east-1 "
                 "AWS_ENDPOINT_URL=" +
                     s3.access().endpoint);
  ASSERT_EQ(run.code, 0) << run.all();
  json report = json::parse(read_file(work / "report.json"));
  EXPECT_EQ(report["configurations"][0]["lease"]["outcome"], "held") << report.dump();
  EXPECT_TRUE(report["configurations"][0]["lease"]["advisory"].get<bool>());
  EXPECT_TRUE(contains(run.err, "compile leases are advisory")) << run.err;
  EXPECT_TRUE(contains(run.out, "compile leases: 1 held (advisory")) << run.out;
}

}  // namespace
}  // namespace neuron_cache
