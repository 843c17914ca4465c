// What the tool's own failures leave behind, and two runs at once: a prefetch killed with -9
// mid-download (its staging is reused or reclaimed by the next run), temporary registry files a
// killed writer left in 0_REGISTRY (never uploaded, removed by cleanup once surely abandoned), and
// two prefetches into one cache (each artifact downloaded once). Real `neuron-cache` processes
// against the loopback Hub; facts from the access log and the cache on disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "hub_fixture.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/local/download_journal.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/report/report.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::read_file;
using testing::TempDir;
using testing::ToolResult;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kVersion = testing::kTestCompilerVersion;
constexpr const char* kRepo = testing::kTestCacheRepo;
constexpr const char* kModel = "meta-llama/Llama-3.2-1B";
const std::string kCompiler = testing::kCompilerDir;
// Big enough that a trickled download of it is still running when the test acts.
constexpr uint64_t kNeffBytes = 1 << 20;

json hub_config() {
  return testing::cache_hub_config(
      kRepo, {{kModel, {{"config.json", R"({"model_type": "llama", "hidden_size": 2048})"}}}});
}

// One configuration (two graphs: a context and a token MODULE_ folder) of the stand-in compiler.
std::string manifest_text() {
  return testing::stand_in_manifest({{kModel, {{"a", 1}}}});
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// A GET of a file of a MODULE_ folder (an LFS one is redirected to the CDN from there).
bool is_module_download(const json& e) {
  std::string path = e["path"].get<std::string>();
  return e["method"] == "GET" && e["listener"] == "hub" && contains(path, "/resolve/") &&
         contains(path, "MODULE_");
}

class AbandonedWorkTest : public ::testing::Test {
 protected:
  AbandonedWorkTest() : server(hub_config()) { write_file(manifest, manifest_text()); }

  ~AbandonedWorkTest() override {
    for (pid_t pid : started_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  // The command line of one run of the tool in `work`, with a clean environment and `cache_dir`
  // as NEURON_COMPILE_CACHE_URL; stdout and stderr go to files named after `label`.
  std::string command(const std::string& args, const fs::path& cache_dir, const std::string& label,
                      const std::string& extra_env = "") {
    testing::ToolRunner runner(work.path(), home.path(), server.url(), cache_dir);
    return runner.command(args,
                          "STAND_IN_NEFF_BYTES=" + std::to_string(kNeffBytes) + " " + extra_env) +
           " >" + quoted(work / (label + ".out")) + " 2>" + quoted(work / (label + ".err"));
  }

  // Starts the tool without waiting: the pid is the tool's own (the shell execs it).
  pid_t start(const std::string& args, const fs::path& cache_dir, const std::string& label,
              const std::string& extra_env = "") {
    std::string line = command(args, cache_dir, label, extra_env);
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    started_.insert(pid);
    return pid;
  }

  ToolResult finish(pid_t pid, const std::string& label) {
    int status = 0;
    waitpid(pid, &status, 0);
    started_.erase(pid);
    ToolResult run;
    run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = read_file(work / (label + ".out"));
    run.err = read_file(work / (label + ".err"));
    return run;
  }

  ToolResult tool(const std::string& args, const fs::path& cache_dir, const std::string& label,
                  const std::string& extra_env = "") {
    return finish(start(args, cache_dir, label, extra_env), label);
  }

  // Compiles the configuration with the stand-in and pushes it: the Hub then holds its two
  // MODULE_ folders and their index entry.
  void fill_hub(const std::string& extra_env = "") {
    ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                         work / "compile-cache", "ci", extra_env);
    ASSERT_EQ(ci.code, 0) << ci.all();
    module_dirs = {};
    for (const auto& item : fs::directory_iterator(work / "compile-cache" / kCompiler)) {
      std::string name = item.path().filename().string();
      if (name.starts_with("MODULE_")) module_dirs.insert(name);
    }
    ASSERT_EQ(module_dirs.size(), 2u);
    module_files = 0;
    for (const auto& name : module_dirs) {
      for (const auto& item : fs::directory_iterator(work / "compile-cache" / kCompiler / name))
        module_files += item.is_regular_file() && item.file_size() > 0 ? 1 : 0;
    }
    server.clear_log();
  }

  // The MODULE_ folders a run compiled into `root`, as fill_hub finds them.
  void fill_modules_from(const fs::path& root) {
    module_dirs = {};
    for (const auto& item : fs::directory_iterator(root / kCompiler)) {
      std::string name = item.path().filename().string();
      if (name.starts_with("MODULE_")) module_dirs.insert(name);
    }
    ASSERT_EQ(module_dirs.size(), 2u);
  }

  // Every MODULE_ folder the Hub has is SUCCESS in `root` with a whole NEFF.
  void expect_complete(const fs::path& root) const {
    for (const auto& name : module_dirs) {
      fs::path dir = root / kCompiler / name;
      EXPECT_TRUE(fs::is_regular_file(dir / "model.done")) << dir;
      std::error_code error;
      EXPECT_EQ(fs::file_size(dir / "model.neff", error), kNeffBytes) << dir;
    }
  }

  static std::vector<std::string> staging_folders(const fs::path& root) {
    std::vector<std::string> names;
    fs::path area = root / ".cache/huggingface/neuron-cache-staging";
    if (!fs::is_directory(area)) return names;
    for (const auto& item : fs::directory_iterator(area))
      names.push_back(item.path().filename().string());
    return names;
  }

  std::set<std::string> hub_files() const {
    hub::ClientOptions options;
    options.endpoint = server.url();
    options.token = testing::kHubWriteToken;
    std::set<std::string> paths;
    for (const auto& f : hub::HubClient(options).list_tree(kRepo)) {
      if (!f.is_directory) paths.insert(f.path);
    }
    return paths;
  }

  // Makes the CDN (where every NEFF comes from) serve `bytes_per_second`.
  void trickle(uint64_t bytes_per_second) const {
    server.set_faults(json::array({{{"match", {{"listener", "cdn"}, {"method", "GET"}}},
                                    {"count", -1},
                                    {"action", "trickle"},
                                    {"bytes_per_second", bytes_per_second}}}));
  }

  HubServer server;
  TempDir home;
  TempDir work;
  fs::path manifest = work / "neuron-cache.yaml";
  std::set<std::string> module_dirs;
  // Files of those folders a prefetch downloads (an empty model.done is written, not fetched).
  size_t module_files = 0;

 private:
  std::set<pid_t> started_;
};

// Waits (at most `seconds`) until `done` holds; false when it never did.
bool wait_until(const std::function<bool()>& done, double seconds = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Whether the staging folder `staged` holds every file of the compiled folder `source` but
// model.neff (still coming) and model.done (the installer writes it last), at its final size.
bool small_files_whole(const fs::path& staged, const fs::path& source) {
  std::error_code error;
  bool all = fs::is_directory(source);
  for (const auto& file : fs::directory_iterator(source, error)) {
    std::string file_name = file.path().filename().string();
    if (file_name == "model.neff" || file_name == "model.done") continue;
    std::error_code missing;
    all = all && fs::file_size(staged / file_name, missing) == file.file_size() && !missing;
  }
  return all;
}

// The staging folders (of a prefetch in flight) that hold the small files of one of the compiled
// folders whole. Staging names are a digest, so folders are matched by their content.
size_t small_files_staged(const fs::path& root, const fs::path& compiled) {
  size_t whole = 0;
  fs::path area = root / ".cache/huggingface/neuron-cache-staging";
  std::error_code error;
  for (const auto& item : fs::directory_iterator(area, error)) {
    if (item.path().filename().string().starts_with('.')) continue;  // being made (.making-*)
    bool any = false;
    for (const auto& source : fs::directory_iterator(compiled, error)) {
      any = any || (source.path().filename().string().starts_with("MODULE_") &&
                    small_files_whole(item.path(), source.path()));
    }
    whole += any ? 1 : 0;
  }
  return whole;
}

// Bytes of every staged model.neff of a prefetch in flight, one number per staging folder.
std::vector<uint64_t> staged_neff_sizes(const fs::path& root) {
  std::vector<uint64_t> sizes;
  fs::path area = root / ".cache/huggingface/neuron-cache-staging";
  std::error_code error;
  for (const auto& item : fs::directory_iterator(area, error)) {
    if (item.path().filename().string().starts_with('.')) continue;
    uint64_t size = fs::file_size(item.path() / "model.neff", error);
    sizes.push_back(error ? 0 : size);
  }
  return sizes;
}

TEST_F(AbandonedWorkTest, KilledPrefetchStagingIsReusedThenReclaimedByTheNextRun) {
  fill_hub();
  fs::path cache = work / "cache";
  // 64 KiB/s: each 1 MiB NEFF takes 16 s; the small files of each folder arrive at once.
  trickle(64 << 10);
  pid_t first = start("prefetch " + quoted(manifest), cache, "killed");
  ASSERT_TRUE(wait_until([&] {
    return small_files_staged(cache, work / "compile-cache" / kCompiler) == module_dirs.size();
  })) << "the small files of both folders were staged whole";
  for (uint64_t size : staged_neff_sizes(cache)) ASSERT_LT(size, kNeffBytes) << "still coming";
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ToolResult killed = finish(first, "killed");
  ASSERT_EQ(killed.code, -1) << "killed by the signal: " << killed.all();
  ASSERT_EQ(staging_folders(cache).size(), 2u) << "kill -9 leaves the staging behind";
  for (const auto& name : module_dirs)
    EXPECT_FALSE(fs::exists(cache / kCompiler / name / "model.done"));

  // A staging folder of a module no prefetch wants, also left by a killed writer, and one a live
  // writer (this test) holds.
  fs::path area = cache / ".cache/huggingface/neuron-cache-staging";
  write_file(area / "MODULE_1234+abcdef01.999999.aaaaaaaaaaaa" / "model.neff",
             std::string(1000, 'x'));
  write_file(area / "MODULE_5678+abcdef01.1.bbbbbbbbbbbb" / "model.neff", "live");
  int live = open((area / "MODULE_5678+abcdef01.1.bbbbbbbbbbbb").c_str(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(live, 0);
  ASSERT_EQ(flock(live, LOCK_EX | LOCK_NB), 0);

  server.clear_faults();
  server.clear_log();
  ToolResult again = tool("prefetch " + quoted(manifest), cache, "again");
  close(live);
  ASSERT_EQ(again.code, 0) << again.all();
  expect_complete(cache);
  EXPECT_TRUE(contains(again.out, "reused from an interrupted prefetch")) << again.all();
  std::vector<std::string> left = staging_folders(cache);
  EXPECT_EQ(left, std::vector<std::string>{"MODULE_5678+abcdef01.1.bbbbbbbbbbbb"})
      << "abandoned staging reclaimed, a live writer's kept";

  // The files the killed run had whole are not downloaded again; the cut NEFFs are.
  json log = server.access_log();
  std::map<std::string, size_t> downloads;  // file name -> GETs
  for (const auto& e : log) {
    if (!is_module_download(e)) continue;
    std::string path = e["path"].get<std::string>();
    ++downloads[path.substr(path.rfind('/') + 1)];
  }
  EXPECT_EQ(downloads["model.neff"], 2u) << log.dump(1);
  EXPECT_EQ(downloads["model.hlo_module.pb"], 0u) << log.dump(1);
  EXPECT_EQ(downloads["compile_flags.json"], 0u) << log.dump(1);
}

// 256 MiB, so four parts of 64 MiB: a kill mid-download leaves a sparse file whose holes only its
// journal tells apart from data.
constexpr uint64_t kLargeNeffBytes = 256ull << 20;

// What the download journals of the staging folders below `root` say is on disk, in bytes.
uint64_t journaled_bytes(const fs::path& root) {
  uint64_t bytes = 0;
  std::error_code error;
  for (const auto& folder :
       fs::directory_iterator(root / ".cache/huggingface/neuron-cache-staging", error)) {
    fs::path journals = folder.path() / ".neuron-cache-journal";
    for (const auto& item : fs::directory_iterator(journals, error)) {
      if (item.path().extension() != ".json") continue;  // a journal being written (*.tmp)
      json journal = json::parse(read_file(item.path()), nullptr, false);
      if (!journal.is_object() || !journal["written"].is_array()) continue;
      for (const auto& span : journal["written"])
        bytes += span[1].get<uint64_t>() - span[0].get<uint64_t>();
    }
  }
  return bytes;
}

// Body bytes the CDN sent for the LFS object with this sha256.
uint64_t cdn_bytes_of(const json& log, const std::string& sha256) {
  uint64_t bytes = 0;
  for (const auto& e : log) {
    if (e["listener"] == "cdn" && e["method"] == "GET" &&
        contains(e["path"].get<std::string>(), sha256)) {
      bytes += e["bytes_out"].get<uint64_t>();
    }
  }
  return bytes;
}

// Issue 22: a large NEFF cut short by Ctrl-C or kill -9 is not downloaded from zero again. The
// next run takes the bytes the killed run's journal lists, fetches only the rest, verifies the
// whole file, and reclaims the staging.
TEST_F(AbandonedWorkTest, AFileCutShortIsResumedFromItsJournalByTheNextRun) {
  fill_hub("STAND_IN_NEFF_BYTES=" + std::to_string(kLargeNeffBytes) +
           " STAND_IN_TKG_NEFF_BYTES=65536");
  fs::path large;  // the compiled model.neff of 256 MiB
  for (const auto& name : module_dirs) {
    fs::path neff = work / "compile-cache" / kCompiler / name / "model.neff";
    if (fs::file_size(neff) == kLargeNeffBytes) large = neff;
  }
  ASSERT_FALSE(large.empty());
  const std::string sha256 = sha256_of_file(large);
  const fs::path installed = fs::path(kCompiler) / large.parent_path().filename() / "model.neff";

  for (int signal : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(strsignal(signal));
    fs::path cache = work / ("cache-" + std::to_string(signal));
    // 8 MiB/s per part, four parts at once: a few journal steps in, far from the end.
    trickle(8 << 20);
    pid_t first = start("prefetch " + quoted(manifest), cache, "killed");
    ASSERT_TRUE(wait_until([&] { return journaled_bytes(cache) >= (64ull << 20); }))
        << "the journal of the NEFF being downloaded lists 64 MiB";
    ASSERT_EQ(kill(first, signal), 0);
    ToolResult killed = finish(first, "killed");
    ASSERT_EQ(killed.code, -1) << "ended by the signal: " << killed.all();
    uint64_t on_disk = journaled_bytes(cache);
    ASSERT_LT(on_disk, kLargeNeffBytes);

    server.clear_faults();
    server.clear_log();
    ToolResult again = tool("prefetch --json " + quoted(manifest), cache, "again");
    ASSERT_EQ(again.code, 0) << again.all();
    json totals = json::parse(again.out)["totals"];
    EXPECT_EQ(totals["bytes_resumed"], on_disk) << totals;
    EXPECT_EQ(cdn_bytes_of(server.access_log(), sha256), kLargeNeffBytes - on_disk)
        << "only the bytes the journal did not list came over the wire";
    EXPECT_GE(totals["bytes_downloaded"].get<uint64_t>(), kLargeNeffBytes - on_disk) << totals;
    EXPECT_LT(totals["bytes_downloaded"].get<uint64_t>(), kLargeNeffBytes - on_disk + (1 << 20))
        << totals;
    EXPECT_EQ(sha256_of_file(cache / installed), sha256);
    for (const auto& name : module_dirs)
      EXPECT_TRUE(fs::is_regular_file(cache / kCompiler / name / "model.done")) << name;
    EXPECT_TRUE(staging_folders(cache).empty()) << "the killed run's staging is reclaimed";
  }
}

// A push killed (kill -9) inside the resend of an object storage refused as changed in transit
// (the first PUT corrupted, the re-request of fresh URLs never answered): nothing is committed,
// nothing is left in TMPDIR, and the next run on the same machine takes its own lease back,
// pushes every file whole and a second machine installs them.
TEST_F(AbandonedWorkTest, APushKilledWhileResendingACorruptedUploadLeavesNothingAndRunsAgain) {
  const json batch = {{"listener", "hub"}, {"path_contains", "/info/lfs/objects/batch"}};
  server.set_faults(json::array(
      {{{"match", {{"listener", "cdn"}, {"method", "PUT"}}}, {"action", "corrupt_upload"}},
       {{"match", batch}, {"action", "delay"}, {"ms", 0}},  // the push's first batch passes
       {{"match", batch}, {"action", "hang"}}}));           // the resend's batch never answers
  fs::path cache = work / "cache";
  fs::path tmp = work / "tmp";
  fs::create_directories(tmp);
  pid_t first = start("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), cache,
                      "killed", "TMPDIR=" + tmp.string());
  ASSERT_TRUE(wait_until([&] { return server.faults()[2]["remaining"] == 0; }))
      << "the resend's batch request never came";
  ASSERT_EQ(kill(first, SIGKILL), 0);
  finish(first, "killed");
  server.clear_faults();
  for (const auto& path : hub_files())
    EXPECT_FALSE(contains(path, "MODULE_") || contains(path, "neuron-cache-index")) << path;
  EXPECT_TRUE(fs::is_empty(tmp)) << "a killed push leaves nothing in TMPDIR";

  ToolResult again =
      tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"), cache, "again");
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_TRUE(contains(again.out, "pushed 1 configuration")) << again.all();
  fill_modules_from(cache);
  ToolResult fetched = tool("prefetch " + quoted(manifest), work / "second", "second");
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_TRUE(contains(fetched.out, "prefetched 1 configuration")) << fetched.all();
  expect_complete(work / "second");
  for (const auto& name : module_dirs) {
    EXPECT_EQ(sha256_of_file(work / "second" / kCompiler / name / "model.neff"),
              sha256_of_file(cache / kCompiler / name / "model.neff"))
        << name;
  }
}

// The summary line says what was resumed, in the words of the reused files.
TEST_F(AbandonedWorkTest, TheSummarySaysHowMuchOfAPartlyDownloadedFileWasResumed) {
  fill_hub("STAND_IN_NEFF_BYTES=" + std::to_string(kLargeNeffBytes) +
           " STAND_IN_TKG_NEFF_BYTES=65536");
  fs::path cache = work / "cache";
  trickle(8 << 20);
  pid_t first = start("prefetch " + quoted(manifest), cache, "killed");
  ASSERT_TRUE(wait_until([&] { return journaled_bytes(cache) >= (32ull << 20); }));
  ASSERT_EQ(kill(first, SIGKILL), 0);
  finish(first, "killed");
  uint64_t on_disk = journaled_bytes(cache);
  server.clear_faults();
  ToolResult again = tool("prefetch " + quoted(manifest), cache, "again");
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_TRUE(contains(
      again.out, ", " + report::human_bytes(on_disk) + " of 1 partly downloaded file resumed"))
      << again.all();
}

// Journals planted to mislead (a symlink, a FIFO, a huge one, garbage, spans beyond the file)
// next to a partial NEFF: nothing is resumed, nothing blocks, every file is downloaded whole.
TEST_F(AbandonedWorkTest, HostileJournalsResumeNothing) {
  fill_hub();
  std::vector<std::pair<std::string, std::function<void(const fs::path&, const std::string&)>>>
      cases{
          {"symlink",
           [&](const fs::path& journal, const std::string& valid) {
             write_file(work / "elsewhere.json", valid);
             fs::create_symlink(work / "elsewhere.json", journal);
           }},
          {"FIFO", [](const fs::path& journal,
                      const std::string&) { ASSERT_EQ(mkfifo(journal.c_str(), 0644), 0); }},
          {"huge",
           [](const fs::path& journal, const std::string& valid) {
             write_file(journal, valid + std::string(1 << 20, ' '));
           }},
          {"garbage",
           [](const fs::path& journal, const std::string&) {
             write_file(journal, "{\"version\": 1, \"written\": [[0, 1");
           }},
          {"beyond the size",
           [](const fs::path& journal, const std::string& valid) {
             json text = json::parse(valid);
             text["written"] = json::array({json::array({0, kNeffBytes + 1})});
             write_file(journal, text.dump());
           }},
      };
  for (const auto& [label, plant] : cases) {
    SCOPED_TRACE(label);
    fs::path cache = work / ("cache-" + label);
    fs::path area = cache / ".cache/huggingface/neuron-cache-staging";
    for (const auto& name : module_dirs) {
      fs::path compiled = work / "compile-cache" / kCompiler / name / "model.neff";
      std::string neff = read_file(compiled);
      fs::path dir = area / (local::staging_stem(kCompiler, name) + ".424242.cccccccccccc");
      write_file(dir / "model.neff", neff.substr(0, neff.size() / 2));
      json valid = {{"version", 1},
                    {"file", "model.neff"},
                    {"size", neff.size()},
                    {"sha256", sha256_of_file(compiled)},
                    {"written", json::array({json::array({0, neff.size() / 2})})}};
      fs::path journals = dir / ".neuron-cache-journal";
      fs::create_directories(journals);
      plant(journals / local::journal_name("model.neff"), valid.dump());
    }
    auto started = std::chrono::steady_clock::now();
    ToolResult run = tool("prefetch --json " + quoted(manifest), cache, "prefetch");
    ASSERT_EQ(run.code, 0) << run.all();
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
    EXPECT_EQ(json::parse(run.out)["totals"]["bytes_resumed"], 0) << run.out;
    expect_complete(cache);
    EXPECT_TRUE(staging_folders(cache).empty());
    json log = server.access_log();
    EXPECT_EQ(testing::count_requests(log, is_module_download), module_files) << log.dump(1);
    for (const auto& e : log) {
      if (e["listener"] == "cdn" && e["method"] == "GET") {
        EXPECT_TRUE(e["range"].is_null()) << e;
      }
    }
    server.clear_log();
  }
}

TEST_F(AbandonedWorkTest, StagingOfAKilledPrefetchWithNothingWholeIsDeletedAndAllRefetched) {
  fill_hub();
  fs::path cache = work / "cache";
  // A staged copy cut short and one with the wrong bytes at the right size: neither is trusted.
  fs::path area = cache / ".cache/huggingface/neuron-cache-staging";
  for (const auto& name : module_dirs) {
    fs::path dir = area / (local::staging_stem(kCompiler, name) + ".424242.cccccccccccc");
    write_file(dir / "model.neff", std::string(kNeffBytes, 'z'));
    fs::path hlo = work / "compile-cache" / kCompiler / name / "model.hlo_module.pb";
    write_file(dir / "model.hlo_module.pb", read_file(hlo).substr(1));
  }
  ToolResult run = tool("prefetch " + quoted(manifest), cache, "prefetch");
  ASSERT_EQ(run.code, 0) << run.all();
  expect_complete(cache);
  for (const auto& name : module_dirs) {
    EXPECT_EQ(read_file(cache / kCompiler / name / "model.neff"),
              read_file(work / "compile-cache" / kCompiler / name / "model.neff"))
        << "the wrong staged bytes were not installed";
  }
  EXPECT_TRUE(staging_folders(cache).empty());
  EXPECT_FALSE(contains(run.out, "reused")) << run.all();
  EXPECT_EQ(testing::count_requests(server.access_log(), is_module_download), module_files)
      << "every file downloaded: " << server.access_log().dump(1);
}

TEST_F(AbandonedWorkTest, TemporaryRegistryFilesAreNeverPushedNorSynchronized) {
  // The compile leaves a half-written .<hash>.json.<pid>-x7k2.tmp next to its registry entry: it
  // is not the run's output, so it is neither adopted into the cache nor pushed.
  fill_hub("STAND_IN_REGISTRY_TEMP=1");
  fs::path compiled = work / "compile-cache" / kCompiler / "0_REGISTRY";
  size_t registry_json = 0;
  for (const auto& item : fs::recursive_directory_iterator(compiled)) {
    std::string name = item.path().filename().string();
    EXPECT_FALSE(name.ends_with(".tmp")) << item.path();
    registry_json += name.ends_with(".json") ? 1 : 0;
  }
  EXPECT_EQ(registry_json, 2u) << "the entry and its alias were adopted";
  std::set<std::string> pushed = hub_files();
  size_t registry_files = 0;
  for (const auto& path : pushed) {
    EXPECT_FALSE(path.ends_with(".tmp")) << path;
    registry_files += contains(path, "/0_REGISTRY/") ? 1 : 0;
  }
  EXPECT_GT(registry_files, 0u) << "the registry entry itself was pushed";

  // synchronize of that cache uploads everything else, never a temporary file.
  fs::path cache = work / "compile-cache";
  fs::path registry = cache / kCompiler / "0_REGISTRY" / "0.4.5";
  write_file(registry / ".0123456789abcdef0123.json.4242-a1b2c3.tmp", "{\"half");
  write_file(registry / "stray.json.tmp", "{}");
  ToolResult sync =
      tool("synchronize --repo " + std::string(kRepo) + " --cache-dir " + quoted(cache),
           work / "unused", "sync");
  ASSERT_EQ(sync.code, 0) << sync.all();
  EXPECT_TRUE(contains(sync.all(), "Synchronization complete.")) << sync.all();
  std::set<std::string> synced = hub_files();
  for (const auto& path : synced) {
    std::string name = path.substr(path.rfind('/') + 1);
    // The Hub's own .gitattributes aside, no dot-file went up.
    EXPECT_FALSE(name.ends_with(".tmp") || (name.starts_with(".") && path != ".gitattributes"))
        << path;
  }
  for (const auto& e : server.access_log()) {
    EXPECT_FALSE(contains(e["path"].get<std::string>(), ".tmp")) << e.dump();
  }
}

TEST_F(AbandonedWorkTest, CleanupRemovesOnlyTemporaryRegistryFilesOldEnoughToBeAbandoned) {
  TempDir cache;
  testing::make_entry(cache.path(), "MODULE_11+d7cde3b5", testing::Kind::Success);
  fs::path registry = cache / testing::kCompilerDir / "0_REGISTRY" / "0.4.5" / "abc";
  write_file(registry / "5e484d66cb3e29251244.json", "{}");
  fs::path old_temp = registry / ".5e484d66cb3e29251244.json.4242-q1w2e3.tmp";
  fs::path fresh_temp = registry / ".6e484d66cb3e29251244.json.4243-q1w2e3.tmp";
  write_file(old_temp, "{\"half");
  write_file(fresh_temp, "{\"being written");
  // Two hours old: its writer (a rename away from done) is long gone.
  auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(old_temp, two_hours_ago);

  ToolResult dry =
      tool("cleanup --dry-run --cache-dir " + quoted(cache.path()), cache.path(), "dry");
  ASSERT_EQ(dry.code, 0) << dry.all();
  EXPECT_TRUE(contains(dry.all(), "Removed 1 abandoned temporary registry files")) << dry.all();
  EXPECT_TRUE(fs::exists(old_temp)) << "a dry run deletes nothing";

  ToolResult run =
      tool("cleanup --all --cache-dir " + quoted(cache.path()), cache.path(), "cleanup");
  ASSERT_EQ(run.code, 0) << run.all();
  EXPECT_TRUE(contains(run.all(), "Removed 1 abandoned temporary registry files")) << run.all();
  EXPECT_FALSE(fs::exists(old_temp));
  EXPECT_TRUE(fs::exists(fresh_temp)) << "its writer may still be about to rename it";
  EXPECT_TRUE(fs::exists(registry / "5e484d66cb3e29251244.json"));
  EXPECT_TRUE(fs::exists(cache / testing::kCompilerDir / "MODULE_11+d7cde3b5" / "model.done"));
}

class ConcurrentPrefetchTest : public AbandonedWorkTest {};

TEST_F(ConcurrentPrefetchTest, SecondPrefetchWaitsForTheFirstAndDownloadsNothingTwice) {
  fill_hub();
  fs::path cache = work / "cache";
  // 256 KiB/s: the NEFFs take 4 s, long after both runs have planned.
  trickle(256 << 10);
  pid_t one = start("prefetch " + quoted(manifest), cache, "one");
  pid_t two = start("prefetch " + quoted(manifest), cache, "two");
  ToolResult first = finish(one, "one");
  ToolResult second = finish(two, "two");
  ASSERT_EQ(first.code, 0) << first.all();
  ASSERT_EQ(second.code, 0) << second.all();
  expect_complete(cache);
  EXPECT_TRUE(staging_folders(cache).empty());

  json log = server.access_log();
  std::map<std::string, size_t> gets;  // path in the repo -> GETs
  for (const auto& e : log) {
    if (is_module_download(e)) ++gets[e["path"].get<std::string>()];
  }
  EXPECT_EQ(gets.size(), module_files) << log.dump(1);
  for (const auto& [path, n] : gets) EXPECT_EQ(n, 1u) << path << " downloaded " << n << " times";

  const std::string waited = "another neuron-cache prefetch into";
  EXPECT_NE(contains(first.err, waited), contains(second.err, waited))
      << "one of them said it waited:\n"
      << first.all() << "\n---\n"
      << second.all();
  const ToolResult& waiter = contains(first.err, waited) ? first : second;
  EXPECT_TRUE(contains(waiter.out, "2 already present")) << waiter.all();
}

}  // namespace
}  // namespace neuron_cache
