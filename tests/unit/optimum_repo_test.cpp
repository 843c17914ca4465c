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
  // `repo`: the cache repo it synchronizes to (made when it is not kRepo); `env`: more of the
  // stand-in's knobs.
  void seed_like_optimum(const std::vector<Conf>& confs,
                         const std::string& task = "text-generation",
                         const std::string& repo = kRepo, const std::string& env = "") {
    fs::path root = work / "python-user-cache";
    if (repo != kRepo) {
      client().create_repo(repo.substr(repo.find('/') + 1), repo.substr(0, repo.find('/')), false);
    }
    for (const auto& c : confs) {
      // The entry holds the model's config as optimum-neuron reads it from the Hub.
      fs::path config = work / "model-config.json";
      testing::write_file(config, model_config_text(c.model));
      std::string command =
          std::string(testing::kCleanEnv) + " STAND_IN_MODEL_CONFIG=" + quoted(config) +
          " PATH=/usr/bin:/bin STAND_IN_DELAY=0 STAND_IN_NEFF_BYTES=" + std::to_string(kNeffBytes) +
          " NEURON_COMPILE_CACHE_URL=" + quoted(root) + " " + env + " " +
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
    client().commit(repo, operations, "Synchronizing local compiler cache.", std::nullopt);
    optimum_root = root;
  }

  // The shape most cases start from: `bs1` synchronized by optimum-neuron, a manifest of it.
  fs::path seeded_manifest_of(const Conf& bs1) {
    seed_like_optimum({bs1});
    ManifestSpec spec;
    spec.confs = {bs1};
    return write_manifest(spec);
  }

  // Whether every NEFF folder of `c` is complete in `root` with regular files (no link) holding
  // the bytes optimum-neuron synchronized.
  bool installed_like_optimum(const fs::path& root, const Conf& c) const {
    for (const auto& module : {context_module(c), token_module(c)}) {
      fs::path dir = root / kCompiler / module;
      if (!fs::is_regular_file(fs::symlink_status(dir / "model.neff")) ||
          !fs::is_regular_file(fs::symlink_status(dir / "model.done")) ||
          testing::run_command("cmp -s " + quoted(dir / "model.neff") + " " +
                               quoted(optimum_root / kCompiler / module / "model.neff")) != 0) {
        return false;
      }
    }
    return true;
  }

  // The report of one `ci` run of `manifest` into `root` with the stand-in's `env`.
  json ci_report(const fs::path& manifest, const std::string& env, const fs::path& root,
                 ToolResult& run) {
    fs::path report = work / ("report-" + std::to_string(++reports_) + ".json");
    run = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out") + " --report " +
                   quoted(report),
               env, root);
    return fs::exists(report) ? json::parse(read_file(report)) : json(nullptr);
  }

  // The JSON report schema, as a writer is held to it.
  static std::vector<std::string> schema_problems(const json& report) {
    return testing::SchemaCheck(
               json::parse(read_file(fs::path(NEURON_CACHE_TESTS_DIR).parent_path() /
                                     "core/neuron_cache/report/report.schema.json")))
        .problems(report);
  }

  // Requests for the LFS object of `path` (a file of optimum_root) on the storage listener.
  size_t lfs_downloads(const json& log, const fs::path& path) const {
    std::string sha = sha256_hex(read_file(path));
    return count(log, [&](const json& e) {
      return e["listener"] == "cdn" && e["method"] == "GET" &&
             contains(e["path"].get<std::string>(), sha);
    });
  }

  int reports_ = 0;

  static constexpr uint64_t kNeffBytes = 3 << 20;  // LFS: sending one again would show
  fs::path optimum_root;
};

// A repo whose NEFFs are not all LFS: its .gitattributes has no *.neff line (as older repos'),
// so a NEFF of at most 1 MB is a regular git file, named in the HF file cache by its git blob id.
// `bs1`'s context NEFF is kNeffBytes (LFS by size), its token NEFF kSmallNeff (regular).
class RegularNeffRepoTest : public OptimumRepoTest {
 protected:
  static constexpr uint64_t kSmallNeff = 512 << 10;

