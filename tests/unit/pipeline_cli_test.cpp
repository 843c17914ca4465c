// The main job as a user runs it: `neuron-cache plan|prefetch|compile|push|ci|run` against the
// local Hub server, with tests/tools/stand-in-export in place of `optimum-cli export neuron` and
// neuronx-cc. Facts come from the Hub (index file, tree listing, access log), the local cache on
// disk and the stand-in's call log, never from the exit code alone.

#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

TEST_F(PipelineCliTest, FirstCiCompilesAndPushesSecondRunOnEmptyCacheFetchesEverything) {
  ManifestSpec spec;
  spec.confs = {
      {"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}, {"qwen-bs1", 1, 256, 2, "bf16", kQwen}};
  const size_t n = spec.confs.size();
  fs::path manifest = write_manifest(spec);
  json plan = plan_json(manifest);
  ASSERT_FALSE(plan.is_null());
  for (const auto& row : plan["configurations"]) EXPECT_EQ(row["status"], "compile") << row;
  std::map<std::string, std::string> keys = keys_of(plan);
  ASSERT_EQ(keys.size(), n);

  // Machine 1: empty cache, empty Hub repo.
  ToolResult first =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out1") + " --report " +
           quoted(work / "report1.json") + " --summary " + quoted(work / "summary1.md"));
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_EQ(calls(), n) << "the compiler ran once per configuration";
  json report1 = json::parse(read_file(work / "report1.json"));
  EXPECT_EQ(report1["totals"]["compiled"], n) << report1.dump(2);
  auto schema_document = [] {
    return json::parse(read_file(fs::path(NEURON_CACHE_TESTS_DIR).parent_path() /
                                 "core/neuron_cache/report/report.schema.json"));
  };
  testing::SchemaCheck schema(schema_document());
  EXPECT_EQ(schema.problems(plan), std::vector<std::string>{}) << plan.dump(1);
  EXPECT_EQ(schema.problems(report1), std::vector<std::string>{}) << report1.dump(1);
  // A newer report of the same format may add keys: a reader of this schema takes it.
  json newer = report1;
  newer["a_key_of_a_later_release"] = 1;
  newer["totals"]["another_one"] = "x";
  EXPECT_FALSE(schema.problems(newer).empty()) << "the tool documents every key it writes";
  testing::SchemaCheck reader(schema_document(), false);
  EXPECT_EQ(reader.problems(newer), std::vector<std::string>{});
  EXPECT_EQ(report1["totals"]["failed"], 0);
  EXPECT_EQ(report1["push"]["pushed"].size(), n);
  std::string summary = read_file(work / "summary1.md");
  for (const auto& [name, key] : keys) {
    EXPECT_TRUE(contains(summary, "| " + name + " | ")) << summary;
    EXPECT_TRUE(contains(summary, "`" + key.substr(0, 12) + "`")) << summary;
  }
  EXPECT_TRUE(contains(summary, "| compiled |")) << summary;

  json index = hub_index();
  ASSERT_FALSE(index.is_null()) << "no " << kIndexPath << " on the Hub";
  std::set<std::string> index_keys, plan_keys;
  for (const auto& [key, entry] : index["entries"].items()) index_keys.insert(key);
  for (const auto& [name, key] : keys) plan_keys.insert(key);
  EXPECT_EQ(index_keys, plan_keys);
  std::set<std::string> files = hub_files();
  for (const auto& [key, entry] : index["entries"].items()) {
    EXPECT_EQ(keys[entry["configuration"].get<std::string>()], key);
    ASSERT_FALSE(entry["modules"].empty()) << entry;
    for (const auto& module : entry["modules"]) {
      std::set<std::string> listed;
      for (const auto& file : module["files"]) {
        listed.insert(file["name"].get<std::string>());
        std::string path = kCompiler + "/" + module["name"].get<std::string>() + "/" +
                           file["name"].get<std::string>();
        EXPECT_TRUE(files.count(path)) << path << " is listed in the index but not on the Hub";
      }
      EXPECT_TRUE(listed.count("model.neff") && listed.count("model.done")) << module;
    }
    for (const auto& file : entry["registry"])
      EXPECT_TRUE(files.count(kCompiler + "/" + file["name"].get<std::string>())) << file;
  }

  // Machine 2: a new empty cache; the Hub has everything.
  fs::path cache2 = work / "cache2";
  ToolResult second = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2") +
                               " --report " + quoted(work / "report2.json"),
                           "", cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_EQ(calls(), n) << "nothing was compiled on the second machine";
  json report2 = json::parse(read_file(work / "report2.json"));
  EXPECT_EQ(report2["totals"]["hub_hits"], n) << report2.dump(2);
  EXPECT_EQ(schema.problems(report2), std::vector<std::string>{}) << report2.dump(1);
  json unknown = report2;
  unknown["format_version"] = 3;
  unknown["surprise"] = true;
  EXPECT_FALSE(schema.problems(unknown).empty()) << "the checker must see a wrong report";
  EXPECT_EQ(report2["totals"]["compiled"], 0);
  for (const auto& [key, entry] : index["entries"].items()) {
    for (const auto& module : entry["modules"])
      EXPECT_TRUE(module_complete(cache2, module)) << module["name"] << " is not complete";
    EXPECT_FALSE(local_entry(cache2, key).is_null()) << "no local index entry for " << key;
  }

  // Machine 2 again: nothing to download, nothing to push.
  server.clear_log();
  ToolResult third = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2") +
                              " --report " + quoted(work / "report3.json"),
                          "", cache2);
  ASSERT_EQ(third.code, 0) << third.all();
  json log = server.access_log();
  EXPECT_EQ(count(log, is_module_download), 0u) << log.dump(1);
  EXPECT_EQ(count(log, is_commit), 0u);
  EXPECT_EQ(count(log, is_write), 0u);
  EXPECT_EQ(calls(), n);
  EXPECT_EQ(json::parse(read_file(work / "report3.json"))["totals"]["local"], n);
}

// A gate for runners that must never compile: the plan is printed (text or JSON) and exit 3 names
// what would compile; once the store holds everything, a fresh runner passes it.
TEST_F(PipelineCliTest, PlanFailOnMissIsAGateForRunnersThatMustNotCompile) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult gate = tool("plan --fail-on-miss " + quoted(manifest));
  EXPECT_EQ(gate.code, 3) << gate.all();
  EXPECT_TRUE(contains(gate.out, "llama-bs2")) << "the plan is printed first: " << gate.out;
  EXPECT_TRUE(contains(gate.err,
                       "--fail-on-miss: 2 of 2 configurations are not cached and would "
                       "run the compile command: llama-bs1, llama-bs2"))
      << gate.err;
  // --quiet: the gate's status and its one error line, no plan.
  ToolResult quiet = tool("plan --quiet --fail-on-miss " + quoted(manifest));
  EXPECT_EQ(quiet.code, 3) << quiet.all();
  EXPECT_EQ(quiet.out, "") << quiet.all();
  EXPECT_TRUE(contains(quiet.err, "--fail-on-miss: 2 of 2 configurations")) << quiet.all();
  ToolResult as_json = tool("plan --json --fail-on-miss " + quoted(manifest));
  EXPECT_EQ(as_json.code, 3);
  EXPECT_EQ(json::parse(as_json.out)["configurations"].size(), 2u);
  EXPECT_EQ(calls(), 0u);

  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  fs::path fresh = work / "fresh-runner-cache";
  ToolResult passes = tool("plan --fail-on-miss " + quoted(manifest), "", fresh);
  EXPECT_EQ(passes.code, 0) << passes.all();
}

// Cumulative statistics per cache root and store, like sccache --show-stats: runs add up, status
// shows them (text and JSON), --zero-stats starts again; a plan alone is not a use.
TEST_F(PipelineCliTest, StatisticsAddUpAcrossRunsAndStartAgainWithZeroStats) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  fs::path manifest = write_manifest(spec);
  fs::path a = work / "cache-a", b = work / "cache-b";
  auto stats_of = [&](const fs::path& cache) {
    ToolResult status = tool("status --json", "", cache);
    EXPECT_EQ(status.code, 0) << status.all();
    return json::parse(status.out)["stats"];
  };
  EXPECT_TRUE(contains(tool("status", "", a).out, "Statistics: none yet"));
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "o1"), "", a).code, 0);
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "o2"), "", a).code, 0);
  ASSERT_EQ(tool("plan " + quoted(manifest), "", a).code, 0);
  json s = stats_of(a)["stores"][kRepo];
  EXPECT_EQ(s["runs"], 2) << s;
  EXPECT_EQ(s["misses"], 2) << s;
  EXPECT_EQ(s["compiled"], 2) << s;
  EXPECT_EQ(s["local_hits"], 2) << s;
  EXPECT_EQ(s["store_hits"], 0) << s;
  EXPECT_GT(s["bytes_uploaded"].get<uint64_t>(), 0u) << s;

  ASSERT_EQ(tool("prefetch " + quoted(manifest), "", b).code, 0);
  json fetched = stats_of(b)["stores"][kRepo];
  EXPECT_EQ(fetched["store_hits"], 2) << fetched;
  // The artifacts come back; the upload also carried the index shard.
  EXPECT_GT(fetched["bytes_downloaded"].get<uint64_t>(), 0u) << fetched;
  EXPECT_LE(fetched["bytes_downloaded"], s["bytes_uploaded"]) << fetched;
  EXPECT_GT(fetched["compile_seconds_saved"].get<double>(), 0) << fetched;
  ToolResult text = tool("status", "", b);
  EXPECT_TRUE(contains(text.out, "Statistics since ")) << text.out;
  EXPECT_TRUE(contains(text.out, std::string(kRepo) + ": 1 run, 2 hits (0 local, 2 fetched), 0 "
                                                      "misses (0 compiled, 0 failed)"))
      << text.out;

  ToolResult zero = tool("status --zero-stats --json", "", a);
  ASSERT_EQ(zero.code, 0) << zero.all();
  EXPECT_TRUE(json::parse(zero.out)["stats"]["stores"].empty()) << zero.out;
}

