// The Hub commands as a user runs them, against the local Hub server: whoami, create, set,
// lookup and synchronize, with request counts from the server's access log.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "hub_fixture.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/net/http.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::Kind;
using testing::make_entry;
using testing::TempDir;
using testing::ToolRun;
using testing::write_file;

class HubCliTest : public ::testing::Test {
 protected:
  HubCliTest() : server(HubServer::example_config(), {"--page-size", "4"}) {}

  ToolRun tool(const std::string& args, const std::string& token = testing::kHubWriteToken,
               const std::string& extra_env = "") {
    std::string command = std::string(testing::kCleanEnv) +
                          " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
                          home.path().string() + "' HF_ENDPOINT=" + server.url() +
                          " HF_TOKEN=" + token + " NEURON_CACHE_RETRY_BASE_MS=10 " + extra_env +
                          " " + testing::tool_path() + " " + args + " 2>&1";
    ToolRun run{};
    run.code = testing::run_command(command, &run.output);
    return run;
  }

  // The example registry entry of the format spec (llamafactory/tiny-random-Llama-3).
  void add_registry_entry(const std::string& compiler_dir) {
    auto vectors = pyjson::parse(
        testing::read_file(std::string(NEURON_CACHE_VECTORS_DIR) + "/registry-entries.json"));
    const auto& vector = vectors[0];
    std::filesystem::path registry = cache.path() / compiler_dir / "0_REGISTRY" / "0.4.6.dev4";
    std::filesystem::path primary = registry / vector["arch_digest"].get<std::string>() /
                                    (vector["entry_hash"].get<std::string>() + ".json");
    write_file(primary, vector["serialized"].get<std::string>());
    std::filesystem::path alias = registry / "llama" / "llamafactory" / "tiny-random-Llama-3" /
                                  (vector["entry_hash"].get<std::string>() + ".json");
    std::filesystem::create_directories(alias.parent_path());
    std::filesystem::create_symlink(primary, alias);
  }

  json commits(const std::string& repo) {
    net::HttpEngine http({server.url(), testing::kHubWriteToken});
    net::HttpResponse response =
        http.perform({"GET", server.url() + "/api/models/" + repo + "/commits/main"});
    return json::parse(response.body);
  }

  HubServer server;
  TempDir home;
  TempDir cache;
};

TEST_F(HubCliTest, WhoamiPrintsTheUserAndNeverTheToken) {
  ToolRun run = tool("whoami");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "alice"));
  EXPECT_TRUE(contains(run.output, "orgs: acme"));
  EXPECT_FALSE(contains(run.output, testing::kHubWriteToken));
  ToolRun bad = tool("whoami", "hf_wrong");
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(contains(bad.output, "HF_TOKEN")) << bad.output;
}

