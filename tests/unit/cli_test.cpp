// The neuron-cache tool as a user runs it: exit codes, wording, JSON fields, secrets.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/process/process.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::contains;
using testing::Kind;
using testing::make_entry;
using testing::TempDir;
using testing::ToolRun;
using testing::write_file;
using json = nlohmann::json;

// Runs the tool with a clean environment plus `env` ("NAME=value ..."), so the machine's own
// HF_TOKEN or cache settings never leak into a test.
ToolRun tool(const std::string& args, const std::string& env = "",
             const std::string& stdin_file = "", const std::string& wrapper = "") {
  std::string command = std::string(testing::kCleanEnv) +
                        " PATH=/usr/bin:/bin HOME=/nonexistent-home " + env + " " + wrapper +
                        testing::tool_path() + " " + args;
  if (!stdin_file.empty()) command += " < '" + stdin_file + "'";
  ToolRun run{};
  run.code = testing::run_command(command, &run.output);
  return run;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_entry(cache.path(), "MODULE_11+d7cde3b5", Kind::Success);
    make_entry(cache.path(), "MODULE_12+d7cde3b5", Kind::Failed);
    make_entry(cache.path(), "MODULE_13+d7cde3b5", Kind::Locked);
    make_entry(cache.path(), "MODULE_14+d7cde3b5", Kind::Empty);
    make_entry(cache.path(), "MODULE_15+d7cde3b5", Kind::Success, "neuronxcc-2.15.128.0+56dc5a86");
  }
  std::string dir() const { return "--cache-dir '" + cache.path().string() + "'"; }
  TempDir cache;
};

TEST_F(CliTest, EveryCommandHasHelp) {
  for (const char* command : {"", "status", "cleanup", "inspect", "config", "config show"}) {
    ToolRun run = tool(std::string(command) + " --help");
    EXPECT_EQ(run.code, 0) << command << run.output;
    EXPECT_TRUE(contains(run.output, "Usage")) << command << run.output;
  }
  EXPECT_TRUE(contains(tool("cleanup --help").output, "--old-versions"));
  EXPECT_TRUE(contains(tool("inspect --help").output, "--flags"));
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(tool("status --no-such-option").code, 2);
  EXPECT_EQ(tool("no-such-command").code, 2);
  EXPECT_EQ(tool("").code, 2);
}

// Issue 22: a typo names the word and the closest command, not "A subcommand is required".
TEST_F(CliTest, AMisspelledCommandIsNamedWithTheClosestOne) {
  ToolRun run = tool("plna neuron-cache.yaml");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "unknown command \"plna\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "did you mean `neuron-cache plan`?")) << run.output;
  EXPECT_FALSE(contains(run.output, "A subcommand is required")) << run.output;
  ToolRun far = tool("--compiler-version 2.21 xyzzy");
  EXPECT_EQ(far.code, 2) << far.output;
  EXPECT_TRUE(contains(far.output, "unknown command \"xyzzy\"")) << far.output;
  EXPECT_FALSE(contains(far.output, "did you mean")) << far.output;
}

// Issue 22: a manifest path that names nothing is an input error (2), like a typo inside it.
TEST_F(CliTest, AMissingManifestIsAnInputError) {
  for (const char* command : {"plan", "prefetch", "ci"}) {
    ToolRun run = tool(std::string(command) + " /nonexistent/neuron-cache.yaml");
    EXPECT_EQ(run.code, 2) << command << run.output;
    EXPECT_TRUE(contains(run.output, "/nonexistent/neuron-cache.yaml does not exist"))
        << run.output;
  }
}

TEST_F(CliTest, StatusCountsEntriesLikeOptimumNeuron) {
  ToolRun run = tool("status " + dir() + " --compiler-version 2.21.33363.0");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "Cache path: " + cache.path().string()));
  EXPECT_TRUE(contains(run.output, "  - neuronxcc-2.21.33363.0+82129205 (current)"));
  EXPECT_TRUE(contains(run.output, "  - neuronxcc-2.15.128.0+56dc5a86 (old)"));
  EXPECT_TRUE(contains(run.output, "  Success:      2  (")) << run.output;
  EXPECT_TRUE(contains(run.output, "  Failed:       1  ("));
  EXPECT_TRUE(contains(run.output, "  Locked:       1  ("));
  EXPECT_TRUE(contains(run.output, "  Empty:        1  ("));
  EXPECT_TRUE(contains(run.output, "Old compiler version data:"));
}