TEST_F(PipelineCliTest, PlanRequestsDoNotGrowWithConfigurations) {
  ManifestSpec pinned;
  pinned.revisions[kLlama] = model_sha(kLlama);
  pinned.model_types[kLlama] = "llama";
  auto grid = [](ManifestSpec spec, int seq_steps) {
    for (int k = 1; k <= seq_steps; ++k) {
      for (int b = 1; b <= 10; ++b) {
        spec.confs.push_back(
            {"bs" + std::to_string(b) + "-seq" + std::to_string(128 * k), b, 128 * k});
      }
    }
    return spec;
  };
  // Seed the Hub with two of them, so the index exists.
  ManifestSpec seed = pinned;
  seed.confs = {{"bs1-seq128", 1, 128}, {"bs2-seq128", 2, 128}};
  ToolResult seeded = tool("ci " + quoted(write_manifest(seed, "seed.yaml")) + " --output-dir " +
                           quoted(work / "out"));
  ASSERT_EQ(seeded.code, 0) << seeded.all();
  ASSERT_FALSE(hub_index().is_null());

  for (bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "pinned revision and model_type" : "unpinned");
    ManifestSpec base = pin ? pinned : ManifestSpec{};
    fs::path ten = write_manifest(grid(base, 1), "ten.yaml");
    fs::path thousand = write_manifest(grid(base, 100), "thousand.yaml");
    // Not the seeding cache (hits are on the Hub only), and one each: a cache keeps a copy of
    // the Hub's index file, checked below.
    fs::path fresh10 = work / (pin ? "fresh-10-pinned" : "fresh-10");
    fs::path fresh1000 = work / (pin ? "fresh-1000-pinned" : "fresh-1000");
    server.clear_log();
    json plan10 = plan_json(ten, "", fresh10);
    size_t requests10 = server.access_log().size();
    server.clear_log();
    json plan1000 = plan_json(thousand, "", fresh1000);
    json log1000 = server.access_log();
    size_t requests1000 = log1000.size();
    // Each regular file read (an index file, config.json) also costs the Hub's same-host redirect
    // to its commit's /api/resolve-cache/ URL.
    size_t redirects1000 = count(log1000, [](const json& e) { return e["status"] == 307; });
    // Again in the same cache: the repo did not change, so neither the paths-info answer nor
    // the index files are asked again, nor the model's config.json: only the revisions, and
    // the listing of compiler versions the misses' explanations look through.
    server.clear_log();
    json again = plan_json(thousand, "", fresh1000);
    json again_log = server.access_log();
    EXPECT_EQ(again_log.size(), pin ? 2u : 3u) << again_log.dump(1);
    EXPECT_EQ(testing::count_requests(again_log,
                                      [](const json& e) {
                                        return contains(e.value("path", ""), "/paths-info/") ||
                                               contains(e.value("path", ""), "config.json");
                                      }),
              0u);
    EXPECT_EQ(testing::count_requests(again_log,
                                      [](const json& e) {
                                        return contains(e.value("path", ""),
                                                        "neuron-cache-index/neuronxcc");
                                      }),
              0u);
    EXPECT_EQ(again["hub"], 2);
    ASSERT_FALSE(plan10.is_null());
    ASSERT_FALSE(plan1000.is_null());
    EXPECT_EQ(requests10, requests1000) << "requests must not grow with configurations";
    EXPECT_GE(requests10, 2u) << "the Hub index was read";
    // The misses add optimum-neuron's registry: the repo root and one listing of 0_REGISTRY,
    // and, when the manifest gives the model type, the model's config.json for its
    // architecture digest (read anyway for the model type otherwise).
    EXPECT_LE(requests1000 - redirects1000, pin ? 9u : 10u);
    EXPECT_EQ(plan1000["hub_requests"], requests1000) << "the tool counts what the server saw";
    ASSERT_EQ(plan10["configurations"].size(), 10u);
    ASSERT_EQ(plan1000["configurations"].size(), 1000u);
    for (const json* plan : {&plan10, &plan1000}) {
      EXPECT_EQ((*plan)["hub"], 2);
      for (const auto& row : (*plan)["configurations"]) {
        std::string name = row["name"];
        bool seeded_row = name == "bs1-seq128" || name == "bs2-seq128";
        EXPECT_EQ(row["status"], seeded_row ? "store" : "compile") << name;
      }
    }
  }
}

TEST_F(PipelineCliTest, MissExplainsNearestCachedConfiguration) {
  ManifestSpec cached;
  cached.confs = {{"long4k", 1, 4096}};
  fs::path manifest4k = write_manifest(cached, "long4k.yaml");
  ToolResult ci = tool("ci " + quoted(manifest4k) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  fs::path fresh = work / "fresh-cache";

  ManifestSpec longer;
  longer.confs = {{"long8k", 1, 8192}};
  fs::path manifest8k = write_manifest(longer, "long8k.yaml");
  ToolResult text = tool("plan " + quoted(manifest8k), "", fresh);
  ASSERT_EQ(text.code, 0) << text.all();
  EXPECT_TRUE(contains(text.out, "compile ")) << text.out;
  EXPECT_TRUE(contains(text.out,
                       "nearest: long4k, cached for sequence length 4096; you asked "
                       "for 8192"))
      << text.out;
  json plan = plan_json(manifest8k, "", fresh);
  ASSERT_FALSE(plan.is_null());
  const json& row = plan["configurations"][0];
  EXPECT_EQ(row["status"], "compile");
  ASSERT_FALSE(row["nearest"].empty()) << row;
  EXPECT_EQ(row["nearest"][0]["configuration"], "long4k");
  EXPECT_EQ(
      row["nearest"][0]["differences"],
      json::parse(R"([{"field": "sequence length", "cached": "4096", "requested": "8192"}])"));

  // Another compiler, on the command line and in the manifest.
  const std::string other = "2.22.5000.0+abcdef12";
  ToolResult flag = tool("--compiler-version " + other + " plan " + quoted(manifest4k), "", fresh);
  ASSERT_EQ(flag.code, 0) << flag.all();
  EXPECT_TRUE(contains(flag.out,
                       "cached for compiler " + std::string(kVersion) + "; you asked for " + other))
      << flag.out;
  ManifestSpec newer = cached;
  newer.compiler_version = other;
  json plan_other = plan_json(write_manifest(newer, "newer.yaml"), "", fresh);
  ASSERT_FALSE(plan_other.is_null());
  const json& other_row = plan_other["configurations"][0];
  EXPECT_EQ(other_row["status"], "compile");
  ASSERT_FALSE(other_row["nearest"].empty()) << other_row;
  EXPECT_EQ(other_row["nearest"][0]["differences"],
            json::parse(R"([{"field": "compiler", "cached": ")" + std::string(kVersion) +
                        R"(", "requested": ")" + other + R"("}])"));
}

TEST_F(PipelineCliTest, FailedCompileIsNeverPushedAsSuccess) {
  ManifestSpec spec;
  Conf good{"good", 1, 128};
  Conf bad{"bad", 1, 256};
  spec.confs = {good, bad};
  fs::path manifest = write_manifest(spec);
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  ASSERT_EQ(keys.size(), 2u);

  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                       "STAND_IN_FAIL=sequence_length=256");
  EXPECT_EQ(ci.code, 1) << ci.all();
  EXPECT_EQ(calls(), 2u);
  EXPECT_TRUE(contains(ci.err, "compile of bad failed")) << ci.all();
  EXPECT_TRUE(contains(ci.err, "ERROR: compilation failed for " + context_module(bad)))
      << "the tail of the compiler's log is shown: " << ci.all();
  EXPECT_TRUE(contains(ci.err, "1 of 2 compiles failed")) << ci.all();

  json index = hub_index();
  ASSERT_FALSE(index.is_null()) << "the good configuration is pushed";
  EXPECT_TRUE(index["entries"].contains(keys["good"]));
  EXPECT_FALSE(index["entries"].contains(keys["bad"]));
  std::set<std::string> files = hub_files();
  for (const auto& path : files) {
    EXPECT_FALSE(path.ends_with("model.log")) << path;
    EXPECT_FALSE(contains(path, context_module(bad))) << path;
  }
  EXPECT_TRUE(files.count(kCompiler + "/" + context_module(good) + "/model.neff"));

  fs::path failed_dir = cache / kCompiler / context_module(bad);
  EXPECT_FALSE(fs::exists(failed_dir / "model.done")) << "the failure is not SUCCESS locally";
  EXPECT_FALSE(fs::exists(failed_dir / "model.neff"));
  EXPECT_TRUE(local_entry(cache, keys["bad"]).is_null());
  EXPECT_FALSE(local_entry(cache, keys["good"]).is_null());

  server.clear_log();
  ToolResult push = tool("push " + quoted(manifest));
  EXPECT_EQ(push.code, 0) << push.all();
  EXPECT_TRUE(contains(push.out, "nothing new to push")) << push.all();
  EXPECT_EQ(count(server.access_log(), is_write), 0u);
  EXPECT_FALSE(hub_index()["entries"].contains(keys["bad"]));
}

TEST_F(PipelineCliTest, TokenTheCompileCommandPrintsIsMaskedEverywhere) {
  ManifestSpec spec;
  Conf good{"good", 1, 128};
  Conf bad{"bad", 1, 256};  // fails: its log tail goes to stderr, report.json and summary.md
  spec.confs = {good, bad};
  fs::path manifest = write_manifest(spec);
  const std::string masked = "hf_****rite";  // config::mask_token(kHubWriteToken)
  const std::string print = "STAND_IN_PRINT_ENV=HF_TOKEN ";
  ToolResult ci =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out") + " --report " +
               quoted(work / "report.json") + " --summary " + quoted(work / "summary.md"),
           print + "STAND_IN_FAIL=sequence_length=256");
  EXPECT_EQ(ci.code, 1) << ci.all();
  EXPECT_FALSE(contains(ci.all(), token)) << ci.all();
  EXPECT_TRUE(contains(ci.err, "HF_TOKEN=" + masked)) << "the log tail is shown: " << ci.all();
  for (const auto& file : {work / "report.json", work / "summary.md", work / "out" / "good.log",
                           work / "out" / "bad.log"}) {
    ASSERT_TRUE(fs::exists(file)) << file;
    std::string text = read_file(file);
    EXPECT_FALSE(contains(text, token)) << file << ":\n" << text;
  }
  EXPECT_TRUE(contains(read_file(work / "out" / "good.log"), "stderr HF_TOKEN=" + masked));
  EXPECT_TRUE(contains(read_file(work / "report.json"), "HF_TOKEN=" + masked));

  // `run` shows the command's output live: masked too, and in its log.
  ToolResult run =
      tool("run --manifest " + quoted(manifest) + " --output-dir " + quoted(work / "out") +
               " --config good -- " + stand_in_command(good, work / "export-good"),
           print);
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_TRUE(contains(run.all(), "HF_TOKEN=" + masked)) << run.all();
  EXPECT_FALSE(contains(run.all(), token)) << run.all();
  EXPECT_FALSE(contains(read_file(work / "out" / "good.run.log"), token));
}