  fs::path seed_with_a_regular_neff() {
    std::string attributes = client().read_file(kRepo, ".gitattributes").value_or("");
    std::string kept;
    std::istringstream lines(attributes);
    for (std::string line; std::getline(lines, line);) {
      if (!contains(line, "*.neff")) kept += line + "\n";
    }
    write_file(work / "gitattributes", kept);
    client().commit(kRepo,
                    {{hub::CommitOperation::Kind::Add, ".gitattributes", work / "gitattributes"}},
                    "NEFFs as regular files", std::nullopt);
    seed_like_optimum({bs1}, "text-generation", kRepo,
                      "STAND_IN_TKG_NEFF_BYTES=" + std::to_string(kSmallNeff));
    std::map<std::string, bool> lfs;
    for (const auto& entry : client().paths_info(kRepo, {ctx(), tkg()}))
      lfs[entry.path] = entry.is_lfs();
    EXPECT_TRUE(lfs.at(ctx()));
    EXPECT_FALSE(lfs.at(tkg()));
    ManifestSpec spec;
    spec.confs = {bs1};
    return write_manifest(spec);
  }

  std::string ctx() const { return kCompiler + "/" + context_module(bs1) + "/model.neff"; }
  std::string tkg() const { return kCompiler + "/" + token_module(bs1) + "/model.neff"; }
  // The HF file cache's blob of the token NEFF: named by its git blob id.
  fs::path tkg_blob() const {
    return home / "hub/models--acme--neuron-cache/blobs" /
           git_blob_id(read_file(optimum_root / tkg()));
  }
  // Body bytes the hub listener served for the regular token NEFF (its resolve, and any
  // same-host answer a redirect leads to).
  uint64_t tkg_bytes_served(const json& log) const {
    // The log has raw paths: the pinned URL percent-encodes the '+' of the folder's name.
    const std::string module = token_module(bs1);
    const std::string graph = module.substr(0, module.find('+'));
    uint64_t bytes = 0;
    for (const auto& e : log) {
      std::string path = e["path"].get<std::string>();
      if (e["listener"] == "hub" && e["method"] == "GET" && contains(path, graph) &&
          path.ends_with("/model.neff"))
        bytes += e["bytes_out"].get<uint64_t>();
    }
    return bytes;
  }

  Conf bs1{"llama-bs1", 1, 128};
};

// Issue 39 (1): a regular NEFF the hub proxy fetched is taken from the HF file cache by its git
// blob id, verified, as an LFS one is by its sha256: each byte crosses the network once.
TEST_F(RegularNeffRepoTest, ProxyBlobsAreTakenByGitBlobIdAndSha256AlikeEachByteOnce) {
  fs::path manifest = seed_with_a_regular_neff();
  server.clear_log();
  ToolResult run;
  json report = ci_report(manifest, "STAND_IN_PROXY=1", cache, run);
  ASSERT_EQ(run.code, 0) << run.all();
  json log = server.access_log();
  EXPECT_EQ(report["totals"]["bytes_linked"], kNeffBytes + kSmallNeff) << report["totals"];
  EXPECT_LT(report["totals"]["bytes_downloaded"].get<uint64_t>(), 64u << 10)
      << "the graph files only: " << report["totals"];
  EXPECT_EQ(lfs_downloads(log, optimum_root / ctx()), 1u);
  EXPECT_EQ(tkg_bytes_served(log), kSmallNeff) << "the proxy's download, and no other";
  EXPECT_TRUE(fs::equivalent(tkg_blob(), cache / tkg())) << "hard-linked from the HF file cache";
  EXPECT_TRUE(installed_like_optimum(cache, bs1));
}

// A blob is hostile input: one under the right git blob id whose bytes are not that id's (the
// proxy, like huggingface_hub, trusts a blob by its name) is not used; the file is downloaded.
TEST_F(RegularNeffRepoTest, ABlobWhoseBytesDoNotMatchItsGitBlobIdIsNotUsed) {
  fs::path manifest = seed_with_a_regular_neff();
  std::string bytes = read_file(optimum_root / tkg());
  bytes[bytes.size() / 2] ^= 0x5a;
  write_file(tkg_blob(), bytes);
  server.clear_log();
  ToolResult run;
  json report = ci_report(manifest, "STAND_IN_PROXY=1 STAND_IN_PROXY_REUSE_BLOBS=1", cache, run);
  ASSERT_EQ(run.code, 0) << run.all();
  json log = server.access_log();
  EXPECT_EQ(report["totals"]["bytes_linked"], kNeffBytes) << "the LFS NEFF only";
  EXPECT_EQ(tkg_bytes_served(log), kSmallNeff) << "neuron-cache's download (the proxy took none)";
  EXPECT_GE(report["totals"]["bytes_downloaded"].get<uint64_t>(), kSmallNeff);
  EXPECT_FALSE(fs::equivalent(tkg_blob(), cache / tkg()));
  EXPECT_TRUE(installed_like_optimum(cache, bs1)) << "the Hub's bytes, not the blob's";
  EXPECT_EQ(read_file(tkg_blob()), bytes) << "the HF file cache is left as it was";
}

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

