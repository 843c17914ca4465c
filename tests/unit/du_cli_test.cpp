// `neuron-cache du` as users run it (the binary, a shared folder) and maintenance::store_usage on
// the test Hub server: the same exact numbers as on every store (usage_layout.h), JSON read back.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "hub_fixture.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/maintenance/store_usage.h"
#include "neuron_cache/storage/folder_store.h"
#include "stores.h"
#include "test_support.h"
#include "usage_layout.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr const char* kRepo = "acme/usage-cache";

TEST(StoreUsageHub, HubRepoGivesExactNumbers) {
  testing::UsageLayout layout = testing::usage_layout();
  json config = HubServer::example_config();
  config["repos"].push_back({{"id", kRepo}, {"private", false}, {"files", layout.files}});
  HubServer server(config);
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubReadToken;
  hub::HubClient client(options);
  auto store = testing::hub_store(client, kRepo);
  // Top-level files the Hub adds of its own (.gitattributes) count as other content.
  uint64_t own_files = 0, own_bytes = 0;
  for (const auto& item : store->list("", false, store->head())) {
    if (!item.is_directory) ++own_files, own_bytes += item.size;
  }
  server.clear_log();
  maintenance::StoreUsage usage =
      maintenance::store_usage(*store, {testing::usage_now(), maintenance::kMaxUsageFiles});
  EXPECT_EQ(usage.kind, "hub");
  EXPECT_EQ(usage.store, kRepo);
  testing::expect_layout_usage(usage, layout, own_files, own_bytes);
  // The head, the top level, 4 top folders, 5 index files: no request per MODULE_ file (nor
  // per the Hub's same-host redirect of a regular file, which is its doing).
  size_t sent = testing::count_requests(server.access_log(),
                                        [](const json& e) { return !testing::is_redirect_hop(e); });
  EXPECT_LE(sent, 1u + 1u + 4u + 5u) << server.access_log().dump(1);
}

class DuCli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    storage::create_folder_store(root());
    layout = testing::usage_layout(static_cast<int64_t>(std::time(nullptr)));
    for (const auto& [path, content] : layout.files) testing::write_file(root() / path, content);
  }
  fs::path root() const { return dir / "store"; }

  // Runs `neuron-cache du ARGS`; stdout and stderr apart.
  int du(const std::string& args, std::string& out, std::string& err) {
    // In a subshell: run_command sends the whole command's stderr to its output after it.
    std::string command = "(" + std::string(testing::kCleanEnv) +
                          " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
                          (dir / "hf").string() + "' " + testing::tool_path() + " du " + args +
                          " 2>'" + (dir / "err").string() + "')";
    int code = testing::run_command(command, &out);
    err = testing::read_file(dir / "err");
    return code;
  }
  std::string repo() const { return "--repo 'file://" + root().string() + "'"; }

  TempDir dir;
  testing::UsageLayout layout;
};

TEST_F(DuCli, JsonIsReadBackWithEverySection) {
  std::string out, err;
  ASSERT_EQ(du("--json " + repo(), out, err), 0) << out << err;
  json usage = json::parse(out);
  EXPECT_EQ(usage["format_version"], 1);
  EXPECT_EQ(usage["kind"], "folder");
  EXPECT_EQ(usage["total"]["files"], 32);
  EXPECT_EQ(usage["modules"], json({{"count", 6}, {"bytes", 21702}}));
  EXPECT_EQ(usage["unindexed_modules"], json({{"count", 1}, {"bytes", 5117}}));
  EXPECT_EQ(usage["other"], json({{"files", 1}, {"bytes", 40}}));
  EXPECT_EQ(usage["index"]["files"], 5);
  EXPECT_EQ(usage["index"]["configurations"], 6);
  EXPECT_EQ(usage["index"]["files_read"], 4);
  ASSERT_EQ(usage["versions"].size(), 2u);
  EXPECT_EQ(usage["versions"][0]["compiler_version"], testing::kUsageV1);
  EXPECT_EQ(usage["versions"][0]["modules"]["count"], 4);
  EXPECT_EQ(usage["versions"][0]["registry"], json({{"files", 2}, {"bytes", 500}}));
  EXPECT_EQ(usage["versions"][1]["configurations"], 3);
  ASSERT_EQ(usage["models"].size(), 3u);
  EXPECT_EQ(usage["models_total"], 3);
  EXPECT_EQ(usage["models"][0]["name"], "acme/llama");
  EXPECT_EQ(usage["models"][0]["kind"], "model");
  EXPECT_EQ(usage["models"][0]["referenced_bytes"], 7351);
  EXPECT_EQ(usage["models"][1]["missing_modules"], 1);
  ASSERT_EQ(usage["ages"].size(), 6u);
  uint64_t configurations = 0;
  for (const auto& age : usage["ages"]) configurations += age["configurations"].get<uint64_t>();
  EXPECT_EQ(configurations, 6u);
  EXPECT_EQ(usage["ages"][5]["bucket"], "unknown");
  EXPECT_EQ(usage["ages"][5]["configurations"], 1);
  ASSERT_EQ(usage["problems"].size(), 1u);
  EXPECT_TRUE(contains(err, "acme--broken.json")) << err;
  EXPECT_EQ(usage["saturated"], false);

  ASSERT_EQ(du("--json --top 1 " + repo(), out, err), 0) << out << err;
  usage = json::parse(out);
  EXPECT_EQ(usage["models"].size(), 1u);
  EXPECT_EQ(usage["models_total"], 3);
}

TEST_F(DuCli, TextShowsTheSectionsAsked) {
  std::string out, err;
  ASSERT_EQ(du(repo(), out, err), 0) << out << err;
  for (const char* part : {"By compiler version", "By model", "By age", "acme/llama", "< 1 day",
                           "not referenced by the index", testing::kUsageV2})
    EXPECT_TRUE(contains(out, part)) << part << "\n" << out;
  ASSERT_EQ(du("--by model --top 1 " + repo(), out, err), 0) << out << err;
  EXPECT_TRUE(contains(out, "top 1 of 3")) << out;
  EXPECT_FALSE(contains(out, "By age")) << out;
  EXPECT_FALSE(contains(out, "acme/mistral")) << out;
  EXPECT_NE(du("--by size " + repo(), out, err), 0);
}

TEST_F(DuCli, AStoreThatCannotBeReadNamesWhy) {
  std::string out, err;
  EXPECT_NE(du("--repo file://" + (dir / "missing").string(), out, err), 0);
  EXPECT_TRUE(contains(err, "cannot measure")) << err;
  EXPECT_TRUE(contains(err, (dir / "missing").string())) << err;
}

}  // namespace
}  // namespace neuron_cache
