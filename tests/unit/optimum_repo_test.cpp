// optimum-neuron's own cache repos (no neuron-cache index) as the pipeline CLI meets them: plan,
// ci and prefetch through the registry entries optimum-cli wrote.

#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

// A repo as optimum-neuron fills it: `optimum-cli export neuron` (the stand-in) into a local
// cache of the Python user's, then `optimum-cli neuron cache synchronize`, i.e. one commit of
// every file of that root (symlinks uploaded as their content), no neuron-cache index.
class OptimumRepoTest : public PipelineCliTest {
 protected:
  void seed_like_optimum(const std::vector<Conf>& confs,
                         const std::string& task = "text-generation") {
    fs::path root = work / "python-user-cache";
    for (const auto& c : confs) {
      // The entry holds the model's config as optimum-neuron reads it from the Hub.
      fs::path config = work / "model-config.json";
      testing::write_file(config, model_config_text(c.model));
      std::string command =
          std::string(testing::kCleanEnv) + " STAND_IN_MODEL_CONFIG=" + quoted(config) +
          " PATH=/usr/bin:/bin STAND_IN_DELAY=0 STAND_IN_NEFF_BYTES=" + std::to_string(kNeffBytes) +
          " NEURON_COMPILE_CACHE_URL=" + quoted(root) + " " +
          stand_in_command(c, work / "python-out", task) + " >/dev/null";
      ASSERT_EQ(testing::run_command(command), 0) << command;
    }
    std::vector<hub::CommitOperation> operations;
    for (const auto& item : fs::recursive_directory_iterator(root)) {
      if (!fs::is_regular_file(item.path())) continue;  // follows the alias symlinks
      std::string rel = item.path().lexically_relative(root).generic_string();
      // upload_folder sends a symlink's content: the registry alias is a link to its primary.
      if (rel != "lock") {
        operations.push_back({hub::CommitOperation::Kind::Add, rel, fs::canonical(item.path())});
      }
    }
    client().commit(kRepo, operations, "Synchronizing local compiler cache.", std::nullopt);
    optimum_root = root;
  }

  static constexpr uint64_t kNeffBytes = 3 << 20;  // LFS: sending one again would show
  fs::path optimum_root;
};

TEST_F(OptimumRepoTest, PlanNamesRegistryHitsOfARepoWithoutIndex) {
  Conf bs1{"llama-bs1", 1, 128}, bs2{"llama-bs2", 2, 128}, bs4{"llama-bs4", 4, 128};
  seed_like_optimum({bs1, bs2});
  ManifestSpec spec;
  spec.confs = {bs1, bs2, bs4};
  fs::path manifest = write_manifest(spec);
  server.clear_log();
  json plan = plan_json(manifest);
  ASSERT_FALSE(plan.is_null());
  size_t listings_for_three = count(server.access_log(), [](const json& e) {
    return contains(e["path"].get<std::string>(), "/tree/");
  });
  std::map<std::string, json> rows;
  for (const auto& row : plan["configurations"]) rows[row["name"]] = row;
  for (const auto& name : {"llama-bs1", "llama-bs2"}) {
    EXPECT_EQ(rows[name]["status"], "registry") << rows[name];
    std::string path = rows[name]["registry"]["path"];
    EXPECT_TRUE(path.starts_with(kCompiler + "/0_REGISTRY/0.4.5/")) << path;
    EXPECT_EQ(rows[name]["registry"]["optimum_neuron_version"], "0.4.5");
    EXPECT_TRUE(contains(rows[name]["reason"], "optimum-neuron's registry")) << rows[name];
  }
  EXPECT_EQ(rows["llama-bs4"]["status"], "compile");
  EXPECT_EQ(plan["registry"], 2);
  EXPECT_EQ(plan["repo_origin"], "the manifest's cache_repo in " + manifest.string());
  bool told = false;
  for (const auto& note : plan["notes"]) told = told || contains(note, "no neuron-cache index");
  EXPECT_TRUE(told) << plan["notes"];

  ToolResult text = tool("plan " + quoted(manifest));
  ASSERT_EQ(text.code, 0) << text.all();
  EXPECT_TRUE(contains(text.out, "cache repo: " + std::string(kRepo) + " (from the manifest's"))
      << text.out;
  EXPECT_TRUE(contains(text.out, "registry llama-bs1")) << text.out;
  EXPECT_TRUE(contains(text.out, "2 in optimum-neuron's registry")) << text.out;

  // Constant in the number of configurations: one configuration lists as much as three.
  spec.confs = {bs1};
  fs::path one = write_manifest(spec, "one.yaml");
  server.clear_log();
  ASSERT_FALSE(plan_json(one, "", work / "other-cache").is_null());
  size_t listings_for_one = count(server.access_log(), [](const json& e) {
    return contains(e["path"].get<std::string>(), "/tree/");
  });
  EXPECT_EQ(listings_for_one, listings_for_three);
}

