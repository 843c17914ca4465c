// The process helpers cleanup and synchronize rely on to know whether a compiler runs, and
// run_and_capture / find_on_path.
#include "neuron_cache/process/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "neuron_cache/error.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A fake compiler: a shell script named neuronx-cc that waits on its stdin, so closing the pipe
// ends it without signals and without leaving a grandchild behind.
class FakeCompiler {
 public:
  explicit FakeCompiler(const fs::path& dir) {
    fs::path script = dir / "neuronx-cc";
    write_file(script, "#!/bin/sh\nread line\n");
    fs::permissions(script, fs::perms::owner_all);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[0], STDIN_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl(script.c_str(), "neuronx-cc", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[0]);
    stdin_ = fds[1];
  }
  ~FakeCompiler() {
    close(stdin_);  // `read` returns at end of input and the script exits
    int status = 0;
    for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
};

bool becomes_running(std::string_view name) {
  for (int i = 0; i < 100; ++i) {
    if (process::is_process_running(name)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(Process, AnExitedButUnreapedCompilerIsNotRunning) {
  TempDir temp;
  fs::path script = temp.path() / "neuronx-cc";
  write_file(script, "#!/bin/sh\nexit 0\n");
  fs::permissions(script, fs::perms::owner_all);
  pid_t pid = fork();
  if (pid == 0) {
    execl(script.c_str(), "neuronx-cc", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Not reaped yet: a zombie whose /proc entry still says neuronx-cc.
  std::string stat_path = "/proc/" + std::to_string(pid) + "/stat";
  bool zombie = false;
  for (int i = 0; i < 200 && !zombie; ++i) {
    std::this_thread::sleep_for(10ms);
    std::string stat = read_file(stat_path);
    zombie = stat.find(") Z") != std::string::npos;
  }
  ASSERT_TRUE(zombie);
  EXPECT_FALSE(process::is_process_running("neuronx-cc"));
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(Process, DetectsARunningNeuronxCc) {
  TempDir temp;
  {
    FakeCompiler compiler(temp.path());
    EXPECT_TRUE(becomes_running("neuronx-cc"));
  }
  EXPECT_FALSE(process::is_process_running("no-such-process-8f3a1c"));
}

TEST(Process, RunAndCaptureCollectsOutputAndExitCode) {
  process::ProcessResult result =
      process::run_and_capture({"sh", "-c", "echo out; echo err >&2; exit 3"}, 5s);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.timed_out);
  EXPECT_NE(result.output.find("out\n"), std::string::npos);
  EXPECT_NE(result.output.find("err\n"), std::string::npos);
}

TEST(Process, RunAndCaptureKillsAHelperThatTakesTooLong) {
  auto started = std::chrono::steady_clock::now();
  process::ProcessResult result = process::run_and_capture({"sleep", "10"}, 200ms);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(Process, RunAndCaptureReportsAMissingProgram) {
  process::ProcessResult result = process::run_and_capture({"neuron-cache-no-such-program"}, 5s);
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_THROW(process::run_and_capture({}, 1s), Error);
}

TEST(Process, FindOnPathFindsExecutablesOnly) {
  TempDir temp;
  write_file(temp / "bin" / "tool", "#!/bin/sh\n");
  write_file(temp / "bin" / "data", "");
  fs::permissions(temp / "bin" / "tool", fs::perms::owner_all);
  fs::permissions(temp / "bin" / "data", fs::perms::owner_read | fs::perms::owner_write);
  std::string path_list = (temp / "empty").string() + ":" + (temp / "bin").string();
  EXPECT_EQ(process::find_on_path("tool", path_list), (temp / "bin" / "tool").string());
  EXPECT_EQ(process::find_on_path("data", path_list), std::nullopt);  // not executable
  EXPECT_EQ(process::find_on_path("missing", path_list), std::nullopt);
}

}  // namespace
}  // namespace neuron_cache