// optimum-neuron signs nothing: where signatures are required (here through the environment),
// its registry entries are not reused, the plan saying so, and its hub proxy is kept from the
// compile command (a name huggingface_hub refuses as CUSTOM_CACHE_REPO), which compiles; the
// entries pushed are signed, so a second machine with the same policy fetches them.
TEST_F(OptimumRepoTest, UnderRequiredSignaturesTheRegistryIsNotReusedAndTheProxyIsKeptAway) {
  Conf bs1{"llama-bs1", 1, 128}, bs2{"llama-bs2", 2, 128};
  seed_like_optimum({bs1, bs2});
  ManifestSpec spec;
  spec.confs = {bs1, bs2};
  fs::path manifest = write_manifest(spec);
  fs::path secret = work / "ci-1.secret";
  ToolResult made = tool("key generate ci-1 --secret-file " + quoted(secret));
  ASSERT_EQ(made.code, 0) << made.all();
  std::string policy = "NEURON_CACHE_REQUIRE_SIGNATURES=1 NEURON_CACHE_TRUSTED_KEYS='" +
                       made.out.substr(0, made.out.find('\n')) + "'";

  json plan = plan_json(manifest, policy);
  ASSERT_FALSE(plan.is_null());
  EXPECT_EQ(plan["registry"], 0) << plan.dump(1);
  EXPECT_EQ(plan["refused"], 2) << plan.dump(1);
  for (const auto& row : plan["configurations"]) {
    EXPECT_EQ(row["status"], "compile") << row;
    EXPECT_TRUE(contains(row["reason"].get<std::string>(),
                         "optimum-neuron's registry lists it (" + kCompiler + "/0_REGISTRY/"))
        << row;
    EXPECT_TRUE(contains(row["reason"].get<std::string>(), "signatures are required")) << row;
  }

  ToolResult ci = tool("ci " + quoted(manifest) + " --report " + quoted(work / "signed.json"),
                       policy + " STAND_IN_PROXY=1 NEURON_CACHE_SIGNING_KEY=" + secret.string());
  ASSERT_EQ(ci.code, 0) << ci.all();
  json report = json::parse(read_file(work / "signed.json"));
  EXPECT_EQ(report["totals"]["compiled"], 2) << report["totals"];
  EXPECT_EQ(report["totals"]["reused"], 0) << report["totals"];
  std::ifstream calls_file(call_log);
  size_t lines = 0;
  for (std::string line; std::getline(calls_file, line); ++lines) {
    json call = json::parse(line);
    EXPECT_FALSE(call["compiled"].empty()) << line;
    EXPECT_TRUE(call["hub_hits"].empty()) << line;
    EXPECT_TRUE(contains(call["custom_cache_repo"].get<std::string>(), "--")) << line;
  }
  EXPECT_EQ(lines, 2u);
  json second = plan_json(manifest, policy, work / "second-machine");
  EXPECT_EQ(second["in_store"], 2) << second.dump(1);
  EXPECT_EQ(second["refused"], 0) << second.dump(1);
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
  // Issue 24 (3): each NEFF crossed the network once, in the proxy's download; neuron-cache took
  // it from the HF file cache, verified, instead of downloading it again. (Before: 2 each.)
  uint64_t module_bytes = 0;
  for (const auto& c : {bs1, bs2}) {
    for (const auto& module : {context_module(c), token_module(c)}) {
      fs::path neff = optimum_root / kCompiler / module / "model.neff";
      EXPECT_EQ(lfs_downloads(log, neff), 1u) << module;
      for (const auto& file : fs::directory_iterator(optimum_root / kCompiler / module))
        module_bytes += fs::file_size(file.path());
      // Hard-linked: the HF file cache and this cache share the blob (same filesystem, ours).
      fs::path blob = home / "hub/models--acme--neuron-cache/blobs" / sha256_hex(read_file(neff));
      EXPECT_TRUE(fs::equivalent(blob, cache / kCompiler / module / "model.neff")) << module;
    }
  }
  EXPECT_EQ(report["totals"]["bytes_linked"], 4 * kNeffBytes) << report["totals"];
  EXPECT_LT(report["totals"]["bytes_downloaded"].get<uint64_t>(), 64u << 10)
      << "the graph files only: " << report["totals"];
  EXPECT_EQ(schema_problems(report), std::vector<std::string>{});
  // Issue 24 (4): reused, not compiled; their bytes counted; no compile time recorded.
  EXPECT_EQ(report["totals"]["compiled"], 0) << report["totals"];
  EXPECT_EQ(report["totals"]["reused"], 2) << report["totals"];
  EXPECT_EQ(report["totals"]["misses"], 0) << report["totals"];
  EXPECT_EQ(report["totals"]["bytes_reused"], module_bytes) << report["totals"];
  EXPECT_EQ(report["totals"]["compile_seconds"], 0.0) << report["totals"];
  EXPECT_TRUE(contains(first.out, "compiled 0 of 2 missing configurations")) << first.out;
  EXPECT_TRUE(contains(first.out, "(2 reused from the Hub through optimum-neuron)")) << first.out;
  EXPECT_TRUE(contains(first.out, "2 reused through optimum-neuron, 0 compiled, 0 failed"))
      << first.out;
  json stats = json::parse(read_file(cache / ".cache/huggingface/neuron-cache-stats.json"));
  EXPECT_EQ(stats["stores"][kRepo]["reused"], 2) << stats.dump(2);
  EXPECT_EQ(stats["stores"][kRepo]["compiled"], 0) << stats.dump(2);
  EXPECT_EQ(stats["stores"][kRepo]["bytes_reused"], module_bytes) << stats.dump(2);
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
    EXPECT_EQ(index["entries"][key]["compile_seconds"], 0.0) << "nothing was compiled";
  }

  // A second machine prefetches both directly and runs no compile command.
  fs::path cache2 = work / "cache2";
  ToolResult second = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2") +
                               " --report " + quoted(work / "report2.json"),
                           "STAND_IN_PROXY=1", cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  json report2 = json::parse(read_file(work / "report2.json"));
  EXPECT_EQ(report2["totals"]["hub_hits"], 2) << report2.dump(2);
  EXPECT_EQ(report2["totals"]["compile_seconds_saved"], 0.0) << "no compile was ever spent";
  EXPECT_TRUE(contains(second.out, "compile time saved: 0 s")) << second.out;
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
  fs::path manifest = seeded_manifest_of(bs1);
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
  // A compile lease for the configuration planned as a compile (the registry's hit needs none),
  // one push whose commit ends the lease (docs/fleet.md).
  EXPECT_EQ(hub_commits(), commits_before + 2);
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