TEST_F(OptimumRepoTest, CiThroughOptimumProxyIndexesRegistryHitsThenPrefetchIsDirect) {
  Conf bs1{"llama-bs1", 1, 128}, bs2{"llama-bs2", 2, 128};
  seed_like_optimum({bs1, bs2});
  size_t commits_before = hub_commits();
  ManifestSpec spec;
  spec.confs = {bs1, bs2};
  fs::path manifest = write_manifest(spec);
  server.clear_log();
  ToolResult first = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out1") +
                              " --report " + quoted(work / "report1.json"),
                          "STAND_IN_PROXY=1");
  ASSERT_EQ(first.code, 0) << first.all();
  json log = server.access_log();
  json report = json::parse(read_file(work / "report1.json"));
  EXPECT_EQ(report["totals"]["failed"], 0) << report.dump(2);
  for (const auto& row : report["configurations"]) {
    EXPECT_EQ(row["status"], "registry") << row;
    EXPECT_EQ(row["outcome"], "reused from the Hub through optimum-neuron") << row;
    EXPECT_EQ(row["compile"]["modules_from_hub"], 2) << row;
  }
  // The stand-in compiled nothing: every graph came through its hub proxy, from the declared repo.
  std::ifstream calls_file(call_log);
  size_t lines = 0;
  for (std::string line; std::getline(calls_file, line); ++lines) {
    json call = json::parse(line);
    EXPECT_TRUE(call["compiled"].empty()) << line;
    EXPECT_EQ(call["hub_hits"].size(), 2u) << line;
    EXPECT_EQ(call["custom_cache_repo"], kRepo) << line;
    EXPECT_EQ(call["hf_endpoint"], endpoint) << line;
  }
  EXPECT_EQ(lines, 2u);
  // One commit, holding the index shard only: NEFFs and registry files were already there.
  EXPECT_EQ(hub_commits(), commits_before + 1);
  EXPECT_EQ(
      count(log, [](const json& e) { return e["listener"] == "cdn" && e["method"] == "PUT"; }), 0u)
      << "an LFS file was uploaded again";
  EXPECT_LT(report["push"]["bytes_uploaded"].get<uint64_t>(), 64u << 10) << report["push"];
  json index = hub_index();
  ASSERT_FALSE(index.is_null());
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  for (const auto& [name, key] : keys) {
    ASSERT_TRUE(index["entries"].contains(key)) << name;
    EXPECT_EQ(module_names(index["entries"][key]).size(), 2u) << index["entries"][key];
  }

  // A second machine prefetches both directly and runs no compile command.
  fs::path cache2 = work / "cache2";
  ToolResult second = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2") +
                               " --report " + quoted(work / "report2.json"),
                           "STAND_IN_PROXY=1", cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  json report2 = json::parse(read_file(work / "report2.json"));
  EXPECT_EQ(report2["totals"]["hub_hits"], 2) << report2.dump(2);
  EXPECT_EQ(calls(), 2u) << "the second machine ran the compile command";
  for (const auto& c : {bs1, bs2}) {
    for (const auto& module : {context_module(c), token_module(c)}) {
      fs::path mine = cache2 / kCompiler / module / "model.neff";
      fs::path theirs = optimum_root / kCompiler / module / "model.neff";
      EXPECT_EQ(testing::run_command("cmp -s " + quoted(mine) + " " + quoted(theirs)), 0) << mine;
    }
  }
}