TEST_F(CliTest, StatusJsonHasCountsAndSizes) {
  ToolRun run = tool("status --json " + dir() + " --compiler-version 2.21.33363.0");
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["entries_by_state"]["success"]["count"], 2);
  EXPECT_EQ(doc["entries_by_state"]["failed"]["count"], 1);
  EXPECT_EQ(doc["compiler_versions"].size(), 2u);
  EXPECT_EQ(doc["entries"].size(), 5u);
  EXPECT_GT(doc["total_size_bytes"].get<uint64_t>(), 0u);
}

// status of a large cache: each MODULE_ folder is opened, listed and its files stat'ed once
// (with its flags file read), never listed again for its size (13 stat calls per folder before).
TEST_F(CliTest, StatusStatsEachFileOfAFolderOnce) {
  if (!testing::strace_works()) GTEST_SKIP() << "strace cannot run here";
  constexpr int kFolders = 300;
  for (int i = 0; i < kFolders; ++i)
    make_entry(cache.path(), "MODULE_" + std::to_string(5000 + i) + "+d7cde3b5", Kind::Success);
  std::filesystem::path summary =
      cache.path().parent_path() / (cache.path().filename().string() + ".strace");
  ToolRun run = tool("status " + dir() + " --compiler-version 2.21.33363.0", "", "",
                     "strace -f -c -o '" + summary.string() + "' ");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "  Success:    " + std::to_string(kFolders + 2))) << run.output;
  size_t stats = testing::stat_calls(testing::read_file(summary));
  std::filesystem::remove(summary);
  // Per folder: its name in the compiler folder's listing, its four files, the flags file read.
  EXPECT_LE(stats, (kFolders + 5) * 6u + 150) << stats;
}

TEST_F(CliTest, StatusOfAMissingCacheSaysSo) {
  ToolRun run = tool("status --cache-dir '" + (cache / "absent").string() + "'");
  EXPECT_EQ(run.code, 0);
  EXPECT_TRUE(contains(run.output, "does not exist yet"));
}

TEST_F(CliTest, StatusReadsTheCacheFromTheEnvironment) {
  ToolRun run = tool("status --json", "NEURON_COMPILE_CACHE_URL='" + cache.path().string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(pyjson::parse(run.output)["cache_path"], cache.path().string());
}

// Public scripts set NEURON_COMPILE_CACHE_URL=file:///path: the same folder as /path, never a
// relative folder named "file:" (a space in the path comes percent-encoded).
TEST_F(CliTest, StatusReadsAFileUrlFromTheEnvironment) {
  std::filesystem::path spaced = cache / "with space";
  make_entry(spaced, "MODULE_21+d7cde3b5", Kind::Success);
  std::string encoded = (cache.path() / "with%20space").string();
  ToolRun run = tool("status --json --compiler-version 2.21.33363.0",
                     "NEURON_COMPILE_CACHE_URL='file://" + encoded + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["cache_path"], spaced.string());
  EXPECT_EQ(doc["entries_by_state"]["success"]["count"], 1) << run.output;

  ToolRun remote = tool("status", "NEURON_COMPILE_CACHE_URL=file://fileserver/cache");
  EXPECT_EQ(remote.code, 2) << remote.output;
  EXPECT_TRUE(contains(remote.output, "NEURON_COMPILE_CACHE_URL is the file URL")) << remote.output;
  EXPECT_TRUE(contains(remote.output, "set it to a local path")) << remote.output;
}

TEST_F(CliTest, StatusRefusesAnS3Url) {
  ToolRun run = tool("status", "NEURON_COMPILE_CACHE_URL=s3://bucket/cache");
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(contains(run.output, "S3 URL")) << run.output;
}

TEST_F(CliTest, StatusOnAFileIsAnOperationalError) {
  write_file(cache / "plain-file", "x");
  ToolRun run = tool("status --cache-dir '" + (cache / "plain-file").string() + "'");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "not a directory"));
}

TEST_F(CliTest, CleanupRemovesFailedEntriesAndStaleLocks) {
  ToolRun dry = tool("cleanup --dry-run " + dir());
  ASSERT_EQ(dry.code, 0) << dry.output;
  EXPECT_TRUE(
      contains(dry.output, "[DRY RUN] Removed 1 failed entries. Removed 1 stale lock files."));
  EXPECT_TRUE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_12+d7cde3b5"));
  ToolRun run = tool("cleanup " + dir());
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "Removed 1 failed entries. Removed 1 stale lock files. Freed"));
  EXPECT_FALSE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_12+d7cde3b5"));
  EXPECT_FALSE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_13+d7cde3b5" /
                                       "model.hlo_module.pb.lock"));
  EXPECT_TRUE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_14+d7cde3b5"));
  EXPECT_TRUE(contains(tool("cleanup " + dir()).output, "Nothing to clean up. Freed 0 B."));
}