// Not only the Hub token: the AWS secret key and session token, and any variable named like a
// secret, printed by the compile command, are masked in every place the tool writes them.
TEST_F(PipelineCliTest, CredentialsTheCompileCommandPrintsAreMaskedEverywhere) {
  ManifestSpec spec;
  spec.confs = {Conf{"good", 1, 128}, Conf{"bad", 1, 256}};  // bad's log tail is shown
  fs::path manifest = write_manifest(spec);
  const std::map<std::string, std::string> secrets = {
      {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"},
      {"AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBYaDexampleSessionToken0042"},
      {"MY_API_KEY", "sk-live-4242424242424242"},
      {"DB_PASSWORD", "hunter2-but-longer"}};
  std::string env = "STAND_IN_FAIL=sequence_length=256 STAND_IN_PRINT_ENV=";
  for (const auto& [name, value] : secrets) env += name + ",";
  for (const auto& [name, value] : secrets) env += " " + name + "=" + value;
  ToolResult ci =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out") + " --report " +
               quoted(work / "report.json") + " --summary " + quoted(work / "summary.md"),
           env);
  EXPECT_EQ(ci.code, 1) << ci.all();
  EXPECT_TRUE(contains(ci.err, "AWS_SECRET_ACCESS_KEY=aws_secret_****EKEY"))
      << "the tail: " << ci.all();
  std::vector<std::string> texts = {ci.all()};
  for (const auto& file : {work / "report.json", work / "summary.md", work / "out" / "good.log",
                           work / "out" / "bad.log"}) {
    ASSERT_TRUE(fs::exists(file)) << file;
    texts.push_back(read_file(file));
  }
  EXPECT_TRUE(contains(texts[1], "DB_PASSWORD=db_password_****nger"))
      << "report.json: " << texts[1];
  for (const auto& text : texts) {
    for (const auto& [name, value] : secrets) EXPECT_FALSE(contains(text, value)) << text;
  }
}

TEST_F(PipelineCliTest, SameManifestInTwoDirectoriesGivesSameKeys) {
  const std::string rev = "0123456789abcdef0123456789abcdef01234567";
  ManifestSpec base;
  base.revisions = {{kLlama, rev}, {kQwen, rev}};
  base.model_types = {{kLlama, "llama"}, {kQwen, "qwen2"}};
  base.confs = {{"a", 1, 128}, {"b", 2, 128}, {"c", 1, 128, 2, "bf16", kQwen}};
  const std::string offline = "HF_HUB_OFFLINE=1";
  fs::path one = work / "one" / "checkout";
  fs::path two = work / "two" / "somewhere" / "else";
  fs::create_directories(one);
  fs::create_directories(two);
  std::map<std::string, std::string> keys1 = keys_of(
      plan_json(write_manifest(base, "neuron-cache.yaml", one), offline, work / "cache-one"));
  std::map<std::string, std::string> keys2 = keys_of(
      plan_json(write_manifest(base, "neuron-cache.yaml", two), offline, work / "cache-two"));
  ASSERT_EQ(keys1.size(), 3u);
  EXPECT_EQ(keys1, keys2) << "no path enters a key";
  std::set<std::string> distinct;
  for (const auto& [name, key] : keys1) distinct.insert(key);
  EXPECT_EQ(distinct.size(), 3u);

  int variant = 0;
  auto keys_with = [&](const ManifestSpec& spec, const std::string& env = "") {
    fs::path path = write_manifest(spec, "variant-" + std::to_string(variant++) + ".yaml");
    return keys_of(plan_json(path, offline + " " + env));
  };
  // The names whose key differs from the base.
  auto changed = [&](const std::map<std::string, std::string>& keys) {
    std::set<std::string> names;
    for (const auto& [name, key] : keys) {
      if (keys1[name] != key) names.insert(name);
    }
    EXPECT_EQ(keys.size(), 3u);
    return names;
  };
  using Names = std::set<std::string>;
  ManifestSpec precision = base;
  precision.confs[1].precision = "fp16";
  EXPECT_EQ(changed(keys_with(precision)), Names{"b"});
  ManifestSpec batch = base;
  batch.confs[1].batch = 3;
  EXPECT_EQ(changed(keys_with(batch)), Names{"b"});
  ManifestSpec revision = base;
  revision.revisions[kQwen] = "fedcba9876543210fedcba9876543210fedcba98";
  EXPECT_EQ(changed(keys_with(revision)), Names{"c"});
  // Factors every configuration shares change every key.
  ManifestSpec optimum = base;
  optimum.optimum = "0.4.6";
  EXPECT_EQ(changed(keys_with(optimum)), (Names{"a", "b", "c"}));
  EXPECT_EQ(changed(keys_with(base, "NEURON_CC_FLAGS=-O2")), (Names{"a", "b", "c"}));
  // Options of libneuronxla's cache wrapper do not change the NEFFs, nor the keys.
  EXPECT_EQ(changed(keys_with(base, "NEURON_CC_FLAGS=--retry_failed_compilation")), Names{});
  EXPECT_TRUE(server.access_log().empty()) << "offline: no request";
}

TEST_F(PipelineCliTest, ManifestErrorPointsAtLineAndColumn) {
  fs::path manifest = work / "neuron-cache.yaml";
  write_file(manifest,
             "cache_repo: acme/neuron-cache\n"
             "compiler_version: \"2.21.33363.0+82129205\"\n"
             "instance_type: trn1\n"
             "models:\n"
             "  - model_id: meta-llama/Llama-3.2-1B\n"
             "    task: text-generation\n"
             "    bacth_size: 1\n"
             "    configurations:\n"
             "      - {batch_size: 1, sequence_length: 128, num_cores: 2, precision: bf16}\n");
  ToolResult plan = tool("plan " + quoted(manifest));
  EXPECT_EQ(plan.code, 2) << plan.all();
  EXPECT_TRUE(contains(plan.err, manifest.string() + ":7:5: ")) << plan.all();
  EXPECT_TRUE(contains(plan.err, "bacth_size")) << plan.all();
  EXPECT_EQ(calls(), 0u);
}

