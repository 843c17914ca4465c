// Issue 22, "Diagnoses that name the cause" and "Exit codes that mean what docs/commands.md says":
// the tool as a first-day user meets it (no token, a repo that does not exist, Ctrl-C, a failed
// compile, an unwritable cache, offline), driven as a user's shell drives it.

#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

class DiagnosesCliTest : public PipelineCliTest {
 protected:
  // Runs `args` in the background as a terminal's job (its own process group), waits until a
  // compile holds its lock in the cache, sends `signal` to the group as Ctrl-C does, and
  // returns what the shell saw: the exit status and stderr.
  // `root` is the run's own cache: a lock an earlier interrupted run left would end the wait.
  ToolResult interrupted(const std::string& args, const std::string& signal, const fs::path& root) {
    testing::ToolRunner runner(work.path(), home.path(), endpoint, root);
    fs::path err = work / "interrupted-stderr.txt";
    std::string script = "set -m; (" + runner.command(args, "STAND_IN_DELAY=60") +
                         " >/dev/null 2>" + quoted(err) + ") & pid=$!; for i in $(seq 600); do " +
                         "find " + quoted(root) +
                         " -name model.hlo_module.pb.lock 2>/dev/null | grep -q . && break; "
                         "sleep 0.1; done; kill -" +
                         signal + " -- -$pid; wait $pid; exit $?";
    ToolResult result;
    result.code = testing::run_command("bash -c " + shell_quoted(script), &result.out);
    result.err = fs::exists(err) ? read_file(err) : "";
    return result;
  }

  static std::string shell_quoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
};