TEST_F(CliTest, CleanupOldVersionsNeedsTheCompilerVersion) {
  ToolRun run = tool("cleanup --old-versions " + dir());
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(contains(run.output, "--compiler-version"));
  run = tool("cleanup --old-versions --json " + dir() + " --compiler-version 2.21.33363.0");
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["old_versions_removed"][0], "neuronxcc-2.15.128.0+56dc5a86");
  EXPECT_FALSE(std::filesystem::exists(cache / "neuronxcc-2.15.128.0+56dc5a86"));
}

TEST_F(CliTest, CleanupKeepsLocksWhileNeuronxCcRuns) {
  TempDir bin;
  // The script must stay the running program (no exec) so its command name is neuronx-cc.
  write_file(bin / "neuronx-cc",
             "#!/bin/sh\ni=0\nwhile [ $i -lt 100 ]; do sleep 0.2; i=$((i+1)); done\n");
  chmod((bin / "neuronx-cc").c_str(), 0755);
  std::string pid;
  testing::run_command("'" + (bin / "neuronx-cc").string() + "' >/dev/null 2>&1 & echo $!", &pid);
  for (int i = 0; i < 100 && !process::is_process_running("neuronx-cc"); ++i) usleep(20000);
  ToolRun run = tool("cleanup " + dir());
  testing::run_command("kill " + pid);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(
      contains(run.output, "Skipped lock cleanup: neuronx-cc processes are currently running"))
      << run.output;
  EXPECT_TRUE(std::filesystem::exists(cache / testing::kCompilerDir / "MODULE_13+d7cde3b5" /
                                      "model.hlo_module.pb.lock"));
}

TEST_F(CliTest, CleanupWipe) {
  ToolRun run = tool("cleanup --wipe " + dir());
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "Cache wiped. Freed"));
  EXPECT_FALSE(std::filesystem::exists(cache.path()));
}

TEST_F(CliTest, InspectEntryFromFileAndStdinGivesTheVectorValues) {
  auto vectors = pyjson::parse(
      testing::read_file(std::string(NEURON_CACHE_VECTORS_DIR) + "/registry-entries.json"));
  const auto& vector = vectors[0];
  write_file(cache / "entry.json", vector["entry"].dump());
  for (const std::string& args : {"inspect --json '" + (cache / "entry.json").string() + "'",
                                  std::string("inspect --json -")}) {
    ToolRun run = tool(args, "", args.ends_with("-") ? (cache / "entry.json").string() : "");
    ASSERT_EQ(run.code, 0) << run.output;
    auto doc = pyjson::parse(run.output);
    EXPECT_EQ(doc["serialized"], vector["serialized"]);
    EXPECT_EQ(doc["entry_hash"], vector["entry_hash"]);
    EXPECT_EQ(doc["arch_digest"], vector["arch_digest"]);
  }
  ToolRun text = tool("inspect '" + (cache / "entry.json").string() + "'");
  EXPECT_TRUE(contains(text.output, "entry hash: " + vector["entry_hash"].get<std::string>()));
}

// A diffusion entry's digest hashes the original model's component config.json files, which the
// entry does not hold: inspect says so instead of printing a digest no optimum-neuron computes.
TEST_F(CliTest, InspectMultiModelEntryHasNoDigest) {
  auto vectors = pyjson::parse(
      testing::read_file(std::string(NEURON_CACHE_VECTORS_DIR) + "/registry-entries.json"));
  const json* multi = nullptr;
  for (const auto& vector : vectors) {
    if (vector["entry"]["_entry_class"] == "MultiModelCacheEntry") multi = &vector;
  }
  ASSERT_NE(multi, nullptr);
  write_file(cache / "multi.json", (*multi)["entry"].dump());
  ToolRun run = tool("inspect --json '" + (cache / "multi.json").string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["entry_hash"], (*multi)["entry_hash"]);
  EXPECT_TRUE(doc.contains("arch_digest") && doc["arch_digest"].is_null()) << run.output;
  EXPECT_TRUE(contains(doc["arch_digest_reason"].get<std::string>(), "cannot be computed"));
  ToolRun text = tool("inspect '" + (cache / "multi.json").string() + "'");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "arch digest: unknown (")) << text.output;
  EXPECT_TRUE(contains(text.output, "<arch digest of the original model>/" +
                                        (*multi)["entry_hash"].get<std::string>() + ".json"));
  EXPECT_FALSE(contains(text.output, (*multi)["arch_digest"].get<std::string>())) << text.output;
}