// Issue 24 (1): libneuronxla may get a NEFF from the proxy without a link in the MODULE folder,
// leaving the graph files or nothing (optimum-neuron's decoder test asserts no .neff in the
// local cache after a Hub hit). The export succeeded: its folders are completed from the store.
class OptimumProxyShapes : public OptimumRepoTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(OptimumProxyShapes, FoldersWithoutANeffOfAnExportThatSucceededAreCompletedFromTheStore) {
  Conf bs1{"llama-bs1", 1, 128};
  fs::path manifest = seeded_manifest_of(bs1);
  ToolResult run;
  json report = ci_report(
      manifest, std::string("STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=") + GetParam(), cache, run);
  ASSERT_EQ(run.code, 0) << run.all();
  ASSERT_FALSE(report.is_null());
  EXPECT_EQ(schema_problems(report), std::vector<std::string>{});
  EXPECT_FALSE(contains(run.all(), "failed MODULE_")) << run.all();
  EXPECT_EQ(report["totals"]["failed"], 0) << report.dump(2);
  const json& row = report["configurations"][0];
  EXPECT_EQ(row["outcome"], "reused from the Hub through optimum-neuron") << row;
  EXPECT_EQ(row["compile"]["modules_from_hub"], 2) << row;
  EXPECT_TRUE(row["compile"]["not_recorded"].is_null()) << row;
  // Both graphs came through the proxy: none was compiled.
  json call = json::parse(read_file(call_log));
  EXPECT_TRUE(call["compiled"].empty()) << call;
  EXPECT_EQ(call["hub_hits"].size(), 2u) << call;
  EXPECT_TRUE(installed_like_optimum(cache, bs1)) << run.all();
  std::string key = keys_of(plan_json(manifest))["llama-bs1"];
  json index = hub_index();
  ASSERT_FALSE(index.is_null()) << run.all();
  EXPECT_EQ(module_names(index["entries"][key]),
            (std::set<std::string>{context_module(bs1), token_module(bs1)}));
}

