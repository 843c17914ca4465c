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
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "hub_fixture.h"
#include "neuron_cache/compile/capture.h"
#include "neuron_cache/compile/work_area.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/entry_install.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::ToolResult;
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
          local::remove_abandoned_staging(root, false, nullptr);
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
    local::EntryInstall install(root(), kCompiler,
                                "MODULE_" + std::to_string(thread) + "+" + std::to_string(round));
    install.add_file("model.hlo_module.pb", "hlo");
    local::remove_abandoned_staging(root(), false, nullptr);
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
  local::EntryInstall install(root(), kCompiler, "MODULE_1+2");
  auto lock =
      local::EntryLock::acquire(sys::SafeDir::open_or_create(root() / kCompiler / "MODULE_3+4"),
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
  return testing::cache_hub_config(
      "acme/neuron-cache",
      {{kLlama, {{"config.json", R"({"model_type": "llama", "hidden_size": 2048})"}}}});
}

// `count` small configurations of one model, compiled by the stand-in; no cache repo, so
// nothing is pushed.
std::string manifest_text(int count) {
  std::ostringstream y;
  y << "compiler_version: \"2.21.33363.0+82129205\"\n"
    << "optimum_neuron_version: \"0.4.5\"\n"
    << "instance_type: trn1\n"
    << "compile:\n"
    << "  command: " << testing::stand_in_compile_command() << "\n"
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

// neuron-cache in `dir` with a clean environment: the Hub server, `cache` as
// NEURON_COMPILE_CACHE_URL, the stand-in without delay.
ToolResult run_tool(const fs::path& dir, const testing::HubServer& server, const fs::path& cache,
                    const std::string& args, const std::string& extra_env = "") {
  return testing::ToolRunner(dir, dir / "hf-home", server.url(), cache).run(args, extra_env);
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

// ---- A cache copied or moved to another path (optimum-neuron's registry aliases are absolute)
// ----

constexpr const char* kOptimum = "0.4.5";

registry::Json llama_entry(int batch) {
  return registry::Json{
      {"_entry_class", "SingleModelCacheEntry"},
      {"_model_id", "org/model"},
      {"_task", "text-generation"},
      {"model_type", "llama"},
      {"hidden_size", 64},
      {"neuron", {{"batch_size", batch}, {"sequence_length", 128}, {"target", "trn1"}}}};
}

class CopiedCache : public ::testing::Test {
 protected:
  fs::path original() const { return tmp_ / "neuron-compile-cache"; }
  fs::path other() const { return tmp_ / "other" / "place"; }

  // The primary file of an entry and its alias, an absolute symlink, as optimum-neuron writes
  // them in `root`. Returns the alias path relative to the compiler folder.
  std::string write_registry(const fs::path& root, int batch = 1) {
    std::string text = registry::serialize(llama_entry(batch));
    std::string hash = registry::entry_hash(text);
    fs::path compiler = root / kCompiler;
    fs::path primary = compiler / registry::primary_path(
                                      kOptimum, registry::arch_digest(llama_entry(batch)), hash);
    write_file(primary, text);
    std::string alias = registry::alias_path(kOptimum, "llama", "org/model", hash);
    fs::create_directories((compiler / alias).parent_path());
    fs::create_symlink(primary, compiler / alias);
    return alias;
  }

  const local::RegistryFile* find(const std::vector<local::RegistryFile>& files,
                                  const std::string& path) {
    for (const auto& file : files) {
      if (file.path == path) return &file;
    }
    return nullptr;
  }

  TempDir tmp_;
};

TEST_F(CopiedCache, AMovedCacheReadsItsAliasesBelowTheNewRoot) {
  std::string alias = write_registry(original());
  fs::create_directories(other().parent_path());
  fs::rename(original(), other());  // the links now dangle: /…/neuron-compile-cache is gone

  local::LocalCache cache(other());
  local::CacheTree tree = cache.scan("2.21.33363.0");
  const local::RegistryFile* file = find(tree.compilers.at(0).registry, alias);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->record.has_value()) << file->problem;
  EXPECT_TRUE(file->record->hash_matches);
  EXPECT_EQ(tree.foreign_links.relocated,
            (std::map<std::string, size_t>{{original().string(), 1}}));
  EXPECT_TRUE(tree.foreign_links.outside.empty());
  auto lines = local::describe_foreign_links(tree.foreign_links, other());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(testing::contains(lines[0], "1 registry link(s) point to " + original().string()))
      << lines[0];
}

TEST_F(CopiedCache, ACopyNeverReadsTheOriginal) {
  std::string alias = write_registry(original());
  ASSERT_EQ(testing::run_command("cp -a '" + original().string() + "' '" + tmp_.path().string() +
                                 "/copy'"),
            0);
  fs::path copy = tmp_ / "copy";
  // The original changes afterwards (or belongs to someone else): the copy keeps its own.
  fs::path primary = fs::read_symlink(original() / kCompiler / alias);
  write_file(primary, registry::serialize(llama_entry(8)));

  local::LocalCache cache(copy);
  auto compiler = sys::SafeDir::open(copy / kCompiler);
  fs::path alias_path = copy / kCompiler / alias;
  auto dir = sys::SafeDir::open(alias_path.parent_path());
  auto target = cache.link_target(dir, alias_path.filename().string());
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(*target, fs::canonical(copy / fs::relative(primary, original())));
  std::vector<local::RegistryFile> files = cache.scan_registry(compiler);
  const local::RegistryFile* file = find(files, alias);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->record.has_value()) << file->problem;
  EXPECT_TRUE(file->record->hash_matches) << "the original's changed text was read";
}