TEST_F(PipelineCliTest, ReadOnlyTokenPushGetsClearMessage) {
  token = testing::kHubReadToken;  // for everything
  ManifestSpec spec;
  spec.confs = {{"a", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult compile =
      tool("compile " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(compile.code, 0) << compile.all();
  EXPECT_EQ(calls(), 1u);
  EXPECT_TRUE(contains(compile.out, "compiled 1 of 1")) << compile.all();
  size_t commits_before = hub_commits();

  server.clear_log();
  ToolResult push = tool("push " + quoted(manifest));
  EXPECT_EQ(push.code, 0) << "cache problems do not fail by default: " << push.all();
  EXPECT_TRUE(contains(push.out, "push skipped: the token \"alice-read\" is read-only"))
      << push.all();
  EXPECT_TRUE(contains(push.out, "write access")) << push.all();
  std::string all = push.all();
  EXPECT_EQ(all.find("alice-read", all.find("alice-read") + 1), std::string::npos)
      << "one message, not one per refused request: " << all;
  ToolResult strict = tool("push --strict " + quoted(manifest));
  EXPECT_EQ(strict.code, 1) << strict.all();
  EXPECT_TRUE(contains(strict.all(), "is read-only")) << strict.all();
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  EXPECT_EQ(ci.code, 0) << ci.all();
  EXPECT_TRUE(contains(ci.out, "push skipped: the token \"alice-read\" is read-only")) << ci.all();
  json log = server.access_log();
  EXPECT_EQ(count(log, is_write), 0u) << "no preupload, LFS batch or commit: " << log.dump(1);
  EXPECT_EQ(count(log, [](const json& e) { return e["path"] == "/api/whoami-v2"; }), 3u)
      << "the role is asked once per run";
  EXPECT_EQ(hub_commits(), commits_before) << "no commit was made";
  EXPECT_TRUE(hub_index().is_null());
}

TEST_F(PipelineCliTest, ACommitRedirectedToAnotherHostIsReportedAsAFailedPush) {
  ManifestSpec spec;
  spec.confs = {{"a", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult compile =
      tool("compile " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(compile.code, 0) << compile.all();
  // The cdn listener plays another host that answers the commit with a 200.
  server.set_faults(json::array(
      {{{"match", {{"method", "POST"}, {"path_contains", "/commit/"}, {"listener", "hub"}}},
        {"action", "redirect"},
        {"status", 307},
        {"to", "cdn"}},
       {{"match", {{"listener", "cdn"}, {"path_contains", "/commit/"}}},
        {"action", "status"},
        {"status", 200},
        {"body", {{"success", true}}}}}));
  server.clear_log();
  ToolResult push = tool("push " + quoted(manifest));
  EXPECT_EQ(push.code, 0) << "cache problems do not fail by default: " << push.all();
  EXPECT_TRUE(contains(push.all(), "push failed")) << push.all();
  EXPECT_TRUE(contains(push.all(), "another host")) << push.all();
  EXPECT_FALSE(contains(push.all(), "in commit ")) << push.all();
  EXPECT_FALSE(contains(push.all(), token)) << push.all();
  json log = server.access_log();
  EXPECT_EQ(count(log, [](const json& e) { return e["listener"] == "cdn" && is_commit(e); }), 0u)
      << "neither the commit body nor the token reached the other host: " << log.dump(1);
  EXPECT_TRUE(hub_index().is_null()) << "nothing was committed";
}

TEST_F(PipelineCliTest, HubDownFallsBackToCompiling) {
  {
    HubServer stopped(hub_config());
    endpoint = stopped.url();
  }  // stopped: nothing listens on its port now
  ManifestSpec spec;
  spec.revisions[kLlama] = "0123456789abcdef0123456789abcdef01234567";
  spec.model_types[kLlama] = "llama";
  spec.confs = {{"a", 1, 128}, {"b", 2, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  EXPECT_EQ(ci.code, 0) << ci.all();
  // Said once, with what to check; the summary and the push line refer to it.
  EXPECT_TRUE(contains(ci.err,
                       "could not be reached (Couldn't connect to server): nothing more "
                       "is asked of it in this run"))
      << ci.all();
  EXPECT_TRUE(contains(ci.out, "the Hub cache could not be read: " + endpoint +
                                   " could not be reached (see the warning above)"))
      << ci.all();
  EXPECT_EQ(calls(), 2u) << "everything is compiled";
  EXPECT_TRUE(contains(ci.out, "compiled 2 of 2")) << ci.all();
  // Decided once: the push is skipped with one message, no request is tried.
  EXPECT_TRUE(contains(ci.out, "push skipped: " + endpoint + " could not be reached")) << ci.all();

  fs::remove(call_log);
  ToolResult strict =
      tool("ci --strict " + quoted(manifest) + " --output-dir " + quoted(work / "out2"), "",
           work / "cache-strict");
  EXPECT_EQ(strict.code, 1) << strict.all();
  EXPECT_TRUE(contains(strict.err, "the Hub cache could not be read")) << strict.all();
  EXPECT_TRUE(contains(strict.err, "(an error under --strict; without it: ")) << strict.all();
  EXPECT_EQ(calls(), 0u) << "--strict compiles nothing";
}

TEST_F(PipelineCliTest, ReadOnlyFlagNeverWrites) {
  ManifestSpec spec;
  spec.confs = {{"a", 1, 128}, {"b", 2, 128}};
  fs::path manifest = write_manifest(spec);
  server.clear_log();
  ToolResult ci = tool("ci --read-only " + quoted(manifest) + " --output-dir " +
                       quoted(work / "out") + " --report " + quoted(work / "report.json"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  EXPECT_EQ(calls(), 2u);
  json log = server.access_log();
  EXPECT_GT(log.size(), 0u) << "the Hub was read";
  EXPECT_EQ(count(log, is_write), 0u) << log.dump(1);
  json report = json::parse(read_file(work / "report.json"));
  EXPECT_EQ(report["totals"]["compiled"], 2);
  EXPECT_EQ(report["push"]["attempted"], false);
  EXPECT_TRUE(contains(report["push"]["skipped_reason"].get<std::string>(), "--read-only"));
  EXPECT_TRUE(hub_index().is_null());
}

// docs/formats.md: folders 0755 and files 0644 whatever the umask. Under
// umask 000 the cache root used to be 0777 (then refused as world-writable) and the cached Hub
// index files 0666.
TEST_F(PipelineCliTest, CreatedFoldersAndFilesIgnoreAPermissiveUmask) {
  ManifestSpec spec;
  spec.confs = {{"a", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();

  wrapper = "sh -c 'umask 000 && exec \"$0\" \"$@\"'";
  fs::path fresh = work / "umask" / "cache";
  fs::path fresh_home = work / "umask" / "hf-home";
  std::string home_env = "HF_HOME=" + quoted(fresh_home);
  ToolResult plan = tool("plan " + quoted(manifest), home_env, fresh);
  ASSERT_EQ(plan.code, 0) << plan.all();
  ToolResult prefetch = tool("ci --read-only " + quoted(manifest) + " --output-dir " +
                                 quoted(work / "umask" / "out") + " --report " +
                                 quoted(work / "umask" / "report.json") + " --export-dir " +
                                 quoted(work / "umask" / "export"),
                             home_env, fresh);
  ASSERT_EQ(prefetch.code, 0) << prefetch.all();
  EXPECT_TRUE(fs::exists(work / "umask" / "export" / "a")) << prefetch.all();
  ToolResult set = tool(std::string("set ") + kRepo, home_env, fresh);
  ASSERT_EQ(set.code, 0) << set.all();

  size_t folders = 0, files = 0;
  for (auto it = fs::recursive_directory_iterator(work / "umask");
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_symlink()) continue;
    auto mode = static_cast<unsigned>(it->symlink_status().permissions() & fs::perms::mask);
    if (it->is_directory()) {
      ++folders;
      EXPECT_EQ(mode, 0755u) << it->path();
    } else {
      ++files;
      EXPECT_EQ(mode, 0644u) << it->path();
    }
  }
  EXPECT_GT(folders, 3u);
  EXPECT_GT(files, 3u);
  EXPECT_TRUE(fs::exists(fresh_home / "optimum_neuron_custom_cache"));
}

TEST_F(PipelineCliTest, PrefetchSkipsCompleteAndVerifies) {
  ManifestSpec spec;  // distinct batch sizes: no module is shared
  spec.confs = {{"a", 1, 128}, {"b", 2, 128}, {"c", 4, 128}};
  fs::path manifest = write_manifest(spec);
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  json index = hub_index();
  ASSERT_FALSE(index.is_null());
  const json& entry_b = index["entries"][keys["b"]];
  const std::string corrupted = context_module(spec.confs[1]);
  std::string neff_sha;
  for (const auto& module : entry_b["modules"]) {
    if (module["name"] != corrupted) continue;
    for (const auto& file : module["files"]) {
      if (file["name"] == "model.neff") neff_sha = file["sha256"];
    }
  }
  ASSERT_FALSE(neff_sha.empty()) << entry_b;

  // model.neff is an LFS file: its bytes come from the CDN, under its sha256.
  server.set_faults(json::array({{{"match", {{"listener", "cdn"}, {"path_contains", neff_sha}}},
                                  {"count", -1},
                                  {"action", "corrupt"},
                                  {"offset", 100}}}));
  fs::path fresh = work / "fresh-cache";
  ToolResult first = tool("prefetch " + quoted(manifest), "", fresh);
  EXPECT_EQ(first.code, 0) << first.all();
  EXPECT_TRUE(contains(first.err, "could not fetch b")) << first.all();
  EXPECT_TRUE(contains(first.out, "prefetched 2 configurations")) << first.all();
  EXPECT_GT(count(server.access_log(), [](const json& e) { return !e["fault"].is_null(); }), 0u)
      << "the fault was applied";
  fs::path bad_dir = fresh / kCompiler / corrupted;
  EXPECT_FALSE(fs::exists(bad_dir / "model.done")) << "a corrupted NEFF is never SUCCESS";
  EXPECT_FALSE(fs::exists(bad_dir / "model.neff"));
  EXPECT_TRUE(local_entry(fresh, keys["b"]).is_null());
  EXPECT_TRUE(contains(first.out, "1 configuration on the Hub was NOT installed:\n  b: "))
      << first.all();
  EXPECT_TRUE(contains(first.out, "does not match its checksum")) << first.all();
  // Each try of the corrupted NEFF moved its bytes: the count says so.
  const uint64_t neff_bytes = 65536;
  fs::path json_cache = work / "json-cache";
  ToolResult as_json = tool("prefetch --json " + quoted(manifest), "", json_cache);
  EXPECT_EQ(as_json.code, 0) << as_json.all();
  json report = json::parse(as_json.out);
  EXPECT_EQ(report["totals"]["not_installed"], 1) << report.dump(1);
  EXPECT_GE(report["totals"]["bytes_downloaded"].get<uint64_t>(), 3 * neff_bytes + 2 * neff_bytes);
  for (const auto& row : report["configurations"]) {
    bool is_b = row["name"] == "b";
    EXPECT_EQ(row["prefetch"]["installed"], !is_b) << row.dump();
    EXPECT_EQ(row["outcome"], is_b ? "NOT installed from the Hub" : "fetched from the Hub");
    if (is_b) {
      EXPECT_TRUE(contains(row["prefetch"]["error"].get<std::string>(), "checksum"));
    }
  }
  ToolResult strict = tool("prefetch --strict " + quoted(manifest), "", work / "strict-cache");
  EXPECT_EQ(strict.code, 1) << strict.all();
  EXPECT_TRUE(contains(strict.err, "--strict")) << strict.all();
  for (const std::string name : {"a", "c"}) {
    for (const auto& module : index["entries"][keys[name]]["modules"])
      EXPECT_TRUE(module_complete(fresh, module)) << name << ": " << module["name"];
    EXPECT_FALSE(local_entry(fresh, keys[name]).is_null());
  }

  server.clear_faults();
  server.clear_log();
  ToolResult second = tool("prefetch " + quoted(manifest), "", fresh);
  EXPECT_EQ(second.code, 0) << second.all();
  EXPECT_TRUE(contains(second.out, "prefetched 1 configuration")) << second.all();
  for (const auto& module : entry_b["modules"])
    EXPECT_TRUE(module_complete(fresh, module)) << module["name"];
  EXPECT_FALSE(local_entry(fresh, keys["b"]).is_null());
  json log = server.access_log();
  EXPECT_GT(count(log, is_module_download), 0u);
  EXPECT_EQ(count(log,
                  [&](const json& e) {
                    // Paths in the log are percent-encoded: '+' is %2B.
                    return is_module_download(e) &&
                           !contains(e["path"].get<std::string>(),
                                     corrupted.substr(0, corrupted.find('+')));
                  }),
            0u)
      << "complete folders are not downloaded again: " << log.dump(1);
  EXPECT_EQ(calls(), 3u) << "prefetch never compiles";
}

// Real NEFF sizes, above every threshold of the transfer paths: LFS (10 MiB), multipart upload
// (64 MiB, in 16 MiB parts), ranged parallel download (64 MiB parts). Random bytes, so a part
// hashed twice, skipped or misplaced cannot go unnoticed; compared with cmp, not our hashing.
TEST_F(PipelineCliTest, GiBFilesMoveByteForByteThroughPushAndPrefetch) {
  constexpr uint64_t kContextNeff = 1ull << 30;
  constexpr uint64_t kTokenNeff = 200ull << 20;
  ManifestSpec spec;
  spec.confs = {{"big", 1, 4096}};
  fs::path manifest = write_manifest(spec);
  const std::string sizes = "STAND_IN_NEFF_BYTES=" + std::to_string(kContextNeff) +
                            " STAND_IN_TKG_NEFF_BYTES=" + std::to_string(kTokenNeff);
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), sizes);
  ASSERT_EQ(ci.code, 0) << ci.all();
  json log = server.access_log();
  EXPECT_GE(
      count(log, [](const json& e) { return e["method"] == "PUT" && e["listener"] == "cdn"; }),
      (kContextNeff + kTokenNeff) / (16u << 20))
      << "both NEFFs go up in multipart parts";

  // One part of one NEFF arrives corrupted: that NEFF is fetched again, nothing fails.
  server.clear_log();
  server.set_faults(json::array({{{"match", {{"listener", "cdn"}, {"method", "GET"}}},
                                  {"count", 1},
                                  {"action", "corrupt"},
                                  {"offset", 4096}}}));
  fs::path fresh = work / "fresh-cache";
  ToolResult prefetch = tool("prefetch --json " + quoted(manifest), "", fresh);
  ASSERT_EQ(prefetch.code, 0) << prefetch.all();
  json report = json::parse(prefetch.out);
  EXPECT_EQ(report["configurations"][0]["prefetch"]["installed"], true) << report.dump(1);
  EXPECT_EQ(report["totals"]["not_installed"], 0);
  EXPECT_GT(report["totals"]["bytes_downloaded"].get<uint64_t>(), kContextNeff + kTokenNeff)
      << "every byte that moved is counted, the refetch included";
  log = server.access_log();
  EXPECT_GE(
      count(log, [](const json& e) { return e["listener"] == "cdn" && e["range"].is_string(); }),
      16u + 4u)
      << "64 MiB parts";
  EXPECT_EQ(count(log, [](const json& e) { return !e["fault"].is_null(); }), 1u);
  EXPECT_GE(
      count(log, [](const json& e) { return e["listener"] == "cdn" && e["range"].is_null(); }), 1u)
      << "the NEFF whose part was corrupted is fetched again whole";

  json entry = hub_index()["entries"].begin().value();
  size_t compared = 0;
  for (const auto& module : entry["modules"]) {
    EXPECT_TRUE(module_complete(fresh, module)) << module["name"];
    for (const auto& file : module["files"]) {
      fs::path relative =
          fs::path(kCompiler) / module["name"].get<std::string>() / file["name"].get<std::string>();
      std::string output;
      EXPECT_EQ(testing::run_command(
                    "cmp " + quoted(cache / relative) + " " + quoted(fresh / relative), &output),
                0)
          << relative << ": " << output;
      ++compared;
    }
  }
  EXPECT_GE(compared, 8u);
}

// Two configurations that differ only by sequence length share their token graph: one push
// sends its files once, and asks for no LFS verify per object.
TEST_F(PipelineCliTest, OnePushSendsASharedFolderOnce) {
  ManifestSpec spec;
  spec.confs = {{"short", 1, 128}, {"long", 1, 256}};
  fs::path manifest = write_manifest(spec);
  ToolResult compiled = tool("compile " + quoted(manifest));
  ASSERT_EQ(compiled.code, 0) << compiled.all();
  server.clear_log();
  ToolResult pushed = tool("push " + quoted(manifest));
  ASSERT_EQ(pushed.code, 0) << pushed.all();
  json log = server.access_log();
  const std::string shared = token_module(spec.confs[0]);
  ASSERT_EQ(shared, token_module(spec.confs[1]));
  EXPECT_EQ(count(log, [](const json& e) { return is_commit(e) && e["status"] == 200; }), 1u);
  EXPECT_EQ(
      count(log, [](const json& e) { return contains(e["path"].get<std::string>(), "verify"); }),
      0u);
  // Three folders (two context graphs, one shared token graph), each with two LFS files (NEFF,
  // .pb): six objects, each sent once.
  std::set<std::string> objects;
  size_t puts = 0;
  for (const auto& e : log) {
    if (e["method"] != "PUT" || e["listener"] != "cdn") continue;
    objects.insert(e["path"].get<std::string>());
    ++puts;
  }
  EXPECT_EQ(puts, 6u) << log.dump(1);
  EXPECT_EQ(objects.size(), puts);
  json entries = hub_index()["entries"];
  EXPECT_EQ(entries.size(), 2u);
}

TEST_F(PipelineCliTest, RunRecordsAndPushesWhatTheCommandCompiled) {
  ManifestSpec spec;
  Conf declared{"declared", 1, 128};
  spec.confs = {declared};
  fs::path manifest = write_manifest(spec);
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  const std::string common =
      "run --manifest " + quoted(manifest) + " --output-dir " + quoted(work / "out");

  ToolResult with_config = tool(common + " --config declared -- " +
                                stand_in_command(declared, work / "export-declared"));
  ASSERT_EQ(with_config.code, 0) << with_config.all();
  EXPECT_EQ(calls(), 1u);
  EXPECT_TRUE(fs::exists(work / "export-declared" / "neuron_config.json"));
  json index = hub_index();
  ASSERT_FALSE(index.is_null()) << with_config.all();
  ASSERT_TRUE(index["entries"].contains(keys["declared"])) << index.dump(2);
  EXPECT_EQ(module_names(index["entries"][keys["declared"]]),
            (std::set<std::string>{context_module(declared), token_module(declared)}));
  EXPECT_TRUE(hub_files().count(kCompiler + "/" + context_module(declared) + "/model.neff"));

  // A run no configuration declares: its graphs are pushed, without an index entry.
  Conf adhoc{"adhoc", 8, 512};
  ToolResult without = tool(common + " -- " + stand_in_command(adhoc, work / "export-adhoc"));
  ASSERT_EQ(without.code, 0) << without.all();
  EXPECT_EQ(calls(), 2u);
  std::set<std::string> files = hub_files();
  for (const auto& module : {context_module(adhoc), token_module(adhoc)}) {
    EXPECT_TRUE(files.count(kCompiler + "/" + module + "/model.neff")) << module;
    EXPECT_TRUE(files.count(kCompiler + "/" + module + "/model.done")) << module;
  }
  EXPECT_EQ(hub_index()["entries"].size(), 1u) << "no index entry for an undeclared run";

  // A failing command: its status comes back, nothing is pushed.
  Conf failing{"failing", 16, 128};
  server.clear_log();
  ToolResult failed = tool(common + " -- " + stand_in_command(failing, work / "export-failing"),
                           "STAND_IN_FAIL=batch_size=16");
  EXPECT_EQ(failed.code, 70) << failed.all();
  EXPECT_TRUE(contains(failed.all(), "ERROR: compilation failed")) << "output is shown live";
  EXPECT_EQ(count(server.access_log(), is_write), 0u);
  for (const auto& path : hub_files()) EXPECT_FALSE(contains(path, context_module(failing)));
}

TEST_F(PipelineCliTest, CompileJobsInParallel) {
  ManifestSpec spec;
  spec.confs = {{"b1-s128", 1, 128}, {"b1-s256", 1, 256}, {"b2-s128", 2, 128}, {"b2-s256", 2, 256}};
  fs::path manifest = write_manifest(spec);
  ToolResult compile =
      tool("compile --json --jobs 2 " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(compile.code, 0) << compile.all();
  EXPECT_EQ(calls(), 4u);
  json result = json::parse(compile.out);
  EXPECT_EQ(result["totals"]["compiled"], 4);
  std::map<std::string, json> entries;
  for (const auto& row : result["configurations"]) {
    EXPECT_EQ(row["compile"]["ok"], true) << row;
    EXPECT_EQ(
        row["compile"]["modules_produced"].get<int>() + row["compile"]["modules_used"].get<int>(),
        2)
        << row;
    entries[row["name"]] = local_entry(cache, row["key"]);
  }
  for (const auto& c : spec.confs) {
    ASSERT_FALSE(entries[c.name].is_null()) << c.name;
    EXPECT_EQ(module_names(entries[c.name]),
              (std::set<std::string>{context_module(c), token_module(c)}))
        << c.name;
    for (const auto& module : entries[c.name]["modules"])
      EXPECT_TRUE(module_complete(cache, module)) << c.name << ": " << module["name"];
  }
  // Configurations that differ only by sequence length share the token-generation graph.
  EXPECT_EQ(token_module(spec.confs[0]), token_module(spec.confs[1]));
  EXPECT_NE(token_module(spec.confs[0]), token_module(spec.confs[2]));

  // A later compile reuses the cached token graph: it is recorded as used, not compiled again.
  ManifestSpec more = spec;
  Conf longer{"b1-s512", 1, 512};
  more.confs.push_back(longer);
  ToolResult again = tool("compile --json " + quoted(write_manifest(more)) + " --output-dir " +
                          quoted(work / "out"));
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_EQ(calls(), 5u);
  json row = json::parse(again.out)["configurations"][4];
  EXPECT_EQ(row["name"], "b1-s512");
  EXPECT_EQ(row["compile"]["modules_produced"], 1) << row;
  EXPECT_EQ(row["compile"]["modules_used"], 1) << row;
  EXPECT_EQ(module_names(local_entry(cache, row["key"])),
            (std::set<std::string>{context_module(longer), token_module(longer)}));
  std::ifstream log(call_log);
  std::string line, last;
  while (std::getline(log, line)) last = line;
  json call = json::parse(last);
  EXPECT_EQ(call["hits"], json::array({token_module(longer)})) << call;
  EXPECT_EQ(call["compiled"], json::array({context_module(longer)})) << call;
}

// torch-neuronx of the Neuron SDK 2.31 bakes a per-process counter into graph hashes: a compile
// command exporting several configurations in one process records keys no later run finds. The
// compile step says so once, naming them (manifest names where they match), and only then.
TEST_F(PipelineCliTest, ACommandExportingSeveralConfigurationsIsWarnedAboutOnce) {
  const std::string kWarning = "one compile command exported several configurations in one process";
  auto warnings = [&](const json& result) {
    std::vector<std::string> found;
    for (const auto& n : result["notices"]) {
      if (n["warning"] == true && contains(n["text"].get<std::string>(), kWarning))
        found.push_back(n["text"]);
    }
    return found;
  };
  ManifestSpec solo;
  solo.confs = {{"solo", 1, 64}};
  ToolResult alone = tool("compile --json " + quoted(write_manifest(solo, "solo.yaml")) +
                          " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(alone.code, 0) << alone.all();
  EXPECT_TRUE(warnings(json::parse(alone.out)).empty()) << alone.out;

  ManifestSpec spec;
  spec.confs = {{"b1-s128", 1, 128}, {"b2-s256", 2, 256}};
  ToolResult run = tool(
      "compile --json " + quoted(write_manifest(spec)) + " --output-dir " + quoted(work / "out"),
      "STAND_IN_ALSO_EXPORT=2:256,4:512");
  ASSERT_EQ(run.code, 0) << run.all();
  std::vector<std::string> found = warnings(json::parse(run.out));
  ASSERT_EQ(found.size(), 1u) << run.out;
  const std::string& text = found[0];
  const std::string unnamed = std::string(kLlama) + " batch_size=4 sequence_length=512";
  EXPECT_TRUE(contains(text, "the command of b1-s128 exported b1-s128, b2-s256, " + unnamed))
      << text;
  EXPECT_TRUE(contains(text, "the command of b2-s256 exported b2-s256, " + unnamed)) << text;
  EXPECT_TRUE(contains(text, "Neuron SDK 2.31")) << text;
  EXPECT_TRUE(contains(text, "Compile templates must export one configuration per process"))
      << text;
  size_t printed = 0;
  for (size_t at = run.err.find(kWarning); at != std::string::npos;
       at = run.err.find(kWarning, at + 1))
    ++printed;
  EXPECT_EQ(printed, 1u) << run.err;
}

TEST_F(PipelineCliTest, AFineTuneRecordsTheGraphsOfItsBaseModelItReused) {
  // The stand-in keys every model's graphs on Llama's, as libneuronxla gives a fine-tune of the
  // same architecture its base model's graphs: another configuration's MODULE folders.
  const std::string same_graphs = std::string("STAND_IN_GRAPH_MODEL=") + kLlama;
  Conf base{"base", 1, 128};
  ManifestSpec spec;
  spec.confs = {base};
  ToolResult first = tool(
      "compile --json " + quoted(write_manifest(spec)) + " --output-dir " + quoted(work / "out"),
      same_graphs);
  ASSERT_EQ(first.code, 0) << first.all();
  spec.confs = {{"tuned", 1, 128, 2, "bf16", kQwen}};
  ToolResult tuned = tool("compile --json " + quoted(write_manifest(spec, "tuned.yaml")) +
                              " --output-dir " + quoted(work / "out"),
                          same_graphs);
  ASSERT_EQ(tuned.code, 0) << tuned.all();
  json row = json::parse(tuned.out)["configurations"][0];
  EXPECT_EQ(row["compile"]["modules_used"], 2) << row;
  EXPECT_EQ(row["compile"]["modules_produced"], 0) << row;
  json entry = local_entry(cache, row["key"]);
  EXPECT_EQ(module_names(entry), (std::set<std::string>{context_module(base), token_module(base)}));
  for (const auto& module : entry["modules"]) {
    EXPECT_TRUE(module_complete(cache, module)) << module["name"];
  }
  EXPECT_EQ(calls(), 2u);
}

TEST_F(PipelineCliTest, WithoutSeedingEachCompileBuildsAndRecordsAllItNeeds) {
  // What also happens when inotify cannot watch the seeded entries: nothing is reused, so each
  // run compiles every graph itself, and each entry still lists exactly its own modules.
  ManifestSpec spec;
  spec.confs = {{"b1-s128", 1, 128}, {"b1-s256", 1, 256}};
  fs::path manifest = write_manifest(spec);
  ToolResult first = tool("compile --json " + quoted(manifest) + " --config b1-s128 --output-dir " +
                          quoted(work / "out"));
  ASSERT_EQ(first.code, 0) << first.all();
  ToolResult second = tool("compile --json " + quoted(manifest) +
                               " --config b1-s256 --output-dir " + quoted(work / "out"),
                           "NEURON_CACHE_SEED=0");
  ASSERT_EQ(second.code, 0) << second.all();
  json row = json::parse(second.out)["configurations"][0];
  EXPECT_EQ(row["compile"]["modules_used"], 0) << row;
  EXPECT_EQ(row["compile"]["modules_produced"], 2) << row;
  std::ifstream log(call_log);
  std::string line, last;
  while (std::getline(log, line)) last = line;
  json call = json::parse(last);
  EXPECT_EQ(call["hits"], json::array()) << "the shared token graph was compiled again: " << call;
  EXPECT_EQ(module_names(local_entry(cache, row["key"])),
            (std::set<std::string>{context_module(spec.confs[1]), token_module(spec.confs[1])}));
  for (const auto& module : local_entry(cache, row["key"])["modules"]) {
    EXPECT_TRUE(module_complete(cache, module)) << module["name"];
  }
  // status counts what the index recorded, and what of it is complete.
  ToolResult status = tool("status --json");
  ASSERT_EQ(status.code, 0) << status.all();
  EXPECT_EQ(json::parse(status.out)["configurations"], json({{"recorded", 2}, {"complete", 2}}));
  fs::remove(cache / kCompiler / context_module(spec.confs[1]) / "model.done");
  EXPECT_EQ(json::parse(tool("status --json").out)["configurations"],
            json({{"recorded", 2}, {"complete", 1}}));
}

TEST_F(PipelineCliTest, HostileIndexIsRejected) {
  const std::string sha = model_sha(kLlama);
  ManifestSpec spec;
  spec.revisions[kLlama] = sha;
  spec.model_types[kLlama] = "llama";
  spec.confs = {{"victim", 1, 128}};
  fs::path manifest = write_manifest(spec);

  // An entry for exactly the declared configuration, so a reader that trusted it would fetch it.
  cache_key::KeyInputs inputs;
  inputs.model_id = kLlama;
  inputs.model_type = "llama";
  inputs.task = "text-generation";
  inputs.precision = "bf16";
  inputs.batch_size = 1;
  inputs.sequence_length = 128;
  inputs.compiler_version = kVersion;
  inputs.num_cores = 2;
  inputs.target = "trn1";
  inputs.checkpoint_revision = sha;
  inputs.optimum_neuron_version = "0.4.5";
  const std::string key = cache_key::key_of(inputs);
  ASSERT_EQ(keys_of(plan_json(manifest))["victim"], key) << "the test builds the product's key";
  artifact_index::Entry entry;
  entry.key = key;
  entry.inputs = inputs;
  entry.configuration = "victim";
  entry.modules = {{"MODULE_1234+d7cde3b5",
                    {{"model.neff", 5, sha256_hex("evil!")}, {"model.done", 0, sha256_hex("")}}}};
  entry.compile_seconds = 1800;
  entry.tool = "attacker";
  entry.created_at = "2026-01-01T00:00:00Z";
  artifact_index::IndexFile file;
  file.format = artifact_index::kLegacyFormat;  // what neuron-cache 0.1 wrote, still read
  file.entries.emplace(key, entry);
  const std::string clean = artifact_index::serialize_index(file);
  const std::string marker = "evil-" + key.substr(0, 8) + "-" + std::to_string(getpid());

  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  auto publish = [&](const std::string& text) {
    fs::path local = work / "hostile-index.json";
    write_file(local, text);
    hub::HubClient writer = client();
    writer.commit(kRepo, {{hub::CommitOperation::Kind::Add, kIndexPath, local}}, "hostile index",
                  std::nullopt);
  };
  // Paths the two hostile names would reach from a module folder of `root`.
  auto escaped = [&](const fs::path& root) {
    std::vector<std::string> found;
    for (const fs::path& dir : {fs::path("/"), fs::path("/tmp"), work.path(), root}) {
      std::error_code error;
      for (const auto& item : fs::directory_iterator(dir, error)) {
        if (contains(item.path().filename().string(), marker)) found.push_back(item.path());
      }
    }
    for (const fs::path& file : {root / kCompiler / "x", root / "x"}) {
      if (fs::exists(fs::symlink_status(file))) found.push_back(file);
    }
    return found;
  };

  const std::vector<std::pair<std::string, std::string>> variants = {
      {"module name",
       replace(clean, "\"MODULE_1234+d7cde3b5\"", "\"../../../../tmp/" + marker + "\"")},
      {"file name", replace(clean, "\"model.neff\"", "\"../x\"")}};
  for (size_t i = 0; i < variants.size(); ++i) {
    SCOPED_TRACE(variants[i].first);
    publish(variants[i].second);
    fs::path fresh = work / ("cache-" + std::to_string(i));
    ToolResult plan = tool("plan " + quoted(manifest), "", fresh);
    EXPECT_EQ(plan.code, 0) << plan.all();
    EXPECT_TRUE(contains(plan.err, "not a valid artifact index")) << plan.all();
    EXPECT_TRUE(contains(plan.out, "compile ")) << plan.all();
    size_t before = calls();
    ToolResult ci = tool(
        "ci --read-only " + quoted(manifest) + " --output-dir " + quoted(work / "out"), "", fresh);
    EXPECT_EQ(ci.code, 0) << ci.all();
    EXPECT_TRUE(contains(ci.err, "not a valid artifact index")) << ci.all();
    EXPECT_EQ(calls(), before + 1) << "ci falls back to compiling";
    EXPECT_FALSE(local_entry(fresh, key).is_null()) << "compiled here";
    EXPECT_EQ(escaped(fresh), std::vector<std::string>{})
        << "nothing written outside the cache root";
    EXPECT_FALSE(fs::exists(fresh / kCompiler / "MODULE_1234+d7cde3b5"));
  }
  EXPECT_FALSE(fs::exists("/tmp/" + marker));
}

// A warm run (everything complete locally, nothing new on the Hub) asks the Hub only what can
// have changed: each unpinned model's revision, and the cache repo's head when a push follows.
TEST_F(PipelineCliTest, WarmRunAsksOnlyForRevisions) {
  ManifestSpec spec;
  spec.confs = {{"bs1", 1, 128}, {"bs2", 2, 128}, {"qwen", 1, 128, 2, "bf16", kQwen}};
  spec.revisions[kQwen] = model_sha(kQwen);  // pinned: nothing to ask about it
  fs::path manifest = write_manifest(spec);
  ToolResult cold = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(cold.code, 0) << cold.all();
  // The push made a new head: the next run lists and reads the new index once, then keeps them.
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out")).code, 0);
  for (const std::string command : {"prefetch", "ci", "plan"}) {
    SCOPED_TRACE(command);
    server.clear_log();
    std::string extra = command == "ci" ? " --output-dir " + quoted(work / "out") : "";
    ToolResult warm = tool(command + " " + quoted(manifest) + extra);
    ASSERT_EQ(warm.code, 0) << warm.all();
    json log = server.access_log();
    // The model's revision makes the keys; the store's head only matters to a push, which must
    // know what the store lacks now (a shard deleted since, below): plan and prefetch of
    // configurations complete locally ask the store nothing.
    ASSERT_EQ(log.size(), command == "ci" ? 2u : 1u) << log.dump(1);
    EXPECT_EQ(log[0]["path"], "/api/models/" + std::string(kLlama) + "/revision/main");
    if (command == "ci") {
      EXPECT_EQ(log[1]["path"], "/api/models/" + std::string(kRepo) + "/revision/main");
    }
    for (const auto& e : log) EXPECT_LT(e["bytes_out"], 200) << e;
  }
  EXPECT_EQ(calls(), 3u);

  // What a run remembers holds for one head only: with the llama shard deleted on the Hub, the
  // next ci reads the index again and pushes those configurations back.
  std::string shard = artifact_index::remote_shard_path(kVersion, kLlama);
  client().commit(kRepo, {{hub::CommitOperation::Kind::Delete, shard, {}}}, "lost shard",
                  std::nullopt);
  size_t commits = hub_commits();
  ToolResult again = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_EQ(hub_commits(), commits + 1) << again.all();
  EXPECT_EQ(hub_index()["entries"].size(), 3u);
  EXPECT_EQ(calls(), 3u) << "pushed from the local cache, not compiled";
}

// The model type comes from config.json, which never changes at a given commit: it is read once
// per commit, then remembered in the cache root (also when the revision is pinned).
TEST_F(PipelineCliTest, ConfigJsonIsReadOncePerModelCommit) {
  const std::string model = "acme/tiny-model";  // a model alice may commit to
  auto set_config = [&](const std::string& text) {
    write_file(work / "config.json", text);
    client().commit(model, {{hub::CommitOperation::Kind::Add, "config.json", work / "config.json"}},
                    "config", std::nullopt);
  };
  client().create_repo("tiny-model", "acme", false);
  set_config(R"({"model_type": "llama", "hidden_size": 64})");
  ManifestSpec spec;
  spec.confs = {{"tiny", 1, 128, 2, "bf16", model}, {"qwen", 1, 128, 2, "bf16", kQwen}};
  spec.revisions[kQwen] = model_sha(kQwen);
  fs::path manifest = write_manifest(spec);
  server.clear_log();
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  EXPECT_EQ(count(server.access_log(), is_config_read), 2u);
  server.clear_log();
  EXPECT_EQ(keys_of(plan_json(manifest)), keys);
  json log = server.access_log();
  EXPECT_EQ(count(log, is_config_read), 0u) << log.dump(1);
  EXPECT_EQ(count(log, [](const json& e) { return contains(e["path"], kQwen); }), 0u)
      << "a pinned model with a known type costs no request";

  // A new commit of the model: its config.json is read again, once.
  set_config(R"({"model_type": "llama", "hidden_size": 128})");
  server.clear_log();
  json moved = plan_json(manifest);
  EXPECT_EQ(count(server.access_log(), is_config_read), 1u);
  EXPECT_NE(keys_of(moved)["tiny"], keys["tiny"]) << "another commit, another key";
  EXPECT_EQ(keys_of(moved)["qwen"], keys["qwen"]);
}

// Completeness comes from the entry and one stat per file it lists: a NEFF deleted or cut short
// is still seen, and MODULE folders no entry lists are never looked at.
TEST_F(PipelineCliTest, WarmRunChecksListedFilesOnly) {
  ManifestSpec spec;
  for (int b = 1; b <= 4; ++b) spec.confs.push_back({"bs" + std::to_string(b), b, 128});
  fs::path manifest = write_manifest(spec);
  ManifestSpec half = spec;
  half.confs.resize(2);
  fs::path half_manifest = write_manifest(half, "half.yaml");
  ToolResult cold = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(cold.code, 0) << cold.all();

  if (testing::strace_works()) {
    auto stats = [&](const fs::path& m) {
      fs::path summary = work / "strace.txt";
      wrapper = "strace -f -c -o " + quoted(summary);
      ToolResult run = tool("prefetch " + quoted(m));
      wrapper.clear();
      EXPECT_EQ(run.code, 0) << run.all();
      return testing::stat_calls(read_file(summary));
    };
    size_t two = stats(half_manifest);
    size_t four = stats(manifest);
    // Two configurations of two modules of four files each: an entry read and one stat per
    // listed file, give or take a few.
    EXPECT_LE(four - two, 2u * (2 * 5 + 4)) << two << " then " << four;
    for (int i = 0; i < 300; ++i) {  // graphs of other pipelines, in the same compiler folder
      fs::path other = cache / kCompiler / ("MODULE_" + std::to_string(900000 + i) + "+d7517139");
      for (const char* name : {"model.neff", "model.done", "model.hlo_module.pb"})
        write_file(other / name, "x");
    }
    EXPECT_LE(stats(manifest), four + 4) << "a warm run never lists the cache";
  } else {
    std::cerr << "strace cannot run here: stat counts not checked\n";
  }

  const Conf& deleted = spec.confs[0];
  const Conf& truncated = spec.confs[1];
  fs::remove(cache / kCompiler / context_module(deleted) / "model.neff");
  fs::resize_file(cache / kCompiler / token_module(truncated) / "model.neff", 10);
  json plan = plan_json(manifest);
  ASSERT_FALSE(plan.is_null());
  for (const auto& row : plan["configurations"]) {
    bool damaged = row["name"] == deleted.name || row["name"] == truncated.name;
    EXPECT_EQ(row["status"], damaged ? "store" : "local") << row;
  }
  ToolResult fetched = tool("prefetch " + quoted(manifest));
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_TRUE(contains(fetched.out, "prefetched 2 configurations")) << fetched.all();
  for (const auto& row : plan_json(manifest)["configurations"]) EXPECT_EQ(row["status"], "local");
  EXPECT_EQ(calls(), 4u) << "nothing compiled again";
}

TEST_F(PipelineCliTest, CacheRepoPrecedenceIsShownAndPassedToTheCompileCommand) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  auto origin = [&](const std::string& args, const std::string& env) {
    ToolResult run = tool("plan --json " + args, env);
    EXPECT_EQ(run.code, 0) << run.all();
    json plan = run.code == 0 ? json::parse(run.out) : json::object();
    return std::make_pair(plan.value("repo", ""), plan.value("repo_origin", ""));
  };
  auto [repo, from] = origin(quoted(manifest), "CUSTOM_CACHE_REPO=acme/elsewhere");
  EXPECT_EQ(repo, kRepo);
  EXPECT_TRUE(contains(from, "the manifest's cache_repo")) << from;
  ToolResult text = tool("plan " + quoted(manifest), "CUSTOM_CACHE_REPO=acme/elsewhere");
  EXPECT_TRUE(contains(text.out, "CUSTOM_CACHE_REPO=acme/elsewhere is not used")) << text.all();
  std::tie(repo, from) = origin(quoted(manifest) + " --repo acme/given", "CUSTOM_CACHE_REPO=x/y");
  EXPECT_EQ(repo, "acme/given");
  EXPECT_EQ(from, "--repo");
  spec.cache_repo.reset();
  fs::path bare = write_manifest(spec, "bare.yaml");
  std::tie(repo, from) = origin(quoted(bare), "CUSTOM_CACHE_REPO=acme/from-env");
  EXPECT_EQ(repo, "acme/from-env");
  EXPECT_EQ(from, "CUSTOM_CACHE_REPO");
  write_file(home / "optimum_neuron_custom_cache", "acme/saved");
  std::tie(repo, from) = origin(quoted(bare), "");
  EXPECT_EQ(repo, "acme/saved");
  std::tie(repo, from) = origin(quoted(manifest), "");
  EXPECT_EQ(repo, kRepo) << "the manifest wins over the saved repo";

  // The compile command reads the same repo through optimum-neuron.
  ToolResult ci = tool("ci " + quoted(manifest), "CUSTOM_CACHE_REPO=acme/elsewhere");
  ASSERT_EQ(ci.code, 0) << ci.all();
  json call = json::parse(read_file(call_log));
  EXPECT_EQ(call["custom_cache_repo"], kRepo);
}

// ---------------------------------------------------------------------------------------------
// Traced exports (encoders): one MODULE_<entry hash> folder with config.json, model.neuron and
// tokenizer files, no model.neff/model.done, plus its registry entry (format spec 2.3, 5.3).

TEST_F(PipelineCliTest, TracedExportRoundTripsThroughPushAndPrefetch) {
  fs::path manifest = write_manifest(encoder_spec());
  std::string key = keys_of(plan_json(manifest))["minilm-bs1"];
  ASSERT_FALSE(key.empty());

  // Machine 1: the stand-in exports the encoder; the folder is recorded and pushed.
  ToolResult first = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out1") +
                          " --report " + quoted(work / "report1.json"));
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_EQ(calls(), 1u);
  json report1 = json::parse(read_file(work / "report1.json"));
  EXPECT_EQ(report1["totals"]["compiled"], 1) << report1.dump(2);
  json local = local_entry(cache, key);
  ASSERT_FALSE(local.is_null()) << "no local index entry: " << first.all();
  ASSERT_EQ(local["modules"].size(), 1u) << local.dump(2);
  const json& module = local["modules"][0];
  const std::string name = module["name"];
  EXPECT_TRUE(layout::is_traced_module_name(name)) << name;
  std::set<std::string> listed;
  for (const auto& file : module["files"]) listed.insert(file["name"].get<std::string>());
  EXPECT_EQ(listed, (std::set<std::string>{"config.json", "model.neuron", "special_tokens_map.json",
                                           "tokenizer.json", "tokenizer_config.json"}));
  // The registry entry is named by the same hash as the folder (check_traced_cache_entry).
  const std::string hash = name.substr(std::string("MODULE_").size());
  ASSERT_EQ(local["registry"].size(), 2u) << "primary file and alias: " << local.dump(2);
  for (const auto& file : local["registry"]) {
    EXPECT_TRUE(file["name"].get<std::string>().ends_with("/" + hash + ".json")) << file;
  }
  EXPECT_TRUE(contains(local["registry"].dump(), "/bert/" + std::string(kEncoder) + "/"));

  json index = hub_index();
  ASSERT_FALSE(index.is_null());
  ASSERT_TRUE(index["entries"].contains(key));
  EXPECT_EQ(index["entries"][key]["modules"], local["modules"]);
  std::set<std::string> files = hub_files();
  for (const auto& file : listed) EXPECT_TRUE(files.count(kCompiler + "/" + name + "/" + file));
  for (const auto& file : local["registry"])
    EXPECT_TRUE(files.count(kCompiler + "/" + file["name"].get<std::string>())) << file;
  EXPECT_TRUE(files.count(kShardDir + "/sentence-transformers--all-MiniLM-L6-v2.json"));

  // Machine 2: an empty cache prefetches the folder and runs nothing.
  fs::path cache2 = work / "cache2";
  ToolResult second = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2") +
                               " --report " + quoted(work / "report2.json"),
                           "", cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_EQ(calls(), 1u) << "the stand-in was not called on the second machine";
  EXPECT_EQ(json::parse(read_file(work / "report2.json"))["totals"]["hub_hits"], 1);
  EXPECT_EQ(module_folders(cache2), std::set<std::string>{name});
  for (const auto& file : listed) {
    fs::path a = cache / kCompiler / name / file, b = cache2 / kCompiler / name / file;
    EXPECT_EQ(testing::run_command("cmp " + quoted(a) + " " + quoted(b)), 0) << file;
  }
  for (const auto& file : local["registry"]) {
    fs::path rel = fs::path(kCompiler) / file["name"].get<std::string>();
    EXPECT_EQ(read_file(cache2 / rel), read_file(cache / rel)) << rel;
  }
  EXPECT_FALSE(local_entry(cache2, key).is_null());
  json status = json::parse(tool("status --json", "", cache2).out);
  EXPECT_EQ(status["entries_by_state"]["traced"]["count"], 1) << status.dump(2);
  EXPECT_EQ(status["entries_by_state"]["empty"]["count"], 0);

  // optimum-neuron's own lookup on machine 2 finds MODULE_<hash> and loads it: no compile.
  std::string output;
  std::string direct = "env STAND_IN_DELAY=0 NEURON_COMPILE_CACHE_URL=" + quoted(cache2) + " " +
                       STAND_IN_EXPORT + " --model " + kEncoder +
                       " --task feature-extraction --batch_size 1 --sequence_length 128 "
                       "--num_cores 1 --auto_cast_type bf16 --instance_type trn1 " +
                       quoted(work / "direct");
  EXPECT_EQ(testing::run_command(direct, &output), 0) << output;
  EXPECT_TRUE(contains(output, "Loaded the cached traced model")) << output;
}

// Every file below `dir`, as '/'-paths.
std::set<std::string> files_below(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& item : fs::recursive_directory_iterator(dir)) {
    if (item.is_regular_file()) names.insert(item.path().lexically_relative(dir).generic_string());
  }
  return names;
}

TEST_F(PipelineCliTest, DiffusionExportRoundTripsWithItsComponentFolders) {
  ManifestSpec spec;
  spec.confs = {{"sd-bs1", 1, 77, 1, "bf16", kDiffusion}};
  spec.tasks[kDiffusion] = "text-to-image";
  spec.model_types[kDiffusion] = "stable-diffusion";
  fs::path manifest = write_manifest(spec);
  ToolResult first = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out1"));
  ASSERT_EQ(first.code, 0) << first.all();
  std::set<std::string> modules = module_folders(cache);
  ASSERT_EQ(modules.size(), 1u);
  const std::string name = *modules.begin();
  std::set<std::string> made = files_below(cache / kCompiler / name);
  EXPECT_TRUE(made.count("unet/model.neuron") && made.count("text_encoder/config.json") &&
              made.count("model_index.json"))
      << first.all();

  fs::path cache2 = work / "cache2";
  ToolResult second =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2"), "", cache2);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_EQ(calls(), 1u) << "nothing compiled on the second machine";
  EXPECT_EQ(files_below(cache2 / kCompiler / name), made);
  for (const auto& file : made) {
    EXPECT_EQ(read_file(cache2 / kCompiler / name / file),
              read_file(cache / kCompiler / name / file))
        << file;
  }
}

TEST_F(PipelineCliTest, TracedExportOfAFailedCommandIsNeitherRecordedNorInstalled) {
  fs::path manifest = write_manifest(encoder_spec());
  std::string key = keys_of(plan_json(manifest))["minilm-bs1"];
  // Killed half-way through the copy into the cache: model.neuron there, config.json not.
  ToolResult half = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                         "STAND_IN_FAIL=MiniLM");
  EXPECT_NE(half.code, 0) << half.all();
  // The copy finished, then the command failed: nothing tells that the folder is whole.
  ToolResult after = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                          "STAND_IN_FAIL=MiniLM STAND_IN_TRACED_FAIL_AT=after");
  EXPECT_NE(after.code, 0) << after.all();
  EXPECT_EQ(calls(), 2u);
  EXPECT_TRUE(module_folders(cache).empty()) << "a traced folder of a failed run was installed";
  EXPECT_TRUE(local_entry(cache, key).is_null());
  EXPECT_TRUE(hub_index().is_null() || !hub_index()["entries"].contains(key));
  for (const auto& path : hub_files()) EXPECT_FALSE(contains(path, "MODULE_")) << path;

  ToolResult good = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(good.code, 0) << good.all();
  EXPECT_EQ(module_folders(cache).size(), 1u);
  EXPECT_FALSE(local_entry(cache, key).is_null());
}

TEST_F(PipelineCliTest, CleanupAllKeepsACompleteTracedExport) {
  fs::path manifest = write_manifest(encoder_spec());
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  std::set<std::string> before = module_folders(cache);
  ASSERT_EQ(before.size(), 1u);
  fs::path incomplete = cache / kCompiler / "MODULE_00000000000000000000";
  write_file(incomplete / "model.neuron", "half a copy");  // no config.json: EMPTY

  ToolResult status = tool("status");
  EXPECT_TRUE(contains(status.out, "  Traced:       1  (")) << status.all();
  EXPECT_TRUE(contains(status.out, "  Empty:        1  (")) << status.all();
  ToolResult cleanup = tool("cleanup --all");
  ASSERT_EQ(cleanup.code, 0) << cleanup.all();
  EXPECT_TRUE(contains(cleanup.out, "Kept 1 complete traced exports")) << cleanup.all();
  EXPECT_EQ(module_folders(cache), before);
  EXPECT_FALSE(fs::exists(incomplete));
  for (const auto& row : plan_json(manifest)["configurations"]) EXPECT_EQ(row["status"], "local");
  EXPECT_TRUE(contains(tool("cleanup --help").out, "complete traced exports"));
}

// A model from a local git clone: its model type comes from the clone's config.json, read with
// the bounds of any answer; a symlinked one is refused with the way out.
TEST_F(PipelineCliTest, CheckoutModelTypeComesFromItsConfigAndALinkIsRefused) {
  fs::path clone = work / "llama";
  fs::create_directories(clone);
  write_file(clone / "config.json", model_config_text(kLlama));
  std::string git = "git -C " + quoted(clone) + " -c user.name=t -c user.email=t@example.invalid ";
  ASSERT_EQ(testing::run_command(git + "init -q && " + git + "add config.json && " + git +
                                 "commit -qm config"),
            0);
  ManifestSpec spec;
  spec.cache_repo.reset();
  spec.confs = {{"a", 1, 128}};
  std::string text = manifest_text(spec);
  const std::string model_line = "  - model_id: " + std::string(kLlama) + "\n";
  ASSERT_NE(text.find(model_line), std::string::npos) << text;
  text.insert(text.find(model_line) + model_line.size(), "    checkout: ./llama\n");
  fs::path manifest = work / "checkout.yaml";
  write_file(manifest, text);
  ToolResult keys = tool("inspect --json --manifest " + quoted(manifest), "HF_HUB_OFFLINE=1");
  ASSERT_EQ(keys.code, 0) << keys.all();
  EXPECT_EQ(json::parse(keys.out)[0]["inputs"]["model"]["model_type"], "llama") << keys.out;

  fs::path elsewhere = work / "elsewhere.json";
  fs::rename(clone / "config.json", elsewhere);
  fs::create_symlink(elsewhere, clone / "config.json");
  ToolResult refused = tool("plan " + quoted(manifest), "HF_HUB_OFFLINE=1");
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_TRUE(contains(refused.err, (clone / "config.json").string() + " is a symlink"))
      << refused.all();
  EXPECT_TRUE(contains(refused.err, "set model_type in the manifest")) << refused.all();
}

// A file size limit (`ulimit -f`) makes the download's write fail: the tool names the file and
// the limit and exits with an error, where it used to die by SIGXFSZ without a word.
TEST_F(PipelineCliTest, AFileSizeLimitIsNamedNotASilentDeath) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                       "STAND_IN_NEFF_BYTES=" + std::to_string(4 << 20));
  ASSERT_EQ(ci.code, 0) << ci.all();
  wrapper = "sh -c 'ulimit -f 1024; exec \"$0\" \"$@\"'";  // 1024 blocks: at most 1 MiB
  ToolResult fetched = tool("prefetch " + quoted(manifest), "", work / "limited-cache");
  EXPECT_NE(fetched.code, 0) << fetched.all();
  EXPECT_LT(fetched.code, 128) << "killed by a signal: " << fetched.all();
  EXPECT_TRUE(contains(fetched.all(), "file size limit (ulimit -f)")) << fetched.all();
  EXPECT_TRUE(contains(fetched.all(), "prefetching 1 configuration from")) << fetched.all();
}

// Eight runs at once on one cache: each adds its run to the statistics under the file's lock,
// so status counts all of them (an update written without the lock loses some).
TEST_F(PipelineCliTest, EightRunsAtOnceAreAllCounted) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "o")).code, 0);
  testing::ToolRunner runner(work.path(), home.path(), endpoint, cache);
  runner.token = token;
  std::string one = runner.command("prefetch --quiet " + quoted(manifest));
  std::string all;
  for (int i = 0; i < 8; ++i) all += "(" + one + ") & ";
  all += "wait";
  std::string quoted_all = "'";
  for (char c : all) quoted_all += c == '\'' ? std::string("'\\''") : std::string(1, c);
  ASSERT_EQ(testing::run_command("bash -c " + quoted_all + "'", nullptr), 0);
  ToolResult status = tool("status --json");
  ASSERT_EQ(status.code, 0) << status.all();
  json s = json::parse(status.out)["stats"]["stores"][kRepo];
  EXPECT_EQ(s["runs"], 9) << s;
  EXPECT_EQ(s["local_hits"], 8) << s;  // the ci compiled it: a miss
}

