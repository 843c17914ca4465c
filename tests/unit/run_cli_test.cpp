// `neuron-cache run` of training jobs and custom loops (tests/tools/stand-in-train) against the
// local Hub server: profiles, recorded graphs and what the push says.

#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

// ---- `run` of training jobs and custom loops (tests/tools/stand-in-train) ----

// The compile_flags.json the training stand-in writes without NEURON_CC_FLAGS.
constexpr const char* kTrainFlags =
    R"(["--model-type=transformer", "--distribution-strategy=llm-training", "--target=trn1"])";

// The MODULE_ folder of one training graph: a decimal u64 graph key, as torch-xla's.
std::string training_module(const std::string& graph, const std::string& model = "stand-in-train") {
  std::string seed = "train|" + model + "|" + graph + "|" + kTrainFlags;
  uint64_t key = std::stoull(sha256_hex(seed).substr(0, 16), nullptr, 16);
  return "MODULE_" + std::to_string(key) + "+" + md5_hex(kTrainFlags).substr(0, 8);
}

std::set<std::string> training_modules(size_t graphs, const std::string& model = "stand-in-train") {
  std::set<std::string> names;
  for (size_t i = 0; i < graphs; ++i)
    names.insert(training_module("graph-" + std::to_string(i), model));
  return names;
}

std::string train_command(size_t graphs, const std::string& model = "stand-in-train") {
  return std::string(STAND_IN_TRAIN) + " --steps 3 --graphs " + std::to_string(graphs) +
         " --model " + model;
}

class RunCliTest : public PipelineCliTest {
 protected:
  // The last line of the stand-ins' call log.
  json last_call() const {
    std::ifstream in(call_log);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    return last.empty() ? json(nullptr) : json::parse(last);
  }

  static std::set<std::string> names(const json& list) {
    std::set<std::string> out;
    for (const auto& item : list) out.insert(item.get<std::string>());
    return out;
  }

  // The profile's shard on the Hub, or null.
  json profile_shard(const std::string& profile) const {
    auto text = client().read_file(kRepo, kShardDir + "/profiles/" + profile + ".json");
    return text ? json::parse(*text) : json(nullptr);
  }

  // `run --profile` of the training stand-in with `graphs` graphs, in `root`.
  ToolResult train(const std::string& profile, size_t graphs, const fs::path& root,
                   const std::string& env = "") {
    return tool(std::string("run --compiler-version ") + kVersion + " --profile " + profile +
                    " --repo " + kRepo + " --output-dir " + quoted(work / "out") + " -- " +
                    train_command(graphs),
                env, root);
  }

  std::set<std::string> complete_modules(const fs::path& root) const {
    std::set<std::string> out;
    std::error_code error;
    for (const auto& item : fs::directory_iterator(root / kCompiler, error)) {
      if (fs::exists(item.path() / "model.done")) out.insert(item.path().filename().string());
    }
    return out;
  }

  const std::string profile_key =
      cache_key::key_of(cache_key::profile_inputs("llama-train", kVersion, {}));
};

TEST_F(RunCliTest, RunWithoutManifestRunsTheCommandAndSaysNothingRecordsItsGraphs) {
  // No option at all: the command runs; the default repo (optimum-neuron's public cache) is not
  // on this Hub, so the push fails, says so, and the graphs stay in the local cache.
  ToolResult alone = tool("run -- " + train_command(1), "", work / "cache-alone");
  ASSERT_EQ(alone.code, 0) << alone.all();
  EXPECT_FALSE(contains(alone.all(), "filesystem error")) << alone.all();
  EXPECT_EQ(names(last_call()["compiled"]), training_modules(1));
  EXPECT_TRUE(contains(alone.err, "push failed: ")) << alone.err;
  EXPECT_TRUE(contains(alone.err, "stay in the local cache only")) << alone.err;
  EXPECT_EQ(complete_modules(work / "cache-alone"), training_modules(1));

  ToolResult first = tool("run --repo " + std::string(kRepo) + " --output-dir " +
                          quoted(work / "out") + " -- " + train_command(2));
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_FALSE(contains(first.all(), "filesystem error")) << first.all();
  EXPECT_TRUE(contains(first.out, "Training done: 2 graphs compiled")) << "output is shown live";
  EXPECT_EQ(names(last_call()["compiled"]), training_modules(2));
  EXPECT_TRUE(contains(first.err, "nothing records these compiled graphs")) << first.err;
  EXPECT_TRUE(contains(first.err, "--profile")) << first.err;
  EXPECT_TRUE(contains(first.err, "pushed 2 compiled graphs (MODULE folders) in commit"))
      << first.err;
  std::set<std::string> files = hub_files();
  for (const auto& module : training_modules(2)) {
    EXPECT_TRUE(files.count(kCompiler + "/" + module + "/model.done")) << module;
  }

  // Another machine compiles the same graphs: the Hub has them, and the line says so.
  size_t commits = hub_commits();
  ToolResult again = tool("run --repo " + std::string(kRepo) + " --output-dir " +
                              quoted(work / "out") + " -- " + train_command(2),
                          "", work / "cache-b");
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_EQ(names(last_call()["compiled"]), training_modules(2)) << "nothing was prefetched";
  EXPECT_TRUE(contains(again.err, "2 compiled graphs were already on the Hub: nothing to push"))
      << again.err;
  EXPECT_FALSE(contains(again.err, "pushed 2")) << again.err;
  EXPECT_EQ(hub_commits(), commits);
}