TEST_F(CliTest, InspectRejectsBadEntriesWithAReason) {
  write_file(cache / "broken.json", "{\"a\": 1,\n  \"b\": }");
  ToolRun run = tool("inspect '" + (cache / "broken.json").string() + "'");
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(contains(run.output, "line 2")) << run.output;
  write_file(cache / "legacy.json", "{\"model_type\": \"llama\", \"neuron\": {\"task\": \"x\"}}");
  run = tool("inspect '" + (cache / "legacy.json").string() + "'");
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(contains(run.output, "_entry_class")) << run.output;
  EXPECT_EQ(tool("inspect").code, 2);
}

TEST_F(CliTest, InspectFlags) {
  ToolRun run =
      tool("inspect --json --flags '[\"--model-type=transformer\", \"--auto-cast=none\"]'");
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["flags_key"], "d7cde3b5");
  EXPECT_EQ(doc["legacy_flags_key"], "2c2d707e");
  EXPECT_EQ(doc["compile_flags_json"], "[\"--model-type=transformer\", \"--auto-cast=none\"]");
  EXPECT_EQ(tool("inspect --flags '{\"not\": \"a list\"}'").code, 2);
}

TEST_F(CliTest, InspectModuleFolderExplainsItsState) {
  ToolRun run =
      tool("inspect '" + (cache / testing::kCompilerDir / "MODULE_12+d7cde3b5").string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "state: FAILED"));
  EXPECT_TRUE(contains(run.output, "model.log is present without model.neff"));
  EXPECT_TRUE(contains(run.output, "compile_flags.json hashes to d7cde3b5 (matches"));
  run = tool("inspect --json '" + (cache / testing::kCompilerDir / "MODULE_11+d7cde3b5").string() +
             "'");
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["state"], "success");
  EXPECT_EQ(doc["graph_key"], "11");
  EXPECT_EQ(doc["flags_key"], "d7cde3b5");
}

TEST_F(CliTest, ConfigShowGivesOriginsAndMasksTheToken) {
  const std::string token = "hf_abcdefghijklmnopqrstuvwxyz1234";
  ToolRun run = tool("config show", "HF_TOKEN=" + token + " CUSTOM_CACHE_REPO=me/cache");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "(HF_TOKEN) token = hf_****1234"));
  EXPECT_TRUE(contains(run.output, "(CUSTOM_CACHE_REPO) cache_repo = me/cache"));
  EXPECT_TRUE(contains(run.output, "(default) cache_dir = /var/tmp/neuron-compile-cache"));
  EXPECT_FALSE(contains(run.output, token));
  ToolRun json = tool("config show --json", "HF_TOKEN=" + token);
  EXPECT_FALSE(contains(json.output, token));
  EXPECT_EQ(pyjson::parse(json.output)["token"]["value"], "hf_****1234");
}

// Every --json output is an object with a format_version; config show's numbers and flags are
// JSON numbers and booleans (a script compares 15000, not "15000"), an unset one is null.
TEST_F(CliTest, JsonOutputsCarryAFormatVersionAndTypedValues) {
  ToolRun config = tool("config show --json", "NEURON_CACHE_TIMEOUT_MS=15000 HF_HUB_OFFLINE=1");
  ASSERT_EQ(config.code, 0) << config.output;
  json doc = pyjson::parse(config.output);
  EXPECT_EQ(doc["format_version"], 1);
  EXPECT_EQ(doc["timeout_ms"]["value"], 15000) << doc["timeout_ms"];
  EXPECT_EQ(doc["offline"]["value"], true) << doc["offline"];
  EXPECT_EQ(doc["store_offline"]["value"], false) << doc["store_offline"];
  EXPECT_TRUE(doc["retry_base_ms"]["value"].is_null()) << doc["retry_base_ms"];
  EXPECT_TRUE(doc["cache_dir"]["value"].is_string());
  for (const char* command : {"status --json", "cleanup --dry-run --json",
                              "inspect --json --flags '[\"--target=trn1\"]'"}) {
    ToolRun run = tool(command);
    ASSERT_EQ(run.code, 0) << command << ": " << run.output;
    EXPECT_EQ(pyjson::parse(run.output)["format_version"], 1) << command;
  }
}

// A password in HF_ENDPOINT is never shown: the endpoint is refused, and says how to fix it.
TEST_F(CliTest, ConfigShowRefusesAnEndpointWithCredentials) {
  for (const char* command : {"config show", "config show --json"}) {
    ToolRun run =
        tool(std::string(command) + " 2>&1", "HF_ENDPOINT=http://alice:s3cr3t-word@hub.local");
    EXPECT_EQ(run.code, 2) << run.output;
    EXPECT_TRUE(contains(run.output, "HF_ENDPOINT holds credentials")) << run.output;
    EXPECT_FALSE(contains(run.output, "s3cr3t")) << run.output;
  }
}

}  // namespace
}  // namespace neuron_cache
