// Scratch folders of the cache root under concurrency (issue 11): the work folders of parallel
// compiles and the staging folders of installs must survive the sweeps of abandoned ones that
// other runs, threads and `cleanup` make at the same time; and their locks must not leak into
// compiler child processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "compile/capture.h"
#include "compile/work_area.h"
#include "hub_fixture.h"
#include "store/entry_install.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kCompiler = testing::kCompilerDir;
constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";

// A child process that sweeps `root` (work area and staging area) without pause until killed:
// what a second `neuron-cache` run or a `cleanup` does at the worst moments.
class SweepingProcess {
 public:
  explicit SweepingProcess(const fs::path& root) {
    pid_ = fork();
    if (pid_ == 0) {
      while (true) {
        try {
          compile::remove_abandoned_work(root);
          remove_abandoned_staging(root, false, nullptr);
        } catch (...) {
          // A folder removed under the sweep by its owner: go on sweeping.
        }
      }
    }
  }
  ~SweepingProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  SweepingProcess(const SweepingProcess&) = delete;
  SweepingProcess& operator=(const SweepingProcess&) = delete;

 private:
  pid_t pid_ = -1;
};

// Runs `body(thread, round)` on `threads` threads until `rounds` rounds each or `limit` passed;
// returns the errors they threw.
std::vector<std::string> hammer(int threads, int rounds, std::chrono::seconds limit,
                                const std::function<void(int, int)>& body) {
  std::mutex mutex;
  std::vector<std::string> errors;
  auto deadline = Clock::now() + limit;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int round = 0; round < rounds && Clock::now() < deadline; ++round) {
        try {
          body(t, round);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          errors.push_back(e.what());
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  return errors;
}

std::string first_errors(const std::vector<std::string>& errors) {
  std::string text;
  for (size_t i = 0; i < errors.size() && i < 3; ++i) text += errors[i] + "\n";
  return text;
}

class WorkRace : public ::testing::Test {
 protected:
  fs::path root() const { return tmp_ / "cache"; }
  TempDir tmp_;
};

// Every thread makes work folders as parallel compiles do (each constructor sweeps first) while
// other threads and another process sweep: each folder must be there, usable and still there
// until its owner lets it go.
TEST_F(WorkRace, WorkFoldersSurviveConcurrentSweeps) {
  fs::create_directories(root());
  SweepingProcess sweeper(root());
  SweepingProcess second_sweeper(root());
  std::atomic<bool> stop{false};
  std::thread in_process([&] {
    while (!stop) compile::remove_abandoned_work(root());
  });
  auto errors = hammer(4, 300, std::chrono::seconds(8), [&](int thread, int round) {
    compile::CaptureCache cache(root(), "w" + std::to_string(thread) + "-" + std::to_string(round));
    fs::path probe = cache.dir() / kCompiler / "probe";
    fs::create_directories(probe.parent_path());
    write_file(probe, "in use");
    if (testing::read_file(probe) != "in use" || !fs::is_directory(cache.dir())) {
      throw std::runtime_error("the work folder " + cache.dir().string() + " vanished in use");
    }
  });
  stop = true;
  in_process.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " failures, first:\n" << first_errors(errors);
}

// The same for the staging folders of entry installs against `cleanup`'s sweep.
TEST_F(WorkRace, StagingFoldersSurviveConcurrentCleanup) {
  fs::create_directories(root());
  SweepingProcess sweeper(root());
  SweepingProcess second_sweeper(root());
  auto errors = hammer(4, 300, std::chrono::seconds(8), [&](int thread, int round) {
    EntryInstall install(root(), kCompiler,
                         "MODULE_" + std::to_string(thread) + "+" + std::to_string(round));
    install.add_file("model.hlo_module.pb", "hlo");
    remove_abandoned_staging(root(), false, nullptr);
  });
  EXPECT_TRUE(errors.empty()) << errors.size() << " failures, first:\n" << first_errors(errors);
}

// A folder a process was killed while making (between mkdir and rename) is swept once old, and a
// young one is left to its maker.
TEST_F(WorkRace, AFolderLeftHalfMadeIsSweptOnceOld) {
  fs::path area = root() / compile::kWorkDir;
  fs::create_directories(area / ".making-young");
  fs::create_directories(area / ".making-old");
  timespec old = {time(nullptr) - 2 * 3600, 0};
  timespec times[2] = {old, old};
  ASSERT_EQ(utimensat(AT_FDCWD, (area / ".making-old").c_str(), times, 0), 0);
  EXPECT_EQ(compile::remove_abandoned_work(root()), 1u);
  EXPECT_TRUE(fs::is_directory(area / ".making-young"));
  EXPECT_FALSE(fs::exists(area / ".making-old"));
}

// The file descriptors a run holds on its scratch folders (their locks among them) are
// close-on-exec: a compiler started meanwhile would otherwise hold the lock after the run dies,
// and the folder would never be swept.
TEST_F(WorkRace, LocksOfScratchFoldersAreNotInherited) {
  std::set<int> before;
  for (const auto& fd : fs::directory_iterator("/proc/self/fd")) {
    before.insert(std::stoi(fd.path().filename().string()));
  }
  compile::CaptureCache cache(root(), "held");
  EntryInstall install(root(), kCompiler, "MODULE_1+2");
  auto lock = EntryLock::acquire(SafeDir::open_or_create(root() / kCompiler / "MODULE_3+4"),
                                 std::chrono::milliseconds(100));
  int opened = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(entry.path().filename().string());
    if (before.count(fd)) continue;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) continue;  // the directory_iterator's own, closed meanwhile
    ++opened;
    std::error_code error;
    EXPECT_TRUE(flags & FD_CLOEXEC) << fs::read_symlink(entry.path(), error);
  }
  EXPECT_GE(opened, 6);  // work area, work folder and its lock; staging area, folder and lock
}