// A manifest of kLlama at its Hub commit with its model type: keyed without asking the Hub.
ManifestSpec pinned_spec(const std::string& sha) {
  ManifestSpec spec;
  spec.revisions[kLlama] = sha;
  spec.model_types[kLlama] = "llama";
  spec.confs = {{"llama-bs1", 1, 128}};
  return spec;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST_F(DiagnosesCliTest, CtrlCSaysWhatStaysAndExits130) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult run = interrupted("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                               "INT", work / "cache-int");
  EXPECT_EQ(run.code, 130) << run.all();
  EXPECT_EQ(occurrences(run.err, "neuron-cache: interrupted (SIGINT): "), 1u) << run.err;
  EXPECT_TRUE(contains(run.err, "files downloaded whole are kept and reused by the next run"))
      << run.err;

  ToolResult term = interrupted("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                                "TERM", work / "cache-term");
  EXPECT_EQ(term.code, 143) << term.all();
  EXPECT_EQ(occurrences(term.err, "neuron-cache: interrupted (SIGTERM): "), 1u) << term.err;
}

TEST_F(DiagnosesCliTest, AFailedCompilePointsAtAModelLogThatOutlivesTheRun) {
  ManifestSpec spec;
  Conf bad{"bad", 1, 256};
  spec.confs = {bad};
  fs::path manifest = write_manifest(spec);
  fs::path out = work / "out";
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(out),
                       "STAND_IN_FAIL=sequence_length=256");
  EXPECT_EQ(ci.code, 1) << ci.all();
  fs::path kept = out / "bad.model.log";
  EXPECT_TRUE(contains(ci.err, "see " + kept.string())) << ci.all();
  EXPECT_FALSE(contains(ci.err, "neuron-cache-work")) << "a path deleted with the run: " << ci.err;
  ASSERT_TRUE(fs::is_regular_file(kept)) << ci.all();
  EXPECT_TRUE(contains(read_file(kept), "ERROR: stand-in compilation of " + context_module(bad)))
      << read_file(kept);
}

// No token anywhere and a repo the Hub will not show: the tool knows no token was set, so it
// says that, not that the repo "does not exist"; the push sends nothing and says why.
TEST_F(DiagnosesCliTest, NoTokenIsNamedAsTheCause) {
  token = "";
  ManifestSpec spec;
  spec.cache_repo = "acme/private-cache";
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  server.clear_log();
  ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  EXPECT_EQ(ci.code, 0) << ci.all();
  EXPECT_TRUE(contains(ci.all(), "no Hugging Face token: ")) << ci.all();
  EXPECT_TRUE(contains(ci.all(), "set HF_TOKEN (or HF_TOKEN_PATH, a token file)")) << ci.all();
  EXPECT_FALSE(contains(ci.all(), "`token` input")) << "the CLI is not told of the Action's inputs";
  EXPECT_TRUE(contains(ci.all(), "a private repo cannot be read and a push needs a write token"))
      << ci.all();
  EXPECT_FALSE(contains(ci.all(), "does not exist")) << ci.all();
  EXPECT_TRUE(contains(ci.all(), "push skipped: no Hugging Face token")) << ci.all();
  EXPECT_EQ(count(server.access_log(), is_write), 0u) << "a push without a token sends nothing";
}

// A token the Hub refuses (401) is called invalid, whatever repo was asked.
TEST_F(DiagnosesCliTest, ARefusedTokenIsCalledInvalid) {
  token = "hf_revoked_token_0000";
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  ToolResult plan = tool("plan " + quoted(write_manifest(spec)));
  EXPECT_EQ(plan.code, 0) << plan.all();
  EXPECT_TRUE(contains(plan.all(), "the Hub refused the token (invalid, expired or revoked)"))
      << plan.all();
  EXPECT_FALSE(contains(plan.all(), "does not exist")) << plan.all();
  EXPECT_FALSE(contains(plan.all(), token)) << "a token is never printed";
}

// A write token and a repo that does not exist: the plan and the push say how to create it, and
// whether the repo's namespace is one the token can write to.
TEST_F(DiagnosesCliTest, AMissingRepoSuggestsCreatingIt) {
  ManifestSpec spec;
  spec.cache_repo = "acme/new-cache";
  spec.confs = {{"llama-bs1", 1, 128}};
  ToolResult ci =
      tool("ci " + quoted(write_manifest(spec)) + " --output-dir " + quoted(work / "out"));
  EXPECT_EQ(ci.code, 0) << ci.all();
  EXPECT_TRUE(contains(ci.all(), "push failed: ")) << ci.all();
  EXPECT_TRUE(contains(ci.all(), "create it with `neuron-cache create -n acme/new-cache`"))
      << ci.all();
  EXPECT_FALSE(contains(ci.all(), "not one of the token's namespaces")) << ci.all();

  spec.cache_repo = "someone-else/cache";
  ToolResult foreign = tool("ci " + quoted(write_manifest(spec, "foreign.yaml")) +
                            " --output-dir " + quoted(work / "out"));
  EXPECT_EQ(foreign.code, 0) << foreign.all();
  EXPECT_TRUE(contains(foreign.all(), "push failed: ")) << foreign.all();
  EXPECT_TRUE(contains(foreign.all(),
                       "\"someone-else\" is not one of the token's namespaces (alice, acme)"))
      << foreign.all();
}

// The local cache is not writable: one line that says what to do, exit 1; not "Permission
// denied" once per configuration and a fallback to compiling that would fail the same way.
TEST_F(DiagnosesCliTest, AnUnwritableCacheFailsWithOneLine) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  fs::path manifest = write_manifest(spec);
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out")).code, 0);
  fs::path locked = work / "locked-cache";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read |
                              fs::perms::others_exec);
  if (geteuid() == 0) {
    // root passes every mode check: drop the capability that lets it, as a CI user lacks it.
    if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "root without setpriv";
    wrapper = "/usr/bin/setpriv --bounding-set -dac_override,-dac_read_search";
  }
  ToolResult prefetch = tool("prefetch " + quoted(manifest), "", locked);
  EXPECT_EQ(prefetch.code, 1) << prefetch.all();
  EXPECT_EQ(occurrences(prefetch.all(), "Permission denied"), 1u) << prefetch.all();
  EXPECT_TRUE(contains(prefetch.err, "neuron-cache: error: ")) << prefetch.all();
  EXPECT_TRUE(contains(prefetch.err, "give this user read and write access to that folder"))
      << prefetch.all();
  EXPECT_FALSE(contains(prefetch.all(), "must be compiled")) << prefetch.all();

  // A miss: the compile step stops at the first configuration, not one line per configuration.
  ManifestSpec misses;
  misses.confs = {{"llama-bs4", 4, 128}, {"llama-bs8", 8, 128}};
  size_t before = calls();
  ToolResult ci = tool("ci " + quoted(write_manifest(misses, "misses.yaml")) + " --output-dir " +
                           quoted(work / "out-locked"),
                       "", locked);
  EXPECT_EQ(ci.code, 1) << ci.all();
  EXPECT_EQ(occurrences(ci.all(), "Permission denied"), 1u) << ci.all();
  EXPECT_EQ(calls(), before) << "nothing was compiled into a cache that cannot take it";
}