// `neuronx-cc --version` can take a minute; commands that neither key nor scan by compiler never
// run it, and those that do run it once.
TEST_F(HubCliTest, OnlyCommandsThatNeedTheCompilerVersionRunNeuronxCc) {
  TempDir bin;
  std::filesystem::path calls = bin / "calls";
  write_file(bin / "neuronx-cc", "#!/bin/sh\necho called >> '" + calls.string() +
                                     "'\nsleep \"${NEURONX_CC_DELAY:-0}\"\n"
                                     "echo 'NeuronX Compiler version 2.21.33363.0+82129205'\n");
  std::filesystem::permissions(bin / "neuronx-cc", std::filesystem::perms::owner_all);
  std::string path = "PATH=" + bin.path().string() + ":/usr/bin:/bin";
  auto started = std::chrono::steady_clock::now();
  for (const char* command : {"whoami", "set acme/public-cache", "config show"}) {
    std::string delay = std::string(command) == "config show" ? "0" : "30";
    ToolRun run = tool(command, testing::kHubWriteToken, path + " NEURONX_CC_DELAY=" + delay);
    ASSERT_EQ(run.code, 0) << command << "\n" << run.output;
    if (std::string(command) == "config show") {
      EXPECT_TRUE(contains(run.output, "2.21.33363.0+82129205")) << run.output;
      EXPECT_EQ(testing::read_file(calls), "called\n") << "config show detects it, once";
    } else {
      EXPECT_FALSE(std::filesystem::exists(calls)) << command << " ran neuronx-cc";
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST_F(HubCliTest, CreateSavesTheRepoWhereOptimumNeuronReadsIt) {
  ToolRun run = tool("create");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output,
                       "Neuron cache created on the Hugging Face Hub: "
                       "alice/optimum-neuron-cache [private]."));
  EXPECT_EQ(testing::read_file(home / "optimum_neuron_custom_cache"), "alice/optimum-neuron-cache");
  EXPECT_TRUE(contains(tool("config show").output, "cache_repo = alice/optimum-neuron-cache"));
  ToolRun again = tool("create");
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(contains(again.output, "already exists")) << again.output;
  ToolRun org = tool("create -n acme/shared --public");
  ASSERT_EQ(org.code, 0) << org.output;
  EXPECT_TRUE(contains(org.output, "acme/shared [public]"));
}

// A shared folder is a store once `create` marked it (or it is a mount point, or holds a store
// tree): an empty folder could be the mount point of an unmounted share.
TEST_F(HubCliTest, CreateMakesASharedFolderAStoreAndOnlyThenIsItFilled) {
  make_entry(cache.path(), "MODULE_11+d7cde3b5", Kind::Success);
  TempDir mnt;
  std::string store = "file://" + (mnt / "share").string();
  std::filesystem::create_directories(mnt / "share");
  std::string sync = "synchronize --cache-dir '" + cache.path().string() + "'";
  ToolRun refused = tool(sync, testing::kHubWriteToken, "CUSTOM_CACHE_REPO=" + store);
  EXPECT_EQ(refused.code, 1) << refused.output;
  EXPECT_TRUE(contains(refused.output, "is not known to be a neuron-cache store"))
      << refused.output;
  EXPECT_TRUE(contains(refused.output, "neuron-cache create -n " + store)) << refused.output;
  EXPECT_TRUE(std::filesystem::is_empty(mnt / "share"));

  ToolRun created = tool("create -n " + store);
  ASSERT_EQ(created.code, 0) << created.output;
  EXPECT_TRUE(contains(created.output, "created in the shared folder " + (mnt / "share").string()));
  EXPECT_FALSE(std::filesystem::exists(home / "optimum_neuron_custom_cache"));
  EXPECT_TRUE(contains(tool("create -n " + store).output, "already in the shared folder"));
  ToolRun synced = tool(sync, testing::kHubWriteToken, "CUSTOM_CACHE_REPO=" + store);
  ASSERT_EQ(synced.code, 0) << synced.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(mnt / "share" / testing::kCompilerDir /
                                               "MODULE_11+d7cde3b5" / "model.neff"));
  EXPECT_EQ(tool("create -n " + (mnt / "nowhere" / "deep").string().insert(0, "file://")).code, 1);
  EXPECT_EQ(tool("create -n s3://bucket/prefix").code, 2);
}

TEST_F(HubCliTest, SetChecksTheRepoAndWarnsWhenReplacing) {
  ToolRun missing = tool("set acme/does-not-exist");
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(contains(missing.output, "does not exist or is private to you")) << missing.output;
  ASSERT_EQ(tool(std::string("set ") + testing::kHubPublicRepo).code, 0);
  ToolRun replace = tool(std::string("set ") + testing::kHubPrivateRepo);
  ASSERT_EQ(replace.code, 0) << replace.output;
  EXPECT_TRUE(
      contains(replace.output, "A custom cache repo was already registered: acme/public-cache"));
  EXPECT_EQ(testing::read_file(home / "optimum_neuron_custom_cache"), testing::kHubPrivateRepo);
  ToolRun bob = tool(std::string("set ") + testing::kHubPrivateRepo, testing::kHubBobToken);
  EXPECT_EQ(bob.code, 1) << "bob has no access to acme's private repo";
}

