// `neuron-cache plan --json --files`: what the Bazel rule downloads with Bazel's own downloader.
// Each cached configuration lists its files with size, sha256 and a URL; the URLs are fetched
// here with curl, outside the tool, and must give exactly the listed bytes: the Hub's resolve URL
// pinned at the commit read (quoted as the tool's downloader quotes it), or a file:// URL of the
// local cache. The tool itself downloads no artifact and prints no token.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/hub/client.h"
#include "schema_check.h"
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

constexpr const char* kVersion = testing::kTestCompilerVersion;
constexpr const char* kRepo = testing::kTestCacheRepo;
constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";
constexpr const char* kQwen = "Qwen/Qwen2.5-0.5B";

json hub_config() {
  return testing::cache_hub_config(kRepo,
                                   {{kLlama, {{"config.json", R"({"model_type": "llama"})"}}},
                                    {kQwen, {{"config.json", R"({"model_type": "qwen2"})"}}}});
}

// conf0 (Llama) and conf1 (Qwen).
std::string manifest_text() {
  return testing::one_configuration_per_model({kLlama, kQwen});
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

class PlanFilesTest : public ::testing::Test {
 protected:
  PlanFilesTest() : server(hub_config()) { write_file(manifest, manifest_text()); }

  // Runs neuron-cache with a clean environment on the local cache `cache_dir`.
  ToolResult tool(const std::string& args, const fs::path& cache_dir) {
    return testing::ToolRunner(work.path(), home.path(), server.url(), cache_dir).run(args);
  }

  // Compiles and pushes both configurations from the cache `built`.
  void fill_hub() {
    ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), built);
    ASSERT_EQ(ci.code, 0) << ci.all();
  }

  json plan_files(const fs::path& cache_dir) {
    ToolResult run = tool("plan --json --files " + quoted(manifest), cache_dir);
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_FALSE(contains(run.all(), testing::kHubWriteToken)) << "the token was printed";
    return run.code == 0 ? json::parse(run.out) : json();
  }

  // Downloads `url` with curl (following the Hub's redirect to its CDN), the token sent with
  // `token`; returns the bytes, or nothing when curl fails.
  std::optional<std::string> curl(const std::string& url, bool token) {
    fs::path out = work / ("download-" + std::to_string(runs_++));
    std::string header =
        token ? std::string(" -H 'Authorization: Bearer ") + testing::kHubWriteToken + "'" : "";
    std::string output;
    if (testing::run_command("curl -sfL" + header + " -o " + quoted(out) + " '" + url + "'",
                             &output) != 0)
      return std::nullopt;
    return read_file(out);
  }

  // The resolve GETs of MODULE_ files the Hub answered since the log was cleared.
  size_t module_downloads() const {
    return testing::count_requests(server.access_log(), [](const json& r) {
      std::string path = r.value("path", "");
      return r["listener"] == "hub" && contains(path, "/resolve/") && contains(path, "MODULE_");
    });
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
  fs::path manifest = work / "neuron-cache.yaml";
  fs::path built = work / "built";  // the cache that compiled and pushed
  fs::path fresh = work / "fresh";  // a machine that has nothing yet

 private:
  int runs_ = 0;
};

// Checks every listed file of `row` against the bytes its URL gives; returns how many there are.
size_t check_files(const json& row, const std::string& want_source,
                   const std::function<std::optional<std::string>(const std::string&)>& fetch) {
  std::set<std::string> paths;
  for (const auto& file : row["files"]) {
    std::string path = file["path"];
    EXPECT_TRUE(paths.insert(path).second) << "listed twice: " << path;
    EXPECT_TRUE(path.starts_with(std::string("neuronxcc-") + kVersion + "/MODULE_")) << path;
    EXPECT_EQ(file["source"], want_source) << file.dump();
    std::optional<std::string> bytes = fetch(file["url"]);
    if (!bytes) {
      ADD_FAILURE() << "cannot download " << file.dump();
      continue;
    }
    EXPECT_EQ(bytes->size(), file["size"].get<uint64_t>()) << path;
    EXPECT_EQ(sha256_hex(*bytes), file["sha256"]) << path;
  }
  return paths.size();
}