// A disk that refuses a write while downloading (a file size limit stands in for a full one:
// ulimit -f gives EFBIG, with SIGXFSZ ignored as a shell's trap does) fails the prefetch with one
// line, exit 1, naming what to raise.
TEST_F(DiagnosesCliTest, AFullDiskFailsThePrefetchWithOneLine) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  fs::path manifest = write_manifest(spec);
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                 "STAND_IN_NEFF_BYTES=400000")
                .code,
            0);
  testing::ToolRunner runner(work.path(), home.path(), endpoint, work / "small-disk");
  std::string line =
      "trap '' XFSZ; ulimit -f 200; " + runner.command("prefetch " + quoted(manifest));
  ToolResult full;
  full.code = testing::run_command("bash -c " + shell_quoted(line), &full.out);
  EXPECT_EQ(full.code, 1) << full.out;
  EXPECT_EQ(occurrences(full.out, "neuron-cache: error: "), 1u) << full.out;
  EXPECT_TRUE(contains(full.out,
                       "file size limit (ulimit -f) or the filesystem's is below this "
                       "file's size: raise the limit"))
      << full.out;
  EXPECT_FALSE(contains(full.out, "warning: could not fetch")) << full.out;
  EXPECT_FALSE(contains(full.out, "is the disk full?")) << full.out;
}

// HF_HUB_OFFLINE with an unpinned revision on a fresh cache: as for an unreachable Hub, each
// configuration is compiled unkeyed with a warning, never an input error (exit 2).
TEST_F(DiagnosesCliTest, DeliberateOfflineFailsNoHarderThanAnOutage) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult offline =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), "HF_HUB_OFFLINE=1");
  EXPECT_EQ(offline.code, 0) << offline.all();
  EXPECT_EQ(calls(), 1u) << offline.all();
  EXPECT_TRUE(contains(offline.err, "has no cache key")) << offline.all();
  EXPECT_TRUE(contains(offline.err, "HF_HUB_OFFLINE")) << offline.all();
  ToolResult down = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out2"),
                         "HF_ENDPOINT=http://127.0.0.1:9", work / "cache-down");
  EXPECT_EQ(down.code, offline.code) << down.all();
}