// An S3 store that cannot be opened (its credentials endpoint does not answer): plan says why,
// once, and calls the store S3, not the Hub.
TEST_F(PipelineCliTest, AnS3StoreThatCannotBeOpenedIsNamedWithItsCause) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  spec.cache_repo = "s3://bucket/cache";
  fs::path manifest = write_manifest(spec);
  ToolResult plan = tool("plan " + quoted(manifest),
                         "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:9/creds "
                         "AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true");
  ASSERT_EQ(plan.code, 0) << plan.all();
  const std::string cause =
      "the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI)";
  size_t first = plan.err.find(cause);
  EXPECT_NE(first, std::string::npos) << plan.all();
  EXPECT_EQ(plan.err.find(cause, first + 1), std::string::npos) << "said once: " << plan.all();
  EXPECT_TRUE(contains(plan.err, "the cache store s3://bucket/cache cannot be used")) << plan.all();
  EXPECT_TRUE(contains(plan.out, "0 on S3")) << plan.all();
  EXPECT_FALSE(contains(plan.out, "Hub")) << plan.all();
  // prefetch's summary does not call them "not cached": nothing was checked.
  ToolResult fetched = tool("prefetch " + quoted(manifest),
                            "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:9/creds "
                            "AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true");
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_FALSE(contains(fetched.out, "not cached")) << fetched.all();
  EXPECT_TRUE(contains(fetched.out,
                       "1 configuration is not complete locally, and the cache store "
                       "was not checked (the cache store s3://bucket/cache could not "
                       "be opened)"))
      << fetched.all();
}

}  // namespace
}  // namespace neuron_cache
