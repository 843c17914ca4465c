// Issue 22, "Diagnoses that name the cause" and "Exit codes that mean what the README says": the
// tool as a first-day user meets it (no token, a repo that does not exist, Ctrl-C, a failed
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

}  // namespace
}  // namespace neuron_cache