TEST_F(RunCliTest, TrainingRunWithAProfileRoundTripsAndGrows) {
  const fs::path a = cache, b = work / "cache-b", c = work / "cache-c";
  // Machine A: compiles 2 graphs, records them under the profile, pushes folders and shard.
  ToolResult first = train("llama-train", 2, a);
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_EQ(names(last_call()["compiled"]), training_modules(2));
  EXPECT_TRUE(contains(first.err, "recorded profile llama-train: 2 compiled graphs (2 new)"))
      << first.err;
  EXPECT_TRUE(contains(first.err, "pushed profile llama-train: 2 new compiled graphs"))
      << first.err;
  json local = local_entry(a, profile_key);
  ASSERT_FALSE(local.is_null()) << first.all();
  EXPECT_EQ(local["inputs"]["profile"], "llama-train");
  EXPECT_FALSE(local["inputs"].contains("model"));
  EXPECT_EQ(module_names(local), training_modules(2));
  json shard = profile_shard("llama-train");
  ASSERT_FALSE(shard.is_null()) << first.all();
  EXPECT_EQ(shard["profile"], "llama-train");
  EXPECT_EQ(shard["format"], 2);
  ASSERT_TRUE(shard["entries"].contains(profile_key)) << shard.dump(2);
  EXPECT_EQ(module_names(shard["entries"][profile_key]), training_modules(2));
  for (const auto& module : training_modules(2)) {
    EXPECT_TRUE(hub_files().count(kCompiler + "/" + module + "/model.neff")) << module;
  }

  // Machine B, empty cache: prefetches both folders, compiles nothing, pushes nothing.
  size_t commits = hub_commits();
  server.clear_log();
  ToolResult second = train("llama-train", 2, b);
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_EQ(names(last_call()["compiled"]), std::set<std::string>{}) << second.all();
  EXPECT_EQ(names(last_call()["hits"]), training_modules(2));
  EXPECT_GT(count(server.access_log(), is_module_download), 0u);
  EXPECT_TRUE(contains(second.err, "2 MODULE folders installed")) << second.err;
  EXPECT_TRUE(contains(second.err, "nothing new to push")) << second.err;
  EXPECT_EQ(hub_commits(), commits);

  // Machine B adds a third graph: only it is compiled; the entry grows; the push sends its
  // folder and the shard only. (B's memo says the 2-graph entry is on the Hub: it must not
  // hide the 3-graph one.)
  ToolResult grown = train("llama-train", 3, b);
  ASSERT_EQ(grown.code, 0) << grown.all();
  const std::string third = training_module("graph-2");
  EXPECT_EQ(names(last_call()["compiled"]), std::set<std::string>{third});
  EXPECT_EQ(names(last_call()["hits"]), training_modules(2));
  EXPECT_TRUE(contains(grown.err, "recorded profile llama-train: 3 compiled graphs (1 new)"))
      << grown.err;
  EXPECT_TRUE(contains(grown.err, "pushed profile llama-train: 1 new compiled graphs"))
      << grown.err;
  EXPECT_TRUE(contains(grown.err, ": 5 files sent")) << "4 files of the folder and the shard\n"
                                                     << grown.err;
  EXPECT_TRUE(contains(grown.err, ", 0 already stored")) << grown.err;
  EXPECT_EQ(hub_commits(), commits + 1);
  shard = profile_shard("llama-train");
  ASSERT_FALSE(shard.is_null());
  EXPECT_EQ(shard["entries"].size(), 1u);
  EXPECT_EQ(module_names(shard["entries"][profile_key]), training_modules(3));
  EXPECT_TRUE(hub_files().count(kCompiler + "/" + third + "/model.done"));

  // Machine C prefetches all three and compiles nothing.
  ToolResult fresh = train("llama-train", 3, c);
  ASSERT_EQ(fresh.code, 0) << fresh.all();
  EXPECT_EQ(names(last_call()["compiled"]), std::set<std::string>{});
  EXPECT_EQ(names(last_call()["hits"]), training_modules(3));
  EXPECT_EQ(complete_modules(c), training_modules(3));
  EXPECT_TRUE(contains(fresh.err, "nothing new to push")) << fresh.err;

  // Machine A's own entry is complete (2 graphs), but the Hub's has one more: it is fetched
  // before the run, so the run compiles nothing.
  ToolResult back = train("llama-train", 3, a);
  ASSERT_EQ(back.code, 0) << back.all();
  EXPECT_EQ(names(last_call()["compiled"]), std::set<std::string>{}) << back.all();
  EXPECT_EQ(module_names(local_entry(a, profile_key)), training_modules(3));
  EXPECT_EQ(hub_commits(), commits + 1);
}