// A repo name is a path in Hub URLs sent with the token: "../../api/whoami-v2" would read
// another endpoint. Wherever it comes from, it is refused before any request.
TEST_F(HubCliTest, MalformedRepoNamesAreRefusedBeforeAnyRequest) {
  const std::string bad = "../../api/whoami-v2";
  const std::string lookup = "lookup llamafactory/tiny-random-Llama-3 --compiler-version 2.21.1.0";
  server.clear_log();
  ToolRun option = tool(lookup + " --repo " + bad);
  EXPECT_EQ(option.code, 2) << option.output;
  EXPECT_TRUE(contains(option.output, "--repo \"../../api/whoami-v2\" is not a Hub repo id"))
      << option.output;
  ToolRun env = tool(lookup, testing::kHubWriteToken, "CUSTOM_CACHE_REPO=" + bad);
  EXPECT_EQ(env.code, 2) << env.output;
  EXPECT_TRUE(contains(
      env.output, "the cache repo from CUSTOM_CACHE_REPO \"" + bad + "\" is not a Hub repo id"))
      << env.output;
  ToolRun set = tool("set " + bad);
  EXPECT_EQ(set.code, 2) << set.output;
  EXPECT_TRUE(contains(set.output, "is not a Hub repo id")) << set.output;
  EXPECT_FALSE(std::filesystem::exists(home / "optimum_neuron_custom_cache"));
  write_file(home / "optimum_neuron_custom_cache", bad);
  ToolRun saved = tool(lookup);
  EXPECT_EQ(saved.code, 2) << saved.output;
  EXPECT_TRUE(
      contains(saved.output, "optimum_neuron_custom_cache \"" + bad + "\" is not a Hub repo id"))
      << saved.output;
  ToolRun sync = tool("synchronize --repo acme/x--y --cache-dir '" + cache.path().string() + "'");
  EXPECT_EQ(sync.code, 2) << sync.output;
  EXPECT_EQ(server.access_log().size(), 0u) << server.access_log().dump();
  // `set` replaces a bad saved repo (the settings only warn about it).
  ToolRun fix = tool(std::string("set ") + testing::kHubPublicRepo);
  EXPECT_EQ(fix.code, 0) << fix.output;
  EXPECT_EQ(testing::read_file(home / "optimum_neuron_custom_cache"), testing::kHubPublicRepo);
}

TEST_F(HubCliTest, SynchronizeUploadsOnceInOneCommitWithoutLocks) {
  ASSERT_EQ(tool("create -n sync-cache").code, 0);
  make_entry(cache.path(), "MODULE_11+d7cde3b5", Kind::Success);
  make_entry(cache.path(), "MODULE_12+d7cde3b5", Kind::Failed);
  make_entry(cache.path(), "MODULE_13+d7cde3b5", Kind::Locked);
  write_file(cache / "lock", "");
  write_file(cache / testing::kCompilerDir / "MODULE_11+d7cde3b5" / "model.neff",
             std::string(3 << 20, 'n'));
  add_registry_entry(testing::kCompilerDir);
  server.clear_log();
  ToolRun run = tool("synchronize --cache-dir '" + cache.path().string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output,
                       "Pre-sync cleanup: Removed 1 failed entries. Removed 1 stale lock files."))
      << run.output;
  EXPECT_TRUE(contains(run.output, "Synchronization complete."));
  EXPECT_TRUE(contains(run.output, "Uploading done: "))
      << "progress, as plain lines outside a terminal";
  json log = server.access_log();
  EXPECT_EQ(
      testing::count_requests(
          log,
          [](const json& e) { return e["method"] == "POST" && contains(e["path"], "/commit/"); }),
      1u);
  json history = commits("alice/sync-cache");
  EXPECT_EQ(history[0]["title"], "Synchronizing local compiler cache.");
  // Files on the Hub: same relative paths, the alias uploaded as a regular file, no lock files.
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  std::set<std::string> paths;
  for (const auto& f : hub::HubClient(options).list_tree("alice/sync-cache")) paths.insert(f.path);
  const std::string module = std::string(testing::kCompilerDir) + "/MODULE_11+d7cde3b5/";
  EXPECT_TRUE(paths.count(module + "model.neff"));
  EXPECT_TRUE(paths.count(module + "model.done"));
  EXPECT_FALSE(paths.count("lock"));
  for (const auto& path : paths) EXPECT_FALSE(path.ends_with(".lock")) << path;
  EXPECT_FALSE(paths.count(std::string(testing::kCompilerDir) + "/MODULE_12+d7cde3b5/model.log"));
  EXPECT_TRUE(paths.count(
      std::string(testing::kCompilerDir) +
      "/0_REGISTRY/0.4.6.dev4/llama/llamafactory/tiny-random-Llama-3/5e484d66cb3e29251244.json"));

  server.clear_log();
  ToolRun again = tool("synchronize --json --cache-dir '" + cache.path().string() + "'");
  ASSERT_EQ(again.code, 0) << again.output;
  auto result = pyjson::parse(again.output);
  EXPECT_EQ(result["uploaded_files"], 0);
  EXPECT_EQ(result["committed"], false);
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [](const json& e) {
                                      return e["method"] == "PUT" ||
                                             contains(e["path"], "/commit/") ||
                                             contains(e["path"], "/preupload/");
                                    }),
            0u)
      << "a second synchronize sends nothing";
}