// ---- The whole tool: `compile --jobs N` of many configurations, with a sweeping process ----

json hub_config() {
  json repos = json::array();
  repos.push_back(
      {{"id", kLlama},
       {"private", false},
       {"files", {{"config.json", R"({"model_type": "llama", "hidden_size": 2048})"}}}});
  return {
      {"users", json::array({{{"name", "alice"}}})},
      {"tokens",
       json::array({{{"token", testing::kHubWriteToken}, {"user", "alice"}, {"role", "write"}}})},
      {"repos", repos}};
}

// `count` small configurations of one model, compiled by the stand-in; no cache repo, so
// nothing is pushed.
std::string manifest_text(int count) {
  std::ostringstream y;
  y << "compiler_version: \"2.21.33363.0+82129205\"\n"
    << "optimum_neuron_version: \"0.4.5\"\n"
    << "instance_type: trn1\n"
    << "compile:\n"
    << "  command: \"" << STAND_IN_EXPORT
    << " --model {model_id} --task {task} --batch_size {batch_size} --sequence_length "
       "{sequence_length} --num_cores {num_cores} --auto_cast_type {precision} --instance_type "
       "{instance_type} {output}\"\n"
    << "models:\n"
    << "  - model_id: " << kLlama << "\n"
    << "    task: text-generation\n"
    << "    configurations:\n";
  for (int i = 0; i < count; ++i) {
    y << "      - {name: w" << i << ", batch_size: " << 1 + i % 6
      << ", sequence_length: " << 128 * (1 + i / 6) << ", num_cores: 2, precision: bf16}\n";
  }
  return y.str();
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

struct ToolResult {
  int code = -1;
  std::string out;
  std::string err;
};

// neuron-cache in `dir` with a clean environment: the Hub server, `cache` as
// NEURON_COMPILE_CACHE_URL, the stand-in without delay.
ToolResult run_tool(const fs::path& dir, const testing::HubServer& server, const fs::path& cache,
                    const std::string& args, const std::string& extra_env = "") {
  std::string command =
      "(cd " + quoted(dir) +
      " && env -i PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME=" + quoted(dir / "hf-home") +
      " HF_ENDPOINT=" + server.url() + " HF_TOKEN=" + testing::kHubWriteToken +
      " NEURON_COMPILE_CACHE_URL=" + quoted(cache) + " STAND_IN_DELAY=0 " + extra_env + " " +
      testing::tool_path() + " " + args + " 2>" + quoted(dir / "stderr.txt") + ")";
  ToolResult result;
  result.code = testing::run_command(command, &result.out);
  result.err = testing::read_file(dir / "stderr.txt");
  return result;
}

TEST_F(WorkRace, ParallelCompilesOfManyConfigurationsWithASweepingProcess) {
  testing::HubServer server(hub_config());
  const int kConfigurations = 60;
  fs::path manifest = tmp_ / "neuron-cache.yaml";
  write_file(manifest, manifest_text(kConfigurations));
  // Bounded: --jobs 2 and 4 once each, repeated while the first rounds took under 30 s (a
  // loaded machine gets fewer rounds, never a longer test).
  auto start = Clock::now();
  int run = 0;
  for (int round = 0; round < 3 && (round == 0 || Clock::now() - start < std::chrono::seconds(30));
       ++round) {
    for (int jobs : {2, 4}) {
      ++run;
      // A fresh cache each time: every configuration is a miss the run compiles.
      fs::path cache = tmp_ / ("cache-" + std::to_string(run));
      fs::create_directories(cache);
      SweepingProcess sweeper(cache);
      // NEURON_CACHE_SEED=0: every compile gets a work folder of its own, as when inotify
      // cannot watch a run.
      ToolResult ran =
          run_tool(tmp_.path(), server, cache,
                   "compile --json --jobs " + std::to_string(jobs) + " " + quoted(manifest) +
                       " --output-dir " + quoted(tmp_ / ("out-" + std::to_string(run))),
                   "NEURON_CACHE_SEED=0");
      ASSERT_EQ(ran.code, 0) << "jobs " << jobs << ", round " << round << ":\n"
                             << ran.err.substr(0, 4000);
      json result = json::parse(ran.out);
      EXPECT_EQ(result["totals"]["compiled"], kConfigurations) << result["totals"];
      for (const auto& row : result["configurations"]) {
        EXPECT_EQ(row["compile"]["ok"], true) << row;
      }
    }
  }
}

}  // namespace
}  // namespace neuron_cache