INSTANTIATE_TEST_SUITE_P(GraphOnlyOrEmpty, OptimumProxyShapes, ::testing::Values("graph", "empty"));

TEST_F(OptimumRepoTest, FoldersWithoutANeffThatTheStoreLacksAreNotRecordedAndTheExportSucceeds) {
  // The proxy reads the repo the manifest's compile env names, which the cache store is not:
  // the store does not hold the folders the command used.
  Conf bs1{"llama-bs1", 1, 128};
  const std::string python_repo = "acme/python-cache";
  seed_like_optimum({bs1}, "text-generation", python_repo);
  ManifestSpec spec;
  spec.confs = {bs1};
  spec.compile_env["CUSTOM_CACHE_REPO"] = python_repo;
  fs::path manifest = write_manifest(spec);
  for (const char* shape : {"graph", "empty"}) {
    SCOPED_TRACE(shape);
    fs::path root = work / (std::string("cache-") + shape);
    ToolResult run;
    json report = ci_report(manifest, std::string("STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=") + shape,
                            root, run);
    ASSERT_EQ(run.code, 0) << run.all();
    EXPECT_EQ(schema_problems(report), std::vector<std::string>{});
    EXPECT_EQ(report["totals"]["failed"], 0) << report.dump(2);
    const json& row = report["configurations"][0];
    EXPECT_EQ(row["outcome"], "reused from the Hub through optimum-neuron") << row;
    ASSERT_TRUE(row["compile"]["not_recorded"].is_string()) << row;
    std::string why = row["compile"]["not_recorded"];
    EXPECT_TRUE(contains(why, "left 2 MODULE folder(s) without their NEFF")) << why;
    EXPECT_TRUE(contains(why, std::string(kRepo) + " does not hold " + kCompiler + "/MODULE_"))
        << why;
    EXPECT_TRUE(contains(why, "the hub proxy read " + python_repo + ", not " + kRepo)) << why;
    // Said as a warning, with what happens next.
    EXPECT_TRUE(contains(run.err,
                         "warning: llama-bs1 was reused from the Hub through "
                         "optimum-neuron, but nothing was recorded for it"))
        << run.err;
    EXPECT_TRUE(contains(run.err, "The next run runs its compile command again")) << run.err;
    EXPECT_TRUE(hub_index().is_null()) << "nothing known, nothing indexed";
    EXPECT_EQ(module_folders(root), std::set<std::string>{}) << "no partial folder";
  }
  EXPECT_EQ(calls(), 2u);
}

TEST_F(OptimumRepoTest, AStoreThatFailsWhileCompletingIsAWarningAndUnderStrictAnError) {
  Conf bs1{"llama-bs1", 1, 128};
  fs::path manifest = seeded_manifest_of(bs1);
  // Every listing of a MODULE folder at the head fails (neuron-cache lists at the commit it
  // read; the proxy reads files at main, never listings).
  auto fail_listings = [&] {
    server.set_faults(json::array(
        {{{"match",
           {{"method", "GET"},
            {"path_contains", "/tree/" + model_sha(kRepo) + "/" + kCompiler + "/MODULE_"}}},
          {"count", -1},
          {"action", "status"},
          {"status", 500}}}));
  };
  fail_listings();
  ToolResult run;
  json report = ci_report(manifest, "STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=graph", cache, run);
  ASSERT_EQ(run.code, 0) << run.all();
  EXPECT_TRUE(report["configurations"][0]["compile"]["not_recorded"].is_string()) << report;
  EXPECT_TRUE(contains(run.err, "nothing was recorded for it")) << run.err;
  EXPECT_EQ(module_folders(cache), std::set<std::string>{}) << "no partial folder";
  fail_listings();
  ToolResult strict = tool("ci --strict " + quoted(manifest) + " --output-dir " +
                               quoted(work / "out") + " --report " + quoted(work / "strict.json"),
                           "STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=graph", work / "cache-strict");
  EXPECT_EQ(strict.code, 1) << strict.all();
  json row = json::parse(read_file(work / "strict.json"))["configurations"][0];
  EXPECT_EQ(row["outcome"], "compile FAILED") << row;
  EXPECT_TRUE(contains(row["compile"]["error"], "an error under --strict")) << row;
  EXPECT_TRUE(contains(row["compile"]["error"], "could not be installed from")) << row;
  EXPECT_EQ(module_folders(work / "cache-strict"), std::set<std::string>{});
}