TEST_F(HubCliTest, SynchronizeRetriesConcurrentCommits) {
  ASSERT_EQ(tool("create -n busy-cache").code, 0);
  make_entry(cache.path(), "MODULE_21+d7cde3b5", Kind::Success);
  server.set_faults(
      json::array({{{"match", {{"path_contains", "/commit/"}}},
                    {"count", 2},
                    {"action", "status"},
                    {"status", 412},
                    {"message", "A commit has happened since. Please refresh and try again."}}}));
  ToolRun run = tool("synchronize --json --cache-dir '" + cache.path().string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(pyjson::parse(run.output)["attempts"], 3);
  server.set_faults(json::array({{{"match", {{"path_contains", "/commit/"}}},
                                  {"count", 100},
                                  {"action", "status"},
                                  {"status", 409}}}));
  make_entry(cache.path(), "MODULE_22+d7cde3b5", Kind::Success);
  ToolRun fail = tool("synchronize --cache-dir '" + cache.path().string() + "'");
  EXPECT_EQ(fail.code, 1);
  EXPECT_TRUE(contains(fail.output, "failed after 6 attempts due to concurrent commits"))
      << fail.output;
}

TEST_F(HubCliTest, SynchronizeWithAReadOnlyTokenSaysSo) {
  make_entry(cache.path(), "MODULE_31+d7cde3b5", Kind::Success);
  ToolRun run = tool(std::string("synchronize --repo ") + testing::kHubPublicRepo +
                         " --cache-dir '" + cache.path().string() + "'",
                     testing::kHubReadToken);
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(contains(run.output, "is read-only (role read)")) << run.output;
  EXPECT_TRUE(contains(run.output, "a token with write access")) << run.output;
  EXPECT_FALSE(contains(run.output, "--read-only")) << "synchronize has no --read-only";
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [](const json& e) {
                                      std::string path = e["path"];
                                      return contains(path, "/preupload/") ||
                                             contains(path, "/commit/") || contains(path, "/lfs/");
                                    }),
            0u)
      << "whoami said read: no write request is sent";
  EXPECT_EQ(commits(testing::kHubPublicRepo).size(), 1u) << "only the seed commit";
}

