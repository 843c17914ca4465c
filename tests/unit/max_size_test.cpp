// cleanup --max-size (issue 26): the least recently used complete entries go until the cache is
// at most the bound, never one a writer holds locked, never through a symlink; the size parser;
// the use records prefetch and compile leave; the command as a user runs it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include "neuron_cache/compile/capture.h"
#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/local/in_use.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/sys/safe_dir.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::contains;
using testing::Kind;
using testing::make_entry;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kCompiler = testing::kCompilerDir;
constexpr uint64_t kKiB = 1024;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Sets atime and mtime of `path` itself (never through a symlink) to `seconds`.
void set_time(const fs::path& path, double seconds) {
  timespec times[2];
  times[0].tv_sec = static_cast<time_t>(seconds);
  times[0].tv_nsec = 0;
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// A complete entry of exactly `bytes` (model.neff; model.done is empty) whose files and folder
// were last written at `mtime`.
fs::path make_complete(const fs::path& root, const std::string& module, uint64_t bytes,
                       double mtime, const std::string& compiler = kCompiler) {
  fs::path dir = root / compiler / module;
  fs::create_directories(dir);
  write_file(dir / "model.neff", std::string(bytes, 'n'));
  write_file(dir / "model.done", "");
  set_time(dir / "model.neff", mtime);
  set_time(dir / "model.done", mtime);
  set_time(dir, mtime);
  return dir;
}

fs::path record_path(const fs::path& root, const std::string& module,
                     const std::string& compiler = kCompiler) {
  return root / ".cache/huggingface/neuron-cache-used" / compiler / module;
}

std::vector<std::string> evicted_paths(const local::CleanupResult& result) {
  std::vector<std::string> out;
  for (const auto& entry : result.evicted) out.push_back(entry.path);
  return out;
}

std::string in_compiler(const std::string& module) {
  return std::string(kCompiler) + "/" + module;
}

// ---------------------------------------------------------------------------------------------
// The size parser (format/bytes.h)

TEST(MaxSizeParse, AcceptsBinaryDecimalAndPlainBytes) {
  const uint64_t ki = 1024, ki2 = ki * ki, ki3 = ki2 * ki, ki4 = ki3 * ki;
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"0", 0},
      {"1048576", 1048576},
      {"512B", 512},
      {"200GiB", 200 * ki3},
      {"200G", 200 * ki3},
      {"200g", 200 * ki3},
      {"200gib", 200 * ki3},
      {"500MiB", 500 * ki2},
      {"500 MiB", 500 * ki2},
      {"500M", 500 * ki2},
      {"4K", 4 * ki},
      {"4KiB", 4 * ki},
      {"2T", 2 * ki4},
      {"2TiB", 2 * ki4},
      {"1.5G", 3 * ki3 / 2},
      {"1.5TB", 1500000000000ULL},
      {"500MB", 500000000ULL},
      {"3KB", 3000},
      {"10GB", 10000000000ULL},
      {"0.5KiB", 512},
      {"1.000001KB", 1000},  // rounded down to whole bytes
  };
  for (const auto& [text, bytes] : cases) {
    EXPECT_EQ(format::parse_size(text, "--max-size"), bytes) << text;
  }
}