// Issue 24 (2): a proxy that links nothing at all, on a configuration the registry check did not
// list: the outcome does not depend on that heuristic.
TEST_F(OptimumRepoTest, AProxyThatLinksNothingIsReusedWhetherOrNotTheRegistryListsIt) {
  Conf bs1{"llama-bs1", 1, 128};
  // The registry entry went under another optimum-neuron version: plan cannot see it, while the
  // NEFFs (keyed on the graphs alone) are in the repo.
  seed_like_optimum({bs1}, "text-generation", kRepo, "STAND_IN_OPTIMUM_VERSION=0.4.4");
  ManifestSpec spec;
  spec.confs = {bs1};
  fs::path manifest = write_manifest(spec);
  ToolResult run;
  json report = ci_report(manifest, "STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=0", cache, run);
  ASSERT_EQ(run.code, 0) << run.all();
  EXPECT_EQ(schema_problems(report), std::vector<std::string>{});
  const json& row = report["configurations"][0];
  EXPECT_EQ(row["status"], "compile") << "the registry did not list it: " << row;
  EXPECT_EQ(row["outcome"], "reused from the Hub through optimum-neuron") << row;
  EXPECT_EQ(report["totals"]["failed"], 0);
  ASSERT_TRUE(row["compile"]["not_recorded"].is_string()) << row;
  std::string why = row["compile"]["not_recorded"];
  EXPECT_TRUE(contains(why, "optimum-neuron's hub proxy (reading " + std::string(kRepo) + ")"))
      << why;
  EXPECT_TRUE(contains(why, "which graphs it used is unknown")) << why;
  EXPECT_TRUE(contains(run.err,
                       "warning: llama-bs1 was reused from the Hub through "
                       "optimum-neuron, but nothing was recorded for it"))
      << run.err;
  EXPECT_EQ(json::parse(read_file(call_log))["hub_hits"].size(), 2u);
  EXPECT_TRUE(hub_index().is_null());
}

TEST_F(OptimumRepoTest, WithoutAHubCacheACommandThatCachesNothingStillFails) {
  // A shared-folder store gives the command no Hub cache; the user's own optimum-neuron setting
  // (the saved custom cache repo) still makes it load every NEFF from the Hub, linking nothing.
  // Nothing is ever cached for it, so the run says so and fails.
  Conf bs1{"llama-bs1", 1, 128};
  seed_like_optimum({bs1});
  write_file(home / "optimum_neuron_custom_cache", kRepo);
  fs::path folder = work / "shared-store";
  fs::create_directories(folder);
  ManifestSpec spec;
  spec.confs = {bs1};
  spec.cache_repo = "file://" + folder.string();
  fs::path manifest = write_manifest(spec);
  ToolResult run;
  json report = ci_report(manifest, "STAND_IN_PROXY=1 STAND_IN_PROXY_LINKS=0", cache, run);
  EXPECT_EQ(run.code, 1) << run.all();
  EXPECT_EQ(json::parse(read_file(call_log))["hub_hits"].size(), 2u) << "the proxy was used";
  ASSERT_FALSE(report.is_null()) << run.all();
  const json& row = report["configurations"][0];
  EXPECT_EQ(row["outcome"], "compile FAILED") << row;
  EXPECT_TRUE(contains(row["compile"]["error"], "neither produced nor used a MODULE_ folder"))
      << row;
  EXPECT_TRUE(contains(row["compile"]["error"], "--no_cache")) << "what to check";
}

}  // namespace
}  // namespace neuron_cache