TEST_F(HubCliTest, LookupFindsEntriesWithAConstantNumberOfListings) {
  ASSERT_EQ(tool("create -n lookup-cache").code, 0);
  add_registry_entry(testing::kCompilerDir);
  add_registry_entry("neuronxcc-2.15.128.0+56dc5a86");
  for (int i = 0; i < 6; ++i)
    make_entry(cache.path(), "MODULE_4" + std::to_string(i) + "+d7cde3b5", Kind::Success);
  ToolRun quiet = tool("synchronize --quiet --cache-dir '" + cache.path().string() + "'");
  ASSERT_EQ(quiet.code, 0) << quiet.output;
  EXPECT_TRUE(quiet.output.empty()) << "--quiet prints nothing: " << quiet.output;
  server.clear_log();
  ToolRun run =
      tool("lookup llamafactory/tiny-random-Llama-3 --json --compiler-version 2.21.33363.0");
  ASSERT_EQ(run.code, 0) << run.output;
  auto result = pyjson::parse(run.output);
  ASSERT_EQ(result["entries"].size(), 1u) << run.output;
  const auto& row = result["entries"][0];
  EXPECT_EQ(row["batch_size"], 2);
  EXPECT_EQ(row["sequence_length"], 512);
  EXPECT_EQ(row["tensor_parallel"], 2);
  EXPECT_EQ(row["dtype"], "bfloat16");
  EXPECT_EQ(row["instance_type"], "trn1");
  EXPECT_EQ(row["compiler_version"], "2.21.33363.0+82129205");
  EXPECT_EQ(row["checkpoint_revision"], "0000000000000000000000000000000000000000");
  size_t tree_requests = testing::count_requests(
      server.access_log(), [](const json& e) { return contains(e["path"], "/tree/"); });
  EXPECT_LE(tree_requests, 4u) << "root listing plus one paginated registry listing";
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [](const json& e) {
                                      return contains(e["path"], "/resolve/") &&
                                             !contains(e["path"], "config.json");
                                    }),
            1u)
      << "alias and primary share a hash: one download";
  EXPECT_EQ(testing::count_requests(
                server.access_log(),
                [](const json& e) { return contains(e["path"], "tiny-random-Llama-3/resolve/"); }),
            1u)
      << "the model's config.json, for its architecture, once";

  ToolRun text = tool("lookup llamafactory/tiny-random-Llama-3 --batch-size 2 --dtype bf16");
  EXPECT_TRUE(contains(text.output, "Cached entries for llamafactory/tiny-random-Llama-3"))
      << text.output;
  EXPECT_TRUE(contains(text.output, "not a guaranteed cache hit"));
  ToolRun none = tool("lookup llamafactory/tiny-random-Llama-3 --batch-size 8");
  EXPECT_TRUE(
      contains(none.output, "No cached entries found for llamafactory/tiny-random-Llama-3"));
}

// Writes `text` as a registry file named by its SHA-512 prefix under `folder` (relative to the
// compiler folder); returns its path relative to the cache root.
std::string put_registry_text(const std::filesystem::path& cache, const std::string& folder,
                              const std::string& text) {
  std::string rel = std::string(testing::kCompilerDir) + "/0_REGISTRY/" + folder + "/" +
                    registry::entry_hash(text) + ".json";
  write_file(cache / rel, text);
  return rel;
}

