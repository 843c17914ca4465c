// run_command: exit codes, signals, start failures, the child's environment and log, and runs
// from several threads at once; log_tail and strip_cache_flags.
#include "neuron_cache/compile/runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/compile_flags.h"
#include "test_support.h"

namespace neuron_cache::compile {
namespace {

using neuron_cache::config::Redactor;
using neuron_cache::config::StreamRedactor;

using testing::contains;
using testing::read_file;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

CommandRun shell(const std::string& script, const fs::path& log) {
  CommandRun run;
  run.argv = {"sh", "-c", script};
  run.log_file = log;
  return run;
}

TEST(Redactor, MasksEverySecretAndIgnoresShortValues) {
  config::Redactor redact({"hf_secret_token_1234", "1"});
  EXPECT_EQ(redact("a hf_secret_token_1234 b hf_secret_token_1234"),
            "a secret_****1234 b secret_****1234");
  EXPECT_EQ(redact("1 + 1"), "1 + 1");
}

TEST(Redactor, StreamFindsASecretSplitAcrossChunks) {
  const std::string secret = "hf_secret_token_1234";
  for (size_t cut = 1; cut < secret.size(); ++cut) {
    config::StreamRedactor stream(config::Redactor({secret}));
    std::string out = stream.feed("x=" + secret.substr(0, cut));
    out += stream.feed(secret.substr(cut) + "\nhf_se");
    out += stream.finish();
    EXPECT_EQ(out, "x=secret_****1234\nhf_se") << "cut at " << cut;
  }
}

// Another case of a secret is the secret; so is a long beginning of it, the token minus its last
// character above all. A short beginning ("hf_se") is not secret material and stays.
TEST(Redactor, MasksOtherCasesAndLongBeginnings) {
  const std::string secret = "hf_secret_token_1234";
  config::Redactor redact({secret, "hf_secret_token_5678_longer"});
  EXPECT_EQ(redact("a HF_SECRET_TOKEN_1234 b Hf_Secret_Token_1234"),
            "a secret_****1234 b secret_****1234");
  EXPECT_EQ(redact("cut " + secret.substr(0, secret.size() - 1) + "\n"), "cut secret_****1234\n");
  EXPECT_EQ(redact("half " + secret.substr(0, 10) + "!"), "half secret_****1234!");
  EXPECT_EQ(redact("hf_secret! hf_se"), "hf_secret! hf_se");
  // A whole secret is itself, not the beginning of another that shares its start.
  EXPECT_EQ(redact("hf_secret_token_5678_longer hf_secret_token_1234"),
            "secret_****nger secret_****1234");
}

TEST(Redactor, StreamMasksABeginningHeldBackAtTheEnd) {
  const std::string secret = "hf_secret_token_1234";
  for (const std::string& copy : {secret, std::string("HF_SECRET_TOKEN_1234")}) {
    for (size_t cut = 1; cut < copy.size(); ++cut) {
      config::StreamRedactor stream(config::Redactor({secret}));
      std::string out = stream.feed("x=" + copy.substr(0, cut));
      out += stream.feed(copy.substr(cut, copy.size() - 1 - cut));
      out += stream.finish();
      EXPECT_EQ(out, "x=secret_****1234") << copy << " cut at " << cut;
    }
  }
}

// A mask says what it hides: the label its reader gave the secret, else the variable it came in.
TEST(Redactor, AMaskNamesTheKindOfSecret) {
  config::Redactor redact({"hf_secret_token_1234", "wJalrXUtnFEMI/K7MDENG/EXAMPLEKEY", "short-one"},
                          {{"hf_secret_token_1234", config::kHubTokenLabel},
                           {"wJalrXUtnFEMI/K7MDENG/EXAMPLEKEY", config::kAwsSecretLabel}});
  EXPECT_EQ(redact("hf_secret_token_1234 wJalrXUtnFEMI/K7MDENG/EXAMPLEKEY short-one"),
            "hf_****1234 aws_secret_****EKEY secret_****");
  EXPECT_EQ(config::label_of_variable("AWS_SESSION_TOKEN"), config::kAwsSessionLabel);
  EXPECT_EQ(config::label_of_variable("HF_TOKEN"), config::kHubTokenLabel);
  EXPECT_EQ(config::label_of_variable("my-Api.KEY"), "my_api_key_");
  // A reader's label wins over the variable's, whichever came first.
  config::add_secrets_named_in({{"MY_WEB_TOKEN", "web-identity-token-0042-abcdef"}});
  config::add_secret("web-identity-token-0042-abcdef", config::kWebIdentityLabel);
  config::add_secrets_named_in({{"MY_WEB_TOKEN", "web-identity-token-0042-abcdef"}});
  EXPECT_EQ(config::redact("t=web-identity-token-0042-abcdef"), "t=web_identity_token_****cdef");
}

TEST(Redactor, NamesOfSecretVariables) {
  for (const char* name : {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MY_API_KEY",
                           "db_password", "GITHUB_TOKEN", "Client_Secret"}) {
    EXPECT_TRUE(config::is_secret_name(name)) << name;
  }
  for (const char* name :
       {"HF_TOKEN_PATH", "SSH_KEY_FILE", "PATH", "HF_HOME", "NEURON_CC_FLAGS", "GPG_KEY_DIR"}) {
    EXPECT_FALSE(config::is_secret_name(name)) << name;
  }
}

TEST(Runner, MasksTokensTheCommandPrintsInTheLogAndItsTee) {
  TempDir dir;
  const std::string token = "hf_runner_secret_9876";
  CommandRun run = shell("echo \"token $HF_TOKEN\"; echo \"err $HF_TOKEN\" >&2", dir / "run.log");
  run.set_env["HF_TOKEN"] = token;
  RunOutcome ran = run_command(run);
  EXPECT_EQ(ran.exit_code, 0);
  std::string log = read_file(dir / "run.log");
  EXPECT_FALSE(contains(log, token)) << log;
  EXPECT_TRUE(contains(log, "token hf_****9876")) << log;
  EXPECT_TRUE(contains(log, "err hf_****9876")) << log;
  EXPECT_FALSE(contains(log_tail(dir / "run.log"), token));

  // Inherited, not set: masked too.
  setenv("NEURON_CACHE_TEST_TOKEN", "hf_inherited_secret_5555", 1);
  RunOutcome inherited =
      run_command(shell("echo \"$NEURON_CACHE_TEST_TOKEN\"", dir / "inherited.log"));
  unsetenv("NEURON_CACHE_TEST_TOKEN");
  EXPECT_EQ(inherited.exit_code, 0);
  EXPECT_EQ(read_file(dir / "inherited.log"), "neuron_cache_test_token_****5555\n");

  // Any variable named like a secret, whatever it says.
  CommandRun named =
      shell("echo \"$AWS_SECRET_ACCESS_KEY $MY_API_KEY $db_password\"", dir / "named.log");
  named.set_env = {{"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
                   {"MY_API_KEY", "sk-live-0123456789"},
                   {"db_password", "correct horse battery"}};
  EXPECT_EQ(run_command(named).exit_code, 0);
  EXPECT_EQ(read_file(dir / "named.log"),
            "aws_secret_****EKEY my_api_key_****6789 db_password_****tery\n");
}

TEST(Runner, ReportsTheExitCode) {
  TempDir dir;
  RunOutcome ok = run_command(shell("exit 0", dir / "ok.log"));
  EXPECT_TRUE(ok.started);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.signal, 0);
  RunOutcome failed = run_command(shell("exit 70", dir / "failed.log"));
  EXPECT_TRUE(failed.started);
  EXPECT_EQ(failed.exit_code, 70);
  EXPECT_GT(failed.seconds, 0.0) << "a failed run is timed too";
  EXPECT_LT(failed.seconds, 60.0);
}

TEST(Runner, ReportsTheSignalThatKilledIt) {
  TempDir dir;
  RunOutcome outcome = run_command(shell("kill -TERM $$; sleep 5", dir / "log"));
  EXPECT_TRUE(outcome.started);
  EXPECT_EQ(outcome.exit_code, -1);
  EXPECT_EQ(outcome.signal, SIGTERM);
}

TEST(Runner, ACommandNotFoundDoesNotStart) {
  TempDir dir;
  CommandRun run;
  run.argv = {"neuron-cache-no-such-program"};
  run.log_file = dir / "log";
  RunOutcome outcome = run_command(run);
  EXPECT_FALSE(outcome.started);
  EXPECT_EQ(outcome.exit_code, -1);
  EXPECT_TRUE(contains(outcome.start_error, "neuron-cache-no-such-program")) << outcome.start_error;
  EXPECT_TRUE(contains(outcome.start_error, "not found")) << outcome.start_error;
}

TEST(Runner, ANonExecutableFileDoesNotStart) {
  TempDir dir;
  write_file(dir / "script", "#!/bin/sh\necho hi\n");
  chmod((dir / "script").c_str(), 0644);
  CommandRun run;
  run.argv = {(dir / "script").string()};
  run.log_file = dir / "log";
  RunOutcome outcome = run_command(run);
  EXPECT_FALSE(outcome.started);
  EXPECT_TRUE(contains(outcome.start_error, "executable")) << outcome.start_error;
}

TEST(Runner, AnEmptyCommandDoesNotStart) {
  TempDir dir;
  CommandRun run;
  run.log_file = dir / "log";
  RunOutcome outcome = run_command(run);
  EXPECT_FALSE(outcome.started);
  EXPECT_FALSE(outcome.start_error.empty());
}

TEST(Runner, AnUnwritableLogDoesNotStart) {
  TempDir dir;
  RunOutcome outcome = run_command(shell("exit 0", dir / "missing-dir" / "log"));
  EXPECT_FALSE(outcome.started);
  EXPECT_TRUE(contains(outcome.start_error, "log file")) << outcome.start_error;
}

TEST(Runner, SetsAndUnsetsEnvironmentVariables) {
  TempDir dir;
  setenv("NEURON_CACHE_RUNNER_TEST_GONE", "present", 1);
  setenv("NEURON_CACHE_RUNNER_TEST_KEPT", "kept", 1);
  CommandRun run = shell(
      "echo \"set=$RUNNER_SET gone=${NEURON_CACHE_RUNNER_TEST_GONE-unset} "
      "kept=$NEURON_CACHE_RUNNER_TEST_KEPT over=$NEURON_CACHE_RUNNER_TEST_KEPT2\"",
      dir / "log");
  run.set_env = {{"RUNNER_SET", "a value with spaces"}, {"NEURON_CACHE_RUNNER_TEST_KEPT2", "x"}};
  run.unset_env = {"NEURON_CACHE_RUNNER_TEST_GONE"};
  RunOutcome outcome = run_command(run);
  unsetenv("NEURON_CACHE_RUNNER_TEST_GONE");
  unsetenv("NEURON_CACHE_RUNNER_TEST_KEPT");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.start_error;
  EXPECT_EQ(read_file(dir / "log"), "set=a value with spaces gone=unset kept=kept over=x\n");
}

TEST(Runner, FindsTheProgramThroughTheChildPath) {
  TempDir dir;
  write_file(dir / "bin" / "my-compiler", "#!/bin/sh\necho \"compiled $1\"\n");
  chmod((dir / "bin" / "my-compiler").c_str(), 0755);
  CommandRun run;
  run.argv = {"my-compiler", "graph"};
  run.set_env = {{"PATH", (dir / "bin").string() + ":/usr/bin:/bin"}};
  run.log_file = dir / "log";
  RunOutcome outcome = run_command(run);
  ASSERT_TRUE(outcome.started) << outcome.start_error;
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(read_file(dir / "log"), "compiled graph\n");
}

TEST(Runner, LogsStdoutAndStderrAndTruncatesTheLog) {
  TempDir dir;
  write_file(dir / "log", std::string(10000, 'x'));
  RunOutcome outcome = run_command(shell("echo out; echo err >&2; echo out2", dir / "log"));
  ASSERT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(read_file(dir / "log"), "out\nerr\nout2\n");
  struct stat info {};
  ASSERT_EQ(stat((dir / "log").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u & ~static_cast<unsigned>(umask(umask(0))));
}

TEST(Runner, TeeAlsoFillsTheLog) {
  TempDir dir;
  CommandRun run = shell("echo teed; echo teed-err >&2; exit 4", dir / "log");
  run.tee = true;
  RunOutcome outcome = run_command(run);
  EXPECT_EQ(outcome.exit_code, 4);
  EXPECT_EQ(read_file(dir / "log"), "teed\nteed-err\n");
}

TEST(Runner, TeeDoesNotWaitForABackgroundChildHoldingTheOutput) {
  TempDir dir;
  CommandRun run = shell("sleep 3 & echo started", dir / "log");
  run.tee = true;
  RunOutcome outcome = run_command(run);
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_LT(outcome.seconds, 2.5);
  EXPECT_EQ(read_file(dir / "log"), "started\n");
}

// A command that runs 1.5 s with a 300 ms heartbeat: beats while it runs, each with the time
// since it started (growing, within the run), whether the command prints or not; none after it
// ended, and none without an interval.
TEST(Runner, HeartbeatsWhileTheCommandRunsAndNeverAfter) {
  TempDir dir;
  for (const char* script : {"sleep 1.5", "for i in $(seq 15); do echo line; sleep 0.1; done"}) {
    std::vector<double> beats;
    CommandRun run = shell(script, dir / "log");
    run.heartbeat_every = std::chrono::milliseconds(300);
    run.heartbeat = [&beats](double seconds) { beats.push_back(seconds); };
    RunOutcome outcome = run_command(run);
    ASSERT_EQ(outcome.exit_code, 0) << script;
    size_t after_run = beats.size();
    EXPECT_GE(beats.size(), 2u) << script;
    for (size_t i = 0; i < beats.size(); ++i) {
      EXPECT_GE(beats[i], 0.3) << script;
      EXPECT_LE(beats[i], outcome.seconds) << script;
      if (i > 0) {
        EXPECT_GT(beats[i], beats[i - 1]) << script;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_EQ(beats.size(), after_run) << "a beat after the command ended";
  }
  int calls = 0;
  CommandRun silent = shell("sleep 0.5", dir / "silent.log");
  silent.heartbeat = [&calls](double) { ++calls; };
  EXPECT_EQ(run_command(silent).exit_code, 0);
  EXPECT_EQ(calls, 0) << "no interval, no heartbeat";
}

TEST(Runner, RunsInTheWorkingDirectory) {
  TempDir dir;
  fs::create_directories(dir / "work");
  CommandRun run = shell("pwd", dir / "log");
  run.working_dir = dir / "work";
  ASSERT_EQ(run_command(run).exit_code, 0);
  EXPECT_EQ(read_file(dir / "log"), fs::canonical(dir / "work").string() + "\n");
}

TEST(Runner, OurOtherDescriptorsDoNotLeakIntoTheChild) {
  TempDir dir;
  int fd = open((dir / "leak").c_str(), O_WRONLY | O_CREAT, 0644);  // no O_CLOEXEC on purpose
  ASSERT_GE(fd, 0);
  ASSERT_EQ(dup2(fd, 77), 77);
  RunOutcome outcome = run_command(shell("ls /proc/self/fd", dir / "log"));
  close(77);
  close(fd);
  ASSERT_EQ(outcome.exit_code, 0);
  std::string fds = "\n" + read_file(dir / "log");
  EXPECT_FALSE(contains(fds, "\n77\n")) << fds;
}

TEST(Runner, RunsInParallelThreads) {
  TempDir dir;
  constexpr int kRuns = 4;
  std::vector<RunOutcome> outcomes(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      CommandRun run =
          shell("sleep 0.3; echo run $RUN; exit $RUN", dir / ("log" + std::to_string(i)));
      run.set_env = {{"RUN", std::to_string(i)}};
      run.tee = i % 2 == 1;
      outcomes[i] = run_command(run);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_EQ(outcomes[i].exit_code, i);
    EXPECT_EQ(read_file(dir / ("log" + std::to_string(i))), "run " + std::to_string(i) + "\n");
  }
}

TEST(Runner, LogTailGivesTheLastLines) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 30; ++i) text += "line " + std::to_string(i) + "\n";
  write_file(dir / "log", text);
  std::string tail = log_tail(dir / "log");
  EXPECT_EQ(tail.substr(0, 8), "line 11\n");
  EXPECT_EQ(tail.size(), text.size() - text.find("line 11"));
  EXPECT_EQ(log_tail(dir / "log", 2), "line 29\nline 30\n");
  write_file(dir / "short", "one\ntwo");
  EXPECT_EQ(log_tail(dir / "short", 5), "one\ntwo");
  EXPECT_EQ(log_tail(dir / "short", 1), "two");
  EXPECT_EQ(log_tail(dir / "missing"), "");
  write_file(dir / "empty", "");
  EXPECT_EQ(log_tail(dir / "empty"), "");
}

TEST(Runner, StripCacheFlagsRemovesWhatNeuronCacheControls) {
  std::vector<std::string> removed;
  EXPECT_EQ(strip_cache_flags("--cache_dir=/x -O1  --no_cache\t--model-type=transformer", &removed),
            "-O1 --model-type=transformer");
  EXPECT_EQ(removed, (std::vector<std::string>{"--cache_dir=/x", "--no_cache"}));
  removed.clear();
  EXPECT_EQ(strip_cache_flags("--cache_dir /y --retry_failed_compilation --no-cache -O2", &removed),
            "-O2");
  EXPECT_EQ(removed, (std::vector<std::string>{"--cache_dir", "/y", "--retry_failed_compilation",
                                               "--no-cache"}));
  EXPECT_EQ(strip_cache_flags("", nullptr), "");
  EXPECT_EQ(strip_cache_flags("  --auto-cast=none  ", nullptr), "--auto-cast=none");
  EXPECT_EQ(strip_cache_flags("--cache_dir", nullptr), "");
  // Only these exact flags: look-alikes are compiler flags and stay.
  EXPECT_EQ(strip_cache_flags("--cache_dirx=1 --no_cache_please", nullptr),
            "--cache_dirx=1 --no_cache_please");
}

}  // namespace
}  // namespace neuron_cache::compile