TEST_F(OptimumRepoTest, ProxyWithoutLinksIsReusedButNotRecorded) {
  Conf bs1{"llama-bs1", 1, 128};
  seed_like_optimum({bs1});
  ManifestSpec spec;
  spec.confs = {bs1};
  fs::path manifest = write_manifest(spec);
  ToolResult run = tool("ci " + quoted(manifest) + " --report " + quoted(work / "report.json"),
                        "STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=0");
  ASSERT_EQ(run.code, 0) << run.all();
  json report = json::parse(read_file(work / "report.json"));
  EXPECT_EQ(report["configurations"][0]["outcome"], "reused from the Hub through optimum-neuron");
  EXPECT_TRUE(contains(run.err, "nothing was recorded")) << run.all();
  EXPECT_TRUE(hub_index().is_null()) << "nothing known, nothing indexed";
}

TEST_F(OptimumRepoTest, TracedExportOfAnOptimumRepoComesThroughTheProxyThenDirectly) {
  ManifestSpec spec = encoder_spec();
  seed_like_optimum(spec.confs, "feature-extraction");
  fs::path manifest = write_manifest(spec);
  json plan = plan_json(manifest);
  ASSERT_FALSE(plan.is_null());
  // `optimum-cli export neuron` does not ask the Hub for traced models (from_pretrained with
  // export=True does, as the stand-in's proxy below): the plan cannot promise the reuse.
  EXPECT_EQ(plan["configurations"][0]["status"], "compile") << plan.dump(1);
  EXPECT_TRUE(contains(plan["configurations"][0]["reason"], "reuse depends on how the export"))
      << plan.dump(1);
  size_t commits_before = hub_commits();
  server.clear_log();
  // The same model config as optimum-neuron's export read: the same entry hash names the folder.
  const std::string proxy =
      "STAND_IN_PROXY=1 STAND_IN_MODEL_CONFIG=" + quoted(work / "model-config.json");
  ToolResult first =
      tool("ci " + quoted(manifest) + " --report " + quoted(work / "r1.json"), proxy);
  ASSERT_EQ(first.code, 0) << first.all();
  json report = json::parse(read_file(work / "r1.json"));
  EXPECT_EQ(report["configurations"][0]["outcome"], "reused from the Hub through optimum-neuron")
      << report.dump(1);
  EXPECT_EQ(hub_commits(), commits_before + 1);
  EXPECT_EQ(count(server.access_log(),
                  [](const json& e) { return e["listener"] == "cdn" && e["method"] == "PUT"; }),
            0u);
  std::set<std::string> installed = module_folders(cache);
  ASSERT_EQ(installed.size(), 1u);
  std::string module = *installed.begin();
  for (const auto& item : fs::recursive_directory_iterator(cache / kCompiler / module))
    EXPECT_FALSE(fs::is_symlink(item.symlink_status())) << item.path() << " is still a link";

  fs::path cache2 = work / "cache2";
  ToolResult second =
      tool("ci " + quoted(manifest) + " --report " + quoted(work / "r2.json"), proxy, cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_EQ(json::parse(read_file(work / "r2.json"))["totals"]["hub_hits"], 1);
  EXPECT_EQ(calls(), 1u) << "the second machine ran the export";
  for (const auto& item : fs::recursive_directory_iterator(optimum_root / kCompiler / module)) {
    if (!item.is_regular_file()) continue;
    fs::path rel = item.path().lexically_relative(optimum_root);
    EXPECT_EQ(testing::run_command("cmp -s " + quoted(item.path()) + " " + quoted(cache2 / rel)), 0)
        << rel;
  }
}

}  // namespace
}  // namespace neuron_cache