TEST_F(HubCliTest, LookupReadsEveryRegistryGenerationLikeThePublicCache) {
  ASSERT_EQ(tool("create -n public-like").code, 0);
  add_registry_entry(testing::kCompilerDir);  // 0.4.6.dev4: arch folder + alias
  auto vectors = pyjson::parse(
      testing::read_file(std::string(NEURON_CACHE_VECTORS_DIR) + "/registry-entries.json"));
  // A second configuration of the same model in the same arch folder: no alias, as
  // optimum-neuron writes aliases only for a model's first entry.
  json second = vectors[0]["entry"];
  second["neuron"]["batch_size"] = 4;
  second["neuron"]["sequence_length"] = 4096;
  put_registry_text(cache.path(), "0.4.6.dev4/" + vectors[0]["arch_digest"].get<std::string>(),
                    registry::serialize(second));
  // Another model with the same architecture: listed as such, since the model's config.json is
  // not on this Hub and the folder its alias links is taken as its architecture's.
  json other = vectors[0]["entry"];
  other["_model_id"] = "someone/fine-tune";
  other["neuron"]["checkpoint_id"] = "someone/fine-tune";
  put_registry_text(cache.path(), "0.4.6.dev4/" + vectors[0]["arch_digest"].get<std::string>(),
                    registry::serialize(other));
  // optimum-neuron 0.3.0: serialize() text under <model_type>/<model_id>/.
  json v030 = vectors[0]["entry"];
  v030["neuron"]["tp_degree"] = 8;
  put_registry_text(cache.path(), "0.3.0/llama/llamafactory/tiny-random-Llama-3",
                    registry::serialize(v030));
  // optimum-neuron 0.0.20: compact legacy text with the neuron part inside, by mode.
  std::string legacy =
      "{\"model_type\": \"llama\", \"hidden_size\": 16, \"neuron\": {\"task\": "
      "\"text-generation\", "
      "\"batch_size\": 1, \"num_cores\": 2, \"auto_cast_type\": \"fp16\", \"sequence_length\": "
      "1024, "
      "\"compiler_type\": \"neuronx-cc\", \"compiler_version\": \"2.12.68.0\", \"checkpoint_id\": "
      "\"llamafactory/tiny-random-Llama-3\", \"checkpoint_revision\": \"abc123\"}}";
  put_registry_text(cache.path(), "0.0.20/inference/llama/llamafactory/tiny-random-Llama-3",
                    legacy);
  write_file(cache / "inference-cache-config" / "llama.json",
             "{\"llamafactory/tiny-random-Llama-3\": []}");
  ASSERT_EQ(tool("synchronize --quiet --cache-dir '" + cache.path().string() + "'").code, 0);

  ToolRun run = tool("lookup llamafactory/tiny-random-Llama-3 --json");
  ASSERT_EQ(run.code, 0) << run.output;
  auto answer = pyjson::parse(run.output);
  EXPECT_TRUE(contains(answer["architecture_problem"].get<std::string>(), "config.json"));
  json rows = json::array();
  size_t same_architecture = 0;
  for (const auto& row : answer["entries"]) {
    if (row["same_architecture_as"] == "someone/fine-tune") {
      ++same_architecture;
    } else {
      rows.push_back(row);
    }
  }
  EXPECT_EQ(same_architecture, 1u) << run.output;
  ASSERT_EQ(rows.size(), 4u) << run.output;
  // Sorted by tensor parallel, batch size, sequence length.
  EXPECT_EQ(rows[0]["batch_size"], 1);
  EXPECT_EQ(rows[0]["dtype"], "float16");
  EXPECT_EQ(rows[0]["tensor_parallel"], 2);
  EXPECT_EQ(rows[0]["compiler_version"], "2.12.68.0");
  EXPECT_EQ(rows[0]["checkpoint_revision"], "abc123");
  EXPECT_EQ(rows[1]["batch_size"], 2);
  EXPECT_EQ(rows[2]["batch_size"], 4);
  EXPECT_EQ(rows[2]["sequence_length"], 4096);
  EXPECT_EQ(rows[3]["tensor_parallel"], 8);
  for (const auto& row : rows) EXPECT_EQ(row["task"], "text-generation");

  ToolRun text = tool("lookup llamafactory/tiny-random-Llama-3 --tensor-parallel-size 2");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(
      contains(text.output, "task             batch size  sequence length  tensor parallel"))
      << text.output;
  EXPECT_TRUE(contains(text.output, "text-generation  4           4096             2"))
      << text.output;
  EXPECT_TRUE(contains(text.output, "was not computed")) << text.output;
}

TEST_F(HubCliTest, OfflineCommandsMakeNoRequest) {
  server.clear_log();
  ToolRun run = tool("lookup org/model", testing::kHubWriteToken, "HF_HUB_OFFLINE=1");
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(contains(run.output, "HF_HUB_OFFLINE")) << run.output;
  EXPECT_TRUE(server.access_log().empty());
}

}  // namespace
}  // namespace neuron_cache