// HF_HUB_OFFLINE, one model at `main` (no earlier run remembered its commit) and one pinned: plan
// and prefetch compile nothing, so they never say "compiled"; each message names the cause and
// the next step once, and the unkeyed row shows no key.
TEST_F(DiagnosesCliTest, OfflinePlanAndPrefetchWordAnUnkeyedConfigurationForWhatTheyDo) {
  ManifestSpec spec;
  spec.revisions[kQwen] = "0123456789abcdef0123456789abcdef01234567";
  spec.model_types[kQwen] = "qwen2";
  spec.confs = {{"llama-bs1", 1, 128}, {"qwen-bs1", 1, 128, 2, "bf16", kQwen}};
  fs::path manifest = write_manifest(spec);
  const std::string warning = "warning: llama-bs1 has no cache key: " + std::string(kLlama) +
                              "@main could not be resolved (" + manifest.string() + ":";
  const std::string cause_and_advice =
      "the Hub is offline (HF_HUB_OFFLINE) and no earlier run remembered its commit): not looked "
      "up in the cache; a run that can read the model from the Hub keys it, or pin the model's "
      "revision to a 40-hex commit and set its model_type in the manifest\n";
  for (const char* command : {"plan", "prefetch"}) {
    ToolResult run = tool(std::string(command) + " " + quoted(manifest), "HF_HUB_OFFLINE=1");
    ASSERT_EQ(run.code, 0) << run.all();
    EXPECT_EQ(occurrences(run.err, warning), 1u) << run.all();
    EXPECT_EQ(occurrences(run.err, cause_and_advice), 1u) << run.all();
    // Each message once: the warning, then (plan) the row's reason, which gives no advice.
    EXPECT_EQ(occurrences(run.all(), "40-hex"), 1u) << run.all();
    EXPECT_EQ(occurrences(run.err, "HF_HUB_OFFLINE) and no earlier run"), 1u) << run.all();
    EXPECT_LE(occurrences(run.out, "HF_HUB_OFFLINE) and no earlier run"), 1u) << run.all();
    EXPECT_FALSE(contains(run.all(), "compiled")) << run.all();
    EXPECT_FALSE(contains(run.all(), "was not asked")) << run.all();
  }

  ToolResult plan = tool("plan " + quoted(manifest), "HF_HUB_OFFLINE=1");
  EXPECT_TRUE(contains(plan.out, "\ncompile  llama-bs1  no key\n         not keyed: " +
                                     std::string(kLlama) + "@main could not be resolved ("))
      << plan.out;
  EXPECT_TRUE(contains(plan.out, "\ncompile  qwen-bs1   key ")) << plan.out;
  EXPECT_TRUE(contains(plan.out, "no configuration of " + std::string(kQwen) +
                                     " is cached locally (HF_HUB_OFFLINE is set)\n"))
      << plan.out;
  EXPECT_TRUE(contains(plan.out, "2 to compile (Hub not checked: HF_HUB_OFFLINE is set)\n"))
      << plan.out;

  ToolResult prefetch = tool("prefetch " + quoted(manifest), "HF_HUB_OFFLINE=1");
  EXPECT_TRUE(contains(prefetch.out,
                       "\n1 configuration is not complete locally, and the cache store was not "
                       "checked (HF_HUB_OFFLINE is set): a run that can read the store may find "
                       "it\n1 configuration has no cache key and was not looked up (see the "
                       "warning above)\n"))
      << prefetch.out;
  EXPECT_TRUE(server.access_log().empty()) << "offline: no request";
}

// HF_HUB_OFFLINE speaks of the Hub only: a shared folder store is read and written under
// --strict; and under --strict a push skipped for any reason (here: the Hub offline) fails.
TEST_F(DiagnosesCliTest, HubOfflineLeavesOtherStoresOnlineAndStrictFailsASkippedPush) {
  fs::path store = work / "store";
  fs::create_directories(store);
  ASSERT_EQ(tool("create -n file://" + store.string()).code, 0);
  ManifestSpec spec = pinned_spec(model_sha(kLlama));
  spec.cache_repo = "file://" + store.string();
  fs::path manifest = write_manifest(spec);
  ToolResult folder =
      tool("ci --strict " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
           "HF_HUB_OFFLINE=1");
  EXPECT_EQ(folder.code, 0) << folder.all();
  EXPECT_TRUE(contains(folder.out, "pushed 1 configuration")) << folder.all();
  EXPECT_FALSE(contains(folder.all(), "push skipped")) << folder.all();

  ManifestSpec hub = pinned_spec(model_sha(kLlama));
  ToolResult strict = tool("ci --strict " + quoted(write_manifest(hub, "hub.yaml")) +
                               " --output-dir " + quoted(work / "out"),
                           "HF_HUB_OFFLINE=1", work / "cache-hub");
  EXPECT_EQ(strict.code, 1) << strict.all();
  // The push's reason, and that --strict made it an error (main words it "an error under
  // --strict").
  EXPECT_TRUE(contains(strict.err, "push to acme/neuron-cache skipped: offline")) << strict.all();
  EXPECT_TRUE(contains(strict.err, "--strict")) << strict.all();
  ToolResult lenient = tool(
      "ci " + quoted(write_manifest(hub, "hub.yaml")) + " --output-dir " + quoted(work / "out"),
      "HF_HUB_OFFLINE=1", work / "cache-hub2");
  EXPECT_EQ(lenient.code, 0) << lenient.all();
  EXPECT_TRUE(contains(lenient.all(), "push skipped: offline")) << lenient.all();
}

}  // namespace
}  // namespace neuron_cache