TEST_F(RunCliTest, ProfileNamesAndOptionsAreChecked) {
  for (const std::string bad : {"''", "../x", "-x", "'a b'", "a/b"}) {
    ToolResult run = tool(std::string("run --compiler-version ") + kVersion + " --profile " + bad +
                          " --repo " + kRepo + " -- " + train_command(1));
    EXPECT_NE(run.code, 0) << bad;
    EXPECT_TRUE(contains(run.err, "profile")) << bad << ": " << run.err;
    EXPECT_FALSE(contains(run.all(), "terminate called")) << run.all();
  }
  EXPECT_EQ(calls(), 0u) << "a bad name stops before the command";
  ToolResult no_compiler =
      tool("run --profile llama-train --repo " + std::string(kRepo) + " -- " + train_command(1));
  EXPECT_NE(no_compiler.code, 0);
  EXPECT_TRUE(contains(no_compiler.err, "--compiler-version")) << no_compiler.err;
  ManifestSpec spec;
  spec.confs = {{"declared", 1, 128}};
  ToolResult both = tool("run --manifest " + quoted(write_manifest(spec)) +
                         " --config declared --profile x -- " + train_command(1));
  EXPECT_NE(both.code, 0);
  EXPECT_TRUE(contains(both.err, "--config or --profile")) << both.err;
  EXPECT_EQ(calls(), 0u);
}

TEST_F(RunCliTest, ADeclaredConfigurationWhoseLaterRunAddsAGraphPushesTheAddition) {
  ManifestSpec spec;
  Conf declared{"declared", 1, 128};
  spec.confs = {declared};
  fs::path manifest = write_manifest(spec);
  const std::string key = keys_of(plan_json(manifest))["declared"];
  auto run = [&](size_t graphs, const fs::path& root) {
    return tool("run --manifest " + quoted(manifest) + " --config declared --output-dir " +
                    quoted(work / "out") + " -- " + train_command(graphs, "declared"),
                "", root);
  };
  ToolResult first = run(1, cache);
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_EQ(module_names(hub_index()["entries"][key]), training_modules(1, "declared"));
  // `push` finds it on the Hub and remembers that for this head.
  ToolResult push = tool("push " + quoted(manifest));
  ASSERT_EQ(push.code, 0) << push.all();
  EXPECT_TRUE(contains(push.out, "nothing new to push")) << push.all();

  ToolResult grown = run(2, cache);
  ASSERT_EQ(grown.code, 0) << grown.all();
  EXPECT_EQ(names(last_call()["compiled"]),
            std::set<std::string>{training_module("graph-1", "declared")});
  EXPECT_EQ(module_names(local_entry(cache, key)), training_modules(2, "declared"));
  EXPECT_TRUE(contains(grown.err, "pushed configuration declared: 1 new compiled graphs"))
      << grown.err;
  EXPECT_EQ(module_names(hub_index()["entries"][key]), training_modules(2, "declared"));

  // `ci` on another machine prefetches both and compiles nothing.
  size_t before = calls();
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), "",
                       work / "cache-b");
  ASSERT_EQ(ci.code, 0) << ci.all();
  EXPECT_EQ(calls(), before);
  EXPECT_EQ(complete_modules(work / "cache-b"), training_modules(2, "declared"));
}