TEST(MaxSizeParse, RefusesOtherFormsNamingTheAcceptedOnes) {
  for (const char* text : {"",
                           "GiB",
                           "-1G",
                           "+1G",
                           "1e9",
                           "1,5G",
                           "1.5",
                           "1.5B",
                           "1..5G",
                           "1.G",
                           ".5G",
                           "200 GiB ",
                           "200  GiB",
                           "200Gb/s",
                           "200PiB",
                           "200P",
                           "1KBB",
                           "0x10",
                           "1.1234567G",
                           "20000000000000000000",
                           "17179869184G"}) {
    try {
      format::parse_size(text, "--max-size");
      ADD_FAILURE() << "accepted \"" << text << "\"";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Input) << text;
      std::string message = error.what();
      EXPECT_TRUE(contains(message, "--max-size")) << message;
      EXPECT_TRUE(contains(message, "KiB, MiB, GiB, TiB")) << message;
      EXPECT_TRUE(contains(message, "KB, MB, GB, TB")) << message;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Eviction (local/cleanup.h)

class MaxSizeTest : public ::testing::Test {
 protected:
  fs::path root() const { return temp_ / "cache"; }
  fs::path entry(const std::string& module) const { return root() / kCompiler / module; }

  local::CleanupResult clean(uint64_t max_size, bool dry_run = false,
                             local::CleanupOptions options = {}) {
    options.max_size = max_size;
    options.dry_run = dry_run;
    return local::cleanup_cache(local::LocalCache(root()), options);
  }

  // Four entries of 10, 20, 30 and 40 KiB, last written 4, 3, 2 and 1 days ago.
  void make_four() {
    for (int i = 1; i <= 4; ++i) {
      make_complete(root(), "MODULE_" + std::to_string(i) + "+d7cde3b5", i * 10 * kKiB,
                    base_ + (i - 1) * 86400.0);
    }
  }

  double base_ = now_seconds() - 4 * 86400.0;
  TempDir temp_;
};

TEST_F(MaxSizeTest, EvictsTheLeastRecentlyUsedUntilAtOrUnderTheBound) {
  make_four();  // 100 KiB
  // 55 KiB: the 10 and 20 KiB entries leave 70, the 30 KiB one too leaves 40.
  local::CleanupResult result = clean(55 * kKiB);
  EXPECT_EQ(result.size_before, 100 * kKiB);
  EXPECT_EQ(result.size_after, 40 * kKiB);
  EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5"),
                                                             in_compiler("MODULE_2+d7cde3b5"),
                                                             in_compiler("MODULE_3+d7cde3b5")}));
  EXPECT_EQ(result.evicted[0].bytes, 10 * kKiB);
  EXPECT_EQ(static_cast<int64_t>(result.evicted[0].last_used), static_cast<int64_t>(base_));
  EXPECT_EQ(result.bytes_freed, 60 * kKiB);
  EXPECT_EQ(result.skipped_in_use, 0);
  EXPECT_FALSE(fs::exists(entry("MODULE_1+d7cde3b5")));
  EXPECT_FALSE(fs::exists(entry("MODULE_3+d7cde3b5")));
  EXPECT_TRUE(fs::exists(entry("MODULE_4+d7cde3b5") / "model.neff"));
  EXPECT_TRUE(contains(result.summary(false),
                       "Evicted 3 least recently used entries (60.0 KB). Cache size 40.0 KB, at "
                       "most 55.0 KB. Freed 60.0 KB."))
      << result.summary(false);

  // At the bound already: nothing goes.
  local::CleanupResult again = clean(40 * kKiB);
  EXPECT_TRUE(again.evicted.empty());
  EXPECT_EQ(again.size_before, 40 * kKiB);
  EXPECT_EQ(again.size_after, 40 * kKiB);
}

TEST_F(MaxSizeTest, DryRunRemovesNothingAndListsWhatWouldGo) {
  make_four();
  auto before = snapshot_tree(temp_.path());
  local::CleanupResult dry = clean(55 * kKiB, true);
  EXPECT_EQ(snapshot_tree(temp_.path()), before);
  EXPECT_EQ(dry.size_before, 100 * kKiB);
  EXPECT_EQ(dry.size_after, 40 * kKiB);
  EXPECT_EQ(dry.evicted.size(), 3u);
  EXPECT_TRUE(contains(dry.summary(true), "[DRY RUN] Evicted 3 least recently used entries"));
  // The real run then does what the dry run said.
  EXPECT_EQ(evicted_paths(clean(55 * kKiB)), evicted_paths(dry));
}