TEST_F(CopiedCache, LinksOutOfTheCacheAreNeverFollowed) {
  fs::create_directories(other() / kCompiler / "0_REGISTRY");
  // A cache elsewhere with a file at a path this cache does not have.
  std::string alias = write_registry(original());
  fs::path foreign = other() / kCompiler / alias;
  fs::create_directories(foreign.parent_path());
  fs::create_symlink(fs::read_symlink(original() / kCompiler / alias), foreign);
  // ".." out of the layout, and a folder inside the cache that is a symlink to the outside.
  fs::path dots = foreign.parent_path() / "11111111111111111111.json";
  fs::create_symlink("/gone/" + std::string(kCompiler) + "/0_REGISTRY/../../../../etc/passwd",
                     dots);
  fs::copy(original() / kCompiler / "0_REGISTRY" / kOptimum, tmp_ / "elsewhere",
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::create_directory_symlink(tmp_ / "elsewhere", other() / kCompiler / "0_REGISTRY" / "linked");
  fs::path through = foreign.parent_path() / "22222222222222222222.json";
  std::string via_link = (fs::path("/gone") / kCompiler / "0_REGISTRY" / "linked" /
                          fs::relative(fs::read_symlink(original() / kCompiler / alias),
                                       original() / kCompiler / "0_REGISTRY" / kOptimum))
                             .string();
  fs::create_symlink(via_link, through);

  local::LocalCache cache(other());
  auto dir = sys::SafeDir::open(foreign.parent_path());
  for (const auto& name : {foreign.filename(), dots.filename(), through.filename()}) {
    EXPECT_FALSE(cache.link_target(dir, name.string()).has_value()) << name;
  }
  local::ForeignLinks links = cache.foreign_registry_links(sys::SafeDir::open(other() / kCompiler));
  EXPECT_TRUE(links.relocated.empty());
  EXPECT_EQ(links.outside.size(), 4u);  // the three files and the linked folder
  auto lines = local::describe_foreign_links(links, other());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(testing::contains(lines[0], "4 registry link(s) point outside the cache"))
      << lines[0];
}

// The whole tool on a cache compiled here, its aliases made absolute as optimum-neuron makes
// them, then moved elsewhere.
class CopiedCacheCli : public CopiedCache {
 protected:
  CopiedCacheCli() : server(hub_config()) { write_file(manifest, manifest_text(2)); }

  void compile_into(const fs::path& cache) {
    ToolResult ran =
        run_tool(tmp_.path(), server, cache,
                 "compile --json " + quoted(manifest) + " --output-dir " + quoted(tmp_ / "out"));
    ASSERT_EQ(ran.code, 0) << ran.err;
  }

  // Every symlink below the registry of `cache`.
  std::vector<fs::path> registry_links(const fs::path& cache) const {
    std::vector<fs::path> links;
    for (const auto& item : fs::recursive_directory_iterator(cache / kCompiler / "0_REGISTRY")) {
      if (item.is_symlink()) links.push_back(item.path());
    }
    return links;
  }

  testing::HubServer server;
  fs::path manifest = tmp_ / "neuron-cache.yaml";
};

TEST_F(CopiedCacheCli, AliasesWrittenByNeuronCacheAreRelativeAndSurviveAMove) {
  compile_into(original());
  auto links = registry_links(original());
  ASSERT_FALSE(links.empty()) << "the stand-in writes one alias for the model";
  for (const auto& link : links) {
    EXPECT_TRUE(fs::read_symlink(link).is_relative()) << link << " -> " << fs::read_symlink(link);
    EXPECT_TRUE(fs::is_regular_file(link)) << link << " resolves";
  }
  fs::create_directories(other().parent_path());
  fs::rename(original(), other());
  ToolResult plan = run_tool(tmp_.path(), server, other(), "plan --json " + quoted(manifest));
  ASSERT_EQ(plan.code, 0) << plan.err;
  json result = json::parse(plan.out);
  for (const auto& row : result["configurations"]) EXPECT_EQ(row["status"], "local") << row;
  EXPECT_FALSE(testing::contains(result["notes"].dump(), "registry link")) << result["notes"];
}

TEST_F(CopiedCacheCli, AMovedCacheWithAbsoluteAliasesKeepsItsConfigurationsAndSaysWhy) {
  compile_into(original());
  auto links = registry_links(original());
  ASSERT_FALSE(links.empty());
  for (const auto& link : links) {  // as optimum-neuron writes them (format spec 4.1)
    fs::path target = fs::canonical(link);
    fs::remove(link);
    fs::create_symlink(target, link);
  }
  fs::create_directories(other().parent_path());
  fs::rename(original(), other());

  ToolResult plan = run_tool(tmp_.path(), server, other(), "plan --json " + quoted(manifest));
  ASSERT_EQ(plan.code, 0) << plan.err;
  json result = json::parse(plan.out);
  ASSERT_EQ(result["configurations"].size(), 2u);
  for (const auto& row : result["configurations"]) EXPECT_EQ(row["status"], "local") << row;
  std::string notes = result["notes"].dump();
  EXPECT_TRUE(testing::contains(
      notes, std::to_string(links.size()) + " registry link(s) point to " + original().string()))
      << notes;

  ToolResult status = run_tool(tmp_.path(), server, other(), "status");
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_TRUE(testing::contains(
      status.err, "point to " + original().string() + ": the cache was copied or moved"))
      << status.err;
}

// Reading a copied cache's links costs a readlink each, not a walk of every folder on their way:
// the real paths of the folders, and the old root's redirection, are resolved once per run. 200
// more absolute links into the original are read once each by the plan's registry check; before,
// they cost about 50 readlink calls each (9,800 in all).
TEST_F(CopiedCacheCli, ACopysLinksAreResolvedOncePerRunNotPerRead) {
  if (!testing::strace_works()) GTEST_SKIP() << "strace cannot run here";
  compile_into(original());
  auto links = registry_links(original());
  ASSERT_FALSE(links.empty());
  for (const auto& link : links) {  // as optimum-neuron writes them
    fs::path target = fs::canonical(link);
    fs::remove(link);
    fs::create_symlink(target, link);
  }
  fs::path copy = tmp_ / "copy";
  ASSERT_EQ(testing::run_command("cp -a " + quoted(original()) + " " + quoted(copy)), 0);
  auto readlinks = [&](const std::string& args) {
    fs::path summary = tmp_ / "strace.txt";
    testing::ToolRunner runner(tmp_.path(), tmp_ / "hf-home", server.url(), copy);
    runner.wrapper = "strace -f -c -o " + quoted(summary);
    ToolResult ran = runner.run(args);
    EXPECT_EQ(ran.code, 0) << ran.err;
    size_t calls = 0;
    std::istringstream lines(testing::read_file(summary));
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
      if (w.size() >= 5 && w.back().starts_with("readlink")) calls += std::stoul(w[3]);
    }
    return std::make_pair(calls, ran);
  };
  auto [before, first] = readlinks("plan --json " + quoted(manifest));
  constexpr size_t kMore = 200;
  fs::path folder = links.front().parent_path();
  fs::path copied_folder = copy / fs::relative(folder, original());
  for (size_t i = 0; i < kMore; ++i) {
    fs::create_symlink(fs::read_symlink(links.front()),
                       copied_folder / ("extra-" + std::to_string(i) + ".json"));
  }
  auto [after, second] = readlinks("plan --json " + quoted(manifest));
  EXPECT_LE(after - before, 2 * kMore) << before << " readlink calls, then " << after;
  json result = json::parse(second.out);
  for (const auto& row : result["configurations"]) EXPECT_EQ(row["status"], "local") << row;
  EXPECT_TRUE(testing::contains(
      result["notes"].dump(),
      std::to_string(links.size() + kMore) + " registry link(s) point to " + original().string()))
      << result["notes"];
}

}  // namespace
}  // namespace neuron_cache