TEST_F(RunCliTest, RunWithAManifestButNoConfigTellsWhatThePushDid) {
  ManifestSpec spec;
  spec.confs = {{"declared", 1, 128}};
  fs::path manifest = write_manifest(spec);
  Conf adhoc{"adhoc", 8, 512};
  auto run = [&](const fs::path& root) {
    return tool("run --manifest " + quoted(manifest) + " --output-dir " + quoted(work / "out") +
                    " -- " + stand_in_command(adhoc, work / "export-adhoc"),
                "", root);
  };
  ToolResult first = run(cache);
  ASSERT_EQ(first.code, 0) << first.all();
  EXPECT_TRUE(contains(first.err, "pushed 2 compiled graphs (MODULE folders) in commit"))
      << first.err;
  EXPECT_TRUE(contains(first.err, "--profile")) << first.err;
  size_t commits = hub_commits();
  ToolResult second = run(work / "cache-b");
  ASSERT_EQ(second.code, 0) << second.all();
  EXPECT_TRUE(contains(second.err, "2 compiled graphs were already on the Hub: nothing to push"))
      << second.err;
  EXPECT_FALSE(contains(second.err, "pushed 2 compiled graphs")) << second.err;
  EXPECT_EQ(hub_commits(), commits);
  // The same machine again: the command reuses its graphs, so nothing is new.
  ToolResult third = run(work / "cache-b");
  ASSERT_EQ(third.code, 0) << third.all();
  EXPECT_TRUE(contains(third.err, "push skipped: nothing new to push")) << third.err;
}

// Issue 24 (5): a precompile rerun (neuron_parallel_compile) finds every graph of the profile
// cached and opens none of them: nothing new to record, and no reason to doubt the command.
TEST_F(RunCliTest, APrecompileRerunWithEveryGraphCachedHasNothingNewToRecord) {
  const fs::path a = cache, b = work / "cache-b";
  ToolResult first = train("llama-train", 2, a);
  ASSERT_EQ(first.code, 0) << first.all();
  const std::string nothing_new =
      "nothing new to record: every graph of profile llama-train was already cached";
  // The same machine (every folder local), then another one (every folder prefetched).
  for (const fs::path& root : {a, b}) {
    SCOPED_TRACE(root.string());
    size_t commits = hub_commits();
    ToolResult again = train("llama-train", 2, root, "STAND_IN_PRECOMPILE=1");
    ASSERT_EQ(again.code, 0) << again.all();
    EXPECT_EQ(names(last_call()["compiled"]), std::set<std::string>{}) << again.all();
    EXPECT_EQ(names(last_call()["hits"]), training_modules(2));
    EXPECT_TRUE(contains(again.err, nothing_new)) << again.err;
    EXPECT_FALSE(contains(again.err, "warning:")) << again.err;
    EXPECT_FALSE(contains(again.err, "does it compile through")) << again.err;
    EXPECT_EQ(module_names(local_entry(root, profile_key)), training_modules(2));
    EXPECT_EQ(complete_modules(root), training_modules(2));
    EXPECT_EQ(hub_commits(), commits);
  }
  // A graph the profile does not have yet is compiled and recorded as before.
  ToolResult grown = train("llama-train", 3, b, "STAND_IN_PRECOMPILE=1");
  ASSERT_EQ(grown.code, 0) << grown.all();
  EXPECT_TRUE(contains(grown.err, "recorded profile llama-train: 3 compiled graphs (1 new)"))
      << grown.err;
  EXPECT_FALSE(contains(grown.err, nothing_new)) << grown.err;
}

}  // namespace
}  // namespace neuron_cache