TEST_F(MaxSizeTest, AnEntryUsedRecentlySurvivesWhileAnOlderOneGoes) {
  make_four();
  // The oldest written entry was reused by a compile today; the second oldest was not.
  local::record_use(root(), {{kCompiler, "MODULE_1+d7cde3b5"}});
  ASSERT_TRUE(fs::exists(record_path(root(), "MODULE_1+d7cde3b5")));
  local::CleanupResult result = clean(75 * kKiB);
  EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_2+d7cde3b5"),
                                                             in_compiler("MODULE_3+d7cde3b5")}));
  EXPECT_TRUE(fs::exists(entry("MODULE_1+d7cde3b5")));
  // A record older than the files' mtime does not make an entry older than its last write.
  local::record_use(root(), {{kCompiler, "MODULE_4+d7cde3b5"}});
  set_time(record_path(root(), "MODULE_4+d7cde3b5"), base_ - 86400.0);
  set_time(record_path(root(), "MODULE_1+d7cde3b5"), base_ + 2 * 86400.0);  // 4's files: + 3
  EXPECT_EQ(evicted_paths(clean(40 * kKiB)),
            (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5")}));
}

TEST_F(MaxSizeTest, UseRecordsAreReadAndForgottenWithTheirEntries) {
  make_four();
  local::record_use(root(), {{kCompiler, "MODULE_1+d7cde3b5"}, {kCompiler, "MODULE_2+d7cde3b5"}});
  set_time(record_path(root(), "MODULE_1+d7cde3b5"), base_ + 10 * 86400.0);
  set_time(record_path(root(), "MODULE_2+d7cde3b5"), base_ + 5 * 86400.0);
  auto records = local::read_use_records(root());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(static_cast<int64_t>(records[{kCompiler, "MODULE_1+d7cde3b5"}]),
            static_cast<int64_t>(base_ + 10 * 86400.0));
  // Recording again moves the time to now.
  local::record_use(root(), {{kCompiler, "MODULE_2+d7cde3b5"}});
  double recorded = local::read_use_records(root())[{kCompiler, "MODULE_2+d7cde3b5"}];
  EXPECT_GT(recorded, now_seconds() - 60);
  // Order by use: 3 (2 days ago), 4 (1 day ago), 2 (now), 1 (in 6 days).
  local::CleanupResult result = clean(10 * kKiB);
  EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_3+d7cde3b5"),
                                                             in_compiler("MODULE_4+d7cde3b5"),
                                                             in_compiler("MODULE_2+d7cde3b5")}));
  EXPECT_FALSE(fs::exists(record_path(root(), "MODULE_2+d7cde3b5")));
  EXPECT_TRUE(fs::exists(record_path(root(), "MODULE_1+d7cde3b5")));
  // Names that are no entry are never recorded, nor written outside the record folder.
  local::record_use(root(), {{"../x", "MODULE_9"}, {kCompiler, "../../escape"}, {"other", "M"}});
  EXPECT_FALSE(fs::exists(root() / ".cache/huggingface/escape"));
  EXPECT_EQ(local::read_use_records(root()).size(), 1u);
}