TEST_F(PlanFilesTest, HubRowsListResolveUrlsAtTheCommitReadThatGiveTheListedBytes) {
  fill_hub();
  server.clear_log();
  json plan = plan_files(fresh);
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(module_downloads(), 0u) << "plan --files must not download artifacts itself";
  EXPECT_FALSE(fs::exists(fresh / (std::string("neuronxcc-") + kVersion)));
  testing::SchemaCheck schema(
      json::parse(read_file(fs::path(NEURON_CACHE_TESTS_DIR).parent_path() /
                            "core/neuron_cache/report/report.schema.json")));
  EXPECT_EQ(schema.problems(plan), std::vector<std::string>{}) << plan.dump(1);

  std::string revision = plan["hub_revision"];
  EXPECT_EQ(revision, head());
  ASSERT_EQ(plan["configurations"].size(), 2u);
  for (const auto& row : plan["configurations"]) {
    ASSERT_EQ(row["status"], "store") << row.dump();
    // The entry as an export writes it, and the files are exactly its modules' files.
    artifact_index::Entry entry = artifact_index::parse_entry(row["entry"].get<std::string>(), "");
    EXPECT_EQ(entry.key, row["key"]);
    EXPECT_EQ(artifact_index::serialize_entry(entry), row["entry"]);
    size_t listed = 0;
    for (const auto& module : entry.modules) listed += module.files.size();
    for (const auto& file : row["files"]) {
      std::string url = file["url"];
      // The tool's own quoting: '+' of the compiler version and of MODULE_ names is %2B.
      std::string want = server.url() + "/" + kRepo + "/resolve/" + revision + "/" +
                         url::url_encode(file["path"].get<std::string>(), true);
      EXPECT_EQ(url, want);
      EXPECT_TRUE(contains(url, "neuronxcc-2.21.33363.0%2B82129205/MODULE_")) << url;
    }
    size_t checked =
        check_files(row, "hub", [&](const std::string& url) { return curl(url, true); });
    EXPECT_EQ(checked, listed);
    EXPECT_GE(checked, 2u) << row.dump();
  }
  // Each URL went to the Hub once; the commit is pinned, so a push after the plan changes
  // nothing the URLs give.
  EXPECT_GT(module_downloads(), 0u);
}

TEST_F(PlanFilesTest, LocalRowsListFileUrlsIntoTheLocalCache) {
  fill_hub();
  json plan = plan_files(built);
  ASSERT_TRUE(plan.is_object());
  ASSERT_EQ(plan["configurations"].size(), 2u);
  for (const auto& row : plan["configurations"]) {
    ASSERT_EQ(row["status"], "local") << row.dump();
    for (const auto& file : row["files"]) {
      std::string url = file["url"];
      EXPECT_TRUE(url.starts_with("file://" + fs::absolute(built).lexically_normal().string()))
          << url;
    }
    size_t checked = check_files(row, "local", [&](const std::string& url) {
      return curl(url, false);  // curl decodes %2B in file:// paths, as Java's URL does
    });
    EXPECT_GE(checked, 2u) << row.dump();
  }
}

// A Hub row whose folders are partly complete locally (one copied from another machine): that
// folder's files come from the local cache, the others from the Hub, decided per MODULE_ folder.
TEST_F(PlanFilesTest, AFolderCompleteLocallyIsReadLocallyInAHubRow) {
  fill_hub();
  json built_plan = plan_files(built);
  ASSERT_TRUE(built_plan.is_object());
  const json& built_row = built_plan["configurations"][0];
  std::string first = built_row["files"][0]["path"];
  std::string folder = first.substr(0, first.rfind('/'));
  fs::create_directories((fresh / folder).parent_path());
  fs::copy(built / folder, fresh / folder, fs::copy_options::recursive);

  json plan = plan_files(fresh);
  ASSERT_TRUE(plan.is_object());
  const json& row = plan["configurations"][0];
  ASSERT_EQ(row["status"], "store") << row.dump();
  size_t local = 0, hub = 0;
  for (const auto& file : row["files"]) {
    bool in_folder = file["path"].get<std::string>().starts_with(folder + "/");
    EXPECT_EQ(file["source"], in_folder ? "local" : "hub") << file.dump();
    std::optional<std::string> bytes = curl(file["url"], !in_folder);
    ASSERT_TRUE(bytes) << file.dump();
    EXPECT_EQ(sha256_hex(*bytes), file["sha256"]) << file.dump();
    (in_folder ? local : hub) += 1;
  }
  EXPECT_GT(local, 0u);
  EXPECT_GT(hub, 0u) << "the configuration must have more than one folder for this test";
}

TEST_F(PlanFilesTest, RowsNotCachedHaveNoFilesAndFilesNeedsJson) {
  json plan = plan_files(fresh);  // an empty Hub repo: both must compile
  ASSERT_TRUE(plan.is_object());
  for (const auto& row : plan["configurations"]) {
    EXPECT_EQ(row["status"], "compile") << row.dump();
    EXPECT_FALSE(row.contains("files")) << row.dump();
    EXPECT_FALSE(row.contains("entry")) << row.dump();
  }
  ToolResult text = tool("plan --files " + quoted(manifest), fresh);
  EXPECT_EQ(text.code, 2) << text.all();
  EXPECT_TRUE(contains(text.all(), "--json")) << text.all();
}

}  // namespace
}  // namespace neuron_cache