TEST_F(MaxSizeTest, AnEntryWhoseLockAnotherThreadHoldsIsSkippedAndCounted) {
  make_four();
  std::promise<void> locked, release;
  std::thread writer([&] {
    auto dir = sys::SafeDir::open(entry("MODULE_1+d7cde3b5"));
    local::EntryLock lock = local::EntryLock::acquire(dir, std::chrono::seconds(5));
    locked.set_value();
    release.get_future().wait();
  });
  locked.get_future().wait();
  // 85 KiB: the locked 10 KiB entry is kept, so the 20 KiB one goes in its place.
  local::CleanupResult dry = clean(85 * kKiB, true);
  local::CleanupResult result = clean(85 * kKiB);
  release.set_value();
  writer.join();
  for (const auto* r : {&dry, &result}) {
    EXPECT_EQ(r->skipped_in_use, 1);
    EXPECT_EQ(evicted_paths(*r), (std::vector<std::string>{in_compiler("MODULE_2+d7cde3b5")}));
    EXPECT_EQ(r->size_after, 80 * kKiB);
    EXPECT_TRUE(contains(r->summary(false), "Kept 1 entries in use")) << r->summary(false);
  }
  EXPECT_TRUE(fs::exists(entry("MODULE_1+d7cde3b5") / "model.neff"));
  // Once released it goes like any other.
  EXPECT_EQ(evicted_paths(clean(75 * kKiB)),
            (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5")}));
}

// A live run keeps what it installed or found complete (its export links, its compile seeds)
// from a cleanup in another process; once it ends, or when it was killed, its file protects
// nothing and is removed.
TEST_F(MaxSizeTest, EntriesALiveRunUsesAreKeptUntilItEnds) {
  make_four();
  {
    local::InUse run(root());
    run.add({{kCompiler, "MODULE_1+d7cde3b5"}});
    local::CleanupResult result = clean(85 * kKiB);
    EXPECT_EQ(result.skipped_in_use, 1);
    EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_2+d7cde3b5")}));
    EXPECT_TRUE(fs::exists(entry("MODULE_1+d7cde3b5") / "model.neff"));
  }
  EXPECT_EQ(evicted_paths(clean(75 * kKiB)),
            (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5")}));
  // A run killed with its file in place: unlocked, it protects nothing, and is swept.
  pid_t child = fork();
  if (child == 0) {
    local::InUse run(root());
    run.add({{kCompiler, "MODULE_3+d7cde3b5"}});
    kill(getpid(), SIGKILL);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  fs::path dir = root() / ".cache/huggingface/neuron-cache-in-use";
  ASSERT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  for (const auto& file : fs::directory_iterator(dir)) set_time(file.path(), now_seconds() - 120);
  EXPECT_EQ(evicted_paths(clean(40 * kKiB)),
            (std::vector<std::string>{in_compiler("MODULE_3+d7cde3b5")}));
  EXPECT_TRUE(fs::is_empty(dir));
  // Hostile lines in a file a live run holds are ignored, never a path outside the cache.
  local::InUse live(root());
  live.add({{kCompiler, "MODULE_4+d7cde3b5"}, {"../etc", "MODULE_x"}, {kCompiler, "../../x"}});
  EXPECT_EQ(local::entries_in_use(root()),
            (std::set<local::EntryName>{{kCompiler, "MODULE_4+d7cde3b5"}}));
}

TEST_F(MaxSizeTest, AnEntryLockedByAChildProcessIsSkipped) {
  make_four();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto dir = sys::SafeDir::open(entry("MODULE_1+d7cde3b5"));
    local::EntryLock lock = local::EntryLock::acquire(dir, std::chrono::seconds(5));
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  local::CleanupResult result = clean(95 * kKiB);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(result.skipped_in_use, 1);
  EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_2+d7cde3b5")}));
  EXPECT_TRUE(fs::exists(entry("MODULE_1+d7cde3b5") / "model.neff"));
}

TEST_F(MaxSizeTest, FailedLockedAndEmptyEntriesAreNeverEvicted) {
  make_complete(root(), "MODULE_1+d7cde3b5", 10 * kKiB, base_);
  make_entry(root(), "MODULE_2+d7cde3b5", Kind::Locked);
  make_entry(root(), "MODULE_3+d7cde3b5", Kind::Empty);
  make_entry(root(), "MODULE_5e484d66cb3e29251244", Kind::Traced);
  local::CleanupOptions keep_locks;
  keep_locks.compiler_running = true;  // a compile runs: its LOCKED entry stays as it is
  local::CleanupResult result = clean(0, false, keep_locks);
  // The traced export is complete: it goes with the NEFF entry; the others are not.
  EXPECT_EQ(evicted_paths(result),
            (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5"),
                                      in_compiler("MODULE_5e484d66cb3e29251244")}));
  EXPECT_TRUE(fs::exists(entry("MODULE_2+d7cde3b5") / "model.hlo_module.pb.lock"));
  EXPECT_TRUE(fs::exists(entry("MODULE_3+d7cde3b5")));
  EXPECT_GT(result.size_after, 0u);
  EXPECT_TRUE(contains(result.summary(false),
                       "over the bound of 0 B: the rest is in use or not "
                       "complete"))
      << result.summary(false);
}

TEST_F(MaxSizeTest, TheOtherModesRunFirstEvenInADryRun) {
  make_four();
  make_entry(root(), "MODULE_8+d7cde3b5", Kind::Empty);  // 9 bytes of graph
  make_entry(root(), "MODULE_9+d7cde3b5", Kind::Failed);
  local::CleanupOptions all;
  all.remove_empty = true;
  for (bool dry_run : {true, false}) {
    local::CleanupResult result = clean(95 * kKiB, dry_run, all);
    EXPECT_EQ(result.empty_removed, 1);
    EXPECT_EQ(result.failed_removed, 1);
    EXPECT_EQ(result.size_before, 100 * kKiB) << dry_run;  // without what they removed
    EXPECT_EQ(evicted_paths(result), (std::vector<std::string>{in_compiler("MODULE_1+d7cde3b5")}));
  }
}

TEST_F(MaxSizeTest, ASymlinkedModuleOrCompilerFolderIsNeverFollowed) {
  make_four();
  fs::path outside = temp_ / "outside";
  make_complete(outside, "MODULE_7+d7cde3b5", 50 * kKiB, base_ - 86400.0);
  make_complete(outside / "elsewhere", "MODULE_8+d7cde3b5", 50 * kKiB, base_ - 86400.0);
  fs::create_directory_symlink(outside / kCompiler / "MODULE_7+d7cde3b5",
                               entry("MODULE_7+d7cde3b5"));
  fs::create_directory_symlink(outside / "elsewhere" / kCompiler,
                               root() / "neuronxcc-2.19.0.1+abcdef12");
  auto before = snapshot_tree(outside);
  local::CleanupResult result = clean(0);
  EXPECT_EQ(result.size_before, 100 * kKiB);  // the links count for nothing
  EXPECT_EQ(result.evicted.size(), 4u);
  EXPECT_EQ(snapshot_tree(outside), before);
  EXPECT_TRUE(fs::is_symlink(entry("MODULE_7+d7cde3b5")));
}

// Production shape: 2,000 entries of 1 KiB, one per minute; the bound keeps the newest 1,500.
TEST_F(MaxSizeTest, TwoThousandEntriesEvictTheOldestFiveHundred) {
  constexpr int kEntries = 2000;
  auto name = [](int i) {
    char text[40];
    std::snprintf(text, sizeof text, "MODULE_%05d+d7cde3b5", i);
    return std::string(text);
  };
  for (int i = 0; i < kEntries; ++i) make_complete(root(), name(i), kKiB, base_ + i * 60.0);
  // Recorded use of the 100 oldest: they stay, the next 500 go.
  std::vector<local::EntryName> used;
  for (int i = 0; i < 100; ++i) used.emplace_back(kCompiler, name(i));
  local::record_use(root(), used);
  local::CleanupResult result = clean(1500 * kKiB);
  EXPECT_EQ(result.size_before, kEntries * kKiB);
  EXPECT_EQ(result.size_after, 1500 * kKiB);
  ASSERT_EQ(result.evicted.size(), 500u);
  EXPECT_EQ(result.evicted.front().path, in_compiler(name(100)));
  EXPECT_EQ(result.evicted.back().path, in_compiler(name(599)));
  EXPECT_TRUE(fs::exists(entry(name(0))));
  EXPECT_FALSE(fs::exists(entry(name(599))));
  EXPECT_TRUE(fs::exists(entry(name(600))));
}

// A compile's capture reports the seeded entries it opened: adopt records their use.
TEST_F(MaxSizeTest, AnEntryACompileReusedIsRecordedAsUsed) {
  make_four();
  compile::SeedViews views(root());
  compile::CaptureCache capture(views, "reuse");
  std::string neff =
      testing::read_file(capture.dir() / kCompiler / "MODULE_1+d7cde3b5" / "model.neff");
  ASSERT_EQ(neff.size(), 10 * kKiB);
  compile::CaptureResult result = capture.collect(true);
  if (!result.usage_tracked) GTEST_SKIP() << "inotify cannot watch the run here";
  ASSERT_EQ(result.used.size(), 1u);
  capture.adopt(result);
  auto records = local::read_use_records(root());
  ASSERT_EQ(records.count(local::EntryName{kCompiler, "MODULE_1+d7cde3b5"}), 1u);
  double recorded = records[{kCompiler, "MODULE_1+d7cde3b5"}];
  EXPECT_GT(recorded, now_seconds() - 60);
}

// ---------------------------------------------------------------------------------------------
// The command

testing::ToolRun tool(const std::string& args, const std::string& env = "") {
  std::string command = std::string(testing::kCleanEnv) +
                        " PATH=/usr/bin:/bin HOME=/nonexistent-home " + env + " " +
                        testing::tool_path() + " " + args;
  testing::ToolRun run{};
  run.code = testing::run_command(command, &run.output);
  return run;
}

class MaxSizeCli : public MaxSizeTest {
 protected:
  void SetUp() override { make_four(); }
  std::string dir() const { return "--cache-dir '" + root().string() + "'"; }
};

TEST_F(MaxSizeCli, JsonNamesWhatWasEvicted) {
  testing::ToolRun dry = tool("cleanup --max-size 55KiB --dry-run " + dir());
  ASSERT_EQ(dry.code, 0) << dry.output;
  EXPECT_TRUE(contains(
      dry.output, "would evict " + in_compiler("MODULE_1+d7cde3b5") + " (10.0 KiB, last used "))
      << dry.output;
  EXPECT_TRUE(contains(dry.output, "[DRY RUN] Evicted 3 least recently used entries (60.0 KB)"))
      << dry.output;
  EXPECT_TRUE(fs::exists(entry("MODULE_1+d7cde3b5")));

  testing::ToolRun run = tool("cleanup --max-size 55K --json " + dir());
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  EXPECT_EQ(doc["max_size"], 55 * kKiB);
  EXPECT_EQ(doc["size_before"], 100 * kKiB);
  EXPECT_EQ(doc["size_after"], 40 * kKiB);
  EXPECT_EQ(doc["skipped_in_use"], 0);
  ASSERT_EQ(doc["evicted"].size(), 3u);
  EXPECT_EQ(doc["evicted"][0]["path"], in_compiler("MODULE_1+d7cde3b5"));
  EXPECT_EQ(doc["evicted"][0]["bytes"], 10 * kKiB);
  EXPECT_EQ(doc["evicted"][0]["last_used"], utc_text(static_cast<int64_t>(base_)));
  EXPECT_EQ(doc["bytes_freed"], 60 * kKiB);
  EXPECT_FALSE(fs::exists(entry("MODULE_3+d7cde3b5")));

  // Without a bound the fields say none.
  testing::ToolRun plain = tool("cleanup --json " + dir());
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_TRUE(pyjson::parse(plain.output)["max_size"].is_null());
}

TEST_F(MaxSizeCli, TheEnvironmentGivesTheDefaultAndTheFlagWins) {
  testing::ToolRun env = tool("cleanup --json " + dir(), "NEURON_CACHE_MAX_SIZE=95KiB");
  ASSERT_EQ(env.code, 0) << env.output;
  EXPECT_EQ(pyjson::parse(env.output)["evicted"].size(), 1u);
  testing::ToolRun flag =
      tool("cleanup --json --max-size 1GB " + dir(), "NEURON_CACHE_MAX_SIZE=10KiB");
  ASSERT_EQ(flag.code, 0) << flag.output;
  EXPECT_EQ(pyjson::parse(flag.output)["max_size"], 1000000000u);
  EXPECT_EQ(pyjson::parse(flag.output)["evicted"].size(), 0u);
  testing::ToolRun shown = tool("config show", "NEURON_CACHE_MAX_SIZE=95KiB");
  EXPECT_TRUE(contains(shown.output, "95KiB")) << shown.output;
}

TEST_F(MaxSizeCli, ABadSizeIsAnInputErrorNamingTheAcceptedForms) {
  auto before = snapshot_tree(root());
  testing::ToolRun run = tool("cleanup --max-size 200GB/s " + dir());
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "--max-size \"200GB/s\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "KiB, MiB, GiB, TiB")) << run.output;
  testing::ToolRun env = tool("cleanup " + dir(), "NEURON_CACHE_MAX_SIZE=lots");
  EXPECT_EQ(env.code, 2) << env.output;
  EXPECT_TRUE(contains(env.output, "NEURON_CACHE_MAX_SIZE \"lots\"")) << env.output;
  EXPECT_EQ(snapshot_tree(root()), before);
  testing::ToolRun help = tool("cleanup --help");
  EXPECT_TRUE(contains(help.output, "--max-size")) << help.output;
  EXPECT_TRUE(contains(help.output, "SCCACHE_CACHE_SIZE")) << help.output;
}

// The idle views of compile runs hold hard links to what is evicted: cleanup lets go of them.
TEST_F(MaxSizeCli, EvictedEntriesLeaveTheIdleCompileViews) {
  {
    compile::SeedViews views(root());
    compile::CaptureCache capture(views, "seed");
    ASSERT_TRUE(fs::exists(capture.dir() / kCompiler / "MODULE_1+d7cde3b5" / "model.neff"));
    capture.collect(true);
  }
  testing::ToolRun run = tool("cleanup --max-size 95KiB --json " + dir());
  ASSERT_EQ(run.code, 0) << run.output;
  auto doc = pyjson::parse(run.output);
  ASSERT_EQ(doc["evicted"].size(), 1u);
  EXPECT_EQ(doc["view_entries_unseeded"], 1);
  fs::path view = root() / ".cache/huggingface/neuron-cache-work/view-0";
  EXPECT_FALSE(fs::exists(view / kCompiler / "MODULE_1+d7cde3b5"));
  EXPECT_TRUE(fs::exists(view / kCompiler / "MODULE_2+d7cde3b5"));
}

}  // namespace
}  // namespace neuron_cache
