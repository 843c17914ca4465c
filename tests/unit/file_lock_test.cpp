// sys::FileLock, the one bounded wait for a lock file, and what waits through it: the statistics
// (local/run_stats.h) skip a run rather than write unlocked or wait forever.
#include "neuron_cache/sys/file_lock.h"
#include "neuron_cache/sys/duration.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <limits>
#include <memory>
#include <thread>

#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/local/run_stats.h"
#include "neuron_cache/sys/safe_dir.h"
#include "test_support.h"

namespace neuron_cache::testing {
namespace {

using Clock = sys::FileLock::Clock;
using namespace std::chrono_literals;

// Another holder of `path`'s flock: a second open file description conflicts with ours.
class OtherFlock {
 public:
  explicit OtherFlock(const fs::path& path, const std::string& content = "") {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(flock(fd_, LOCK_EX | LOCK_NB), 0);
    if (!content.empty()) {
      EXPECT_EQ(write(fd_, content.data(), content.size()), ssize_t(content.size()));
    }
  }
  ~OtherFlock() { close(fd_); }

 private:
  int fd_ = -1;
};

TEST(FileLockTest, AFreeLockIsTakenAtOnceWithoutWaiting) {
  TempDir dir;
  int waits = 0;
  auto lock = sys::FileLock::acquire(sys::SafeDir::open(dir.path()), "a.lock", sys::LockKind::Flock,
                                     Clock::now(), [&](const std::string&) { ++waits; });
  ASSERT_TRUE(lock);
  EXPECT_EQ(waits, 0);
  EXPECT_EQ(lock->path(), dir.path() / "a.lock");
}

TEST(FileLockTest, AHeldLockIsWaitedForUntilTheDeadlineThenNothing) {
  TempDir dir;
  OtherFlock other(dir.path() / "a.lock", "4242\n");
  std::vector<std::string> holders;
  auto start = Clock::now();
  auto lock = sys::FileLock::acquire(sys::SafeDir::open(dir.path()), "a.lock", sys::LockKind::Flock,
                                     start + 300ms,
                                     [&](const std::string& holder) { holders.push_back(holder); });
  EXPECT_FALSE(lock);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_LT(Clock::now() - start, 5s) << "the wait is bounded by its deadline";
  EXPECT_EQ(holders, std::vector<std::string>{"4242"})
      << "the waiter is told once, with the holder";
}

TEST(FileLockTest, AHolderTextLongerThanAPidIsNotRead) {
  TempDir dir;
  OtherFlock other(dir.path() / "a.lock", std::string(1 << 20, '7'));
  std::vector<std::string> holders;
  auto lock = sys::FileLock::acquire(sys::SafeDir::open(dir.path()), "a.lock", sys::LockKind::Flock,
                                     Clock::now(),
                                     [&](const std::string& holder) { holders.push_back(holder); });
  EXPECT_FALSE(lock);
  EXPECT_EQ(holders, std::vector<std::string>{""});
}

TEST(FileLockTest, ALockReleasedDuringTheWaitIsTaken) {
  TempDir dir;
  auto other = std::make_unique<OtherFlock>(dir.path() / "a.lock");
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    other.reset();
  });
  auto lock = sys::FileLock::acquire(sys::SafeDir::open(dir.path()), "a.lock", sys::LockKind::Flock,
                                     Clock::now() + 10s);
  release.join();
  EXPECT_TRUE(lock);
}

TEST(FileLockTest, ARecordLockHeldByAnotherProcessIsWaitedFor) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = open((dir.path() / "a.lock").c_str(), O_RDWR | O_CREAT, 0644);
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    if (fd < 0 || fcntl(fd, F_SETLK, &whole) != 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    sleep(2);
    _exit(0);
  }
  char x = 0;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  sys::SafeDir root = sys::SafeDir::open(dir.path());
  EXPECT_FALSE(sys::FileLock::acquire(root, "a.lock", sys::LockKind::Record, Clock::now() + 200ms));
  auto lock = sys::FileLock::acquire(root, "a.lock", sys::LockKind::Record, Clock::now() + 20s);
  EXPECT_TRUE(lock) << "taken once the holder exits";
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(ready[0]);
  close(ready[1]);
}

TEST(FileLockTest, ASymlinkIsNeverFollowed) {
  TempDir dir;
  write_file(dir.path() / "target", "keep");
  fs::create_symlink(dir.path() / "target", dir.path() / "a.lock");
  EXPECT_THROW(sys::FileLock::acquire(sys::SafeDir::open(dir.path()), "a.lock",
                                      sys::LockKind::Flock, Clock::now()),
               Error);
  EXPECT_EQ(read_file(dir.path() / "target"), "keep");
}

// One rule for every length of time a person reads: waits, ETAs, compile time saved.
TEST(DurationTextTest, LengthsAreNamedAsPeopleSayThem) {
  EXPECT_EQ(sys::duration_text(0ms), "0 s");
  EXPECT_EQ(sys::duration_text(250ms), "250 ms");
  EXPECT_EQ(sys::duration_text(2s), "2 s");
  EXPECT_EQ(sys::duration_text(2500ms), "2.5 s");
  EXPECT_EQ(sys::duration_text(12s), "12 s");
  EXPECT_EQ(sys::duration_text(119s), "119 s");
  EXPECT_EQ(sys::duration_text(30min), "30 min");
  EXPECT_EQ(sys::duration_text(119min), "119 min");
  EXPECT_EQ(sys::duration_text(2h), "2 h");
  EXPECT_EQ(sys::duration_text(90min + 90min), "3 h");
  EXPECT_EQ(sys::duration_text(1800.0 * 3), "90 min");
  EXPECT_EQ(sys::duration_text(1800.0 * 5), "2.5 h");
  EXPECT_EQ(sys::duration_text(0.3), "300 ms");
  EXPECT_EQ(sys::duration_text(45.4), "45 s");
}

TEST(DurationTextTest, HostileLengthsReadAsNothing) {
  EXPECT_EQ(sys::duration_text(-5s), "0 s");
  EXPECT_EQ(sys::duration_text(-1.0), "0 s");
  EXPECT_EQ(sys::duration_text(std::numeric_limits<double>::quiet_NaN()), "0 s");
  EXPECT_EQ(sys::duration_text(std::numeric_limits<double>::infinity()), "277777777.8 h");
  EXPECT_EQ(sys::duration_text(1e300), "277777777.8 h");
  EXPECT_EQ(sys::duration_text(std::chrono::milliseconds::max()).empty(), false);
}

TEST(RunStatsTest, ALockHeldPastTheBoundSkipsTheRunAndLeavesTheFile) {
  TempDir root;
  ASSERT_TRUE(local::update_stats(root.path(), [](local::Stats& s) { s.stores["a"].runs = 1; }));
  fs::path lock_file = root.path() / ".cache/huggingface/neuron-cache-stats.lock";
  ASSERT_TRUE(fs::exists(lock_file));
  {
    OtherFlock other(lock_file);
    bool changed = false;
    EXPECT_FALSE(local::update_stats(
        root.path(), [&](local::Stats&) { changed = true; }, 200ms));
    EXPECT_FALSE(changed) << "nothing is read or written without the lock";
    EXPECT_THROW(local::zero_stats(root.path(), 200ms), Error);
  }
  EXPECT_EQ(local::read_stats(root.path()).stores["a"].runs, 1u);
  ASSERT_TRUE(local::update_stats(root.path(), [](local::Stats& s) { ++s.stores["a"].runs; }));
  EXPECT_EQ(local::read_stats(root.path()).stores["a"].runs, 2u);
}

// Every field goes through one list both ways; hostile numbers in the file read as 0, never as
// an out-of-range conversion.
TEST(RunStatsTest, EveryFieldRoundTripsAndHostileNumbersReadAsZero) {
  TempDir root;
  ASSERT_TRUE(local::update_stats(root.path(), [](local::Stats& s) {
    local::StoreStats& a = s.stores["a"];
    a.runs = 1, a.local_hits = 2, a.store_hits = 3, a.misses = 4, a.compiled = 5, a.reused = 6;
    a.failed = 7, a.bytes_reused = 8, a.bytes_downloaded = 9, a.bytes_uploaded = 10;
    a.compile_seconds = 11.5, a.compile_seconds_saved = 12.5;
  }));
  local::StoreStats a = local::read_stats(root.path()).stores["a"];
  EXPECT_EQ(
      std::vector<uint64_t>({a.runs, a.local_hits, a.store_hits, a.misses, a.compiled, a.reused,
                             a.failed, a.bytes_reused, a.bytes_downloaded, a.bytes_uploaded}),
      std::vector<uint64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(a.compile_seconds, 11.5);
  EXPECT_EQ(a.compile_seconds_saved, 12.5);

  fs::path file = root.path() / ".cache/huggingface/neuron-cache-stats.json";
  std::string text = read_file(file);
  for (auto [from, to] :
       {std::pair{"\"runs\": 1", "\"runs\": 1e300"}, std::pair{"\"misses\": 4", "\"misses\": -4"},
        std::pair{"\"compiled\": 5", "\"compiled\": 18446744073709551615"},
        std::pair{"\"compile_seconds\": 11.5", "\"compile_seconds\": -1e300"}}) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    text.replace(at, std::string(from).size(), to);
  }
  write_file(file, text);
  a = local::read_stats(root.path()).stores["a"];
  EXPECT_EQ(a.runs, 0u);
  EXPECT_EQ(a.misses, 0u);
  EXPECT_EQ(a.compiled, 0u);
  EXPECT_EQ(a.compile_seconds, 0);
  EXPECT_EQ(a.local_hits, 2u) << "the other fields are kept";
}

TEST(PrefetchLockTest, ASecondPrefetchPastTheBoundGoesOnBesideTheFirst) {
  TempDir root;
  local::PrefetchLock first = local::PrefetchLock::acquire(root.path(), {});
  EXPECT_TRUE(first.held());
  std::vector<std::string> said;
  local::PrefetchLock second = local::PrefetchLock::acquire(
      root.path(), [&](const std::string& line) { said.push_back(line); }, 200ms);
  EXPECT_FALSE(second.held());
  ASSERT_EQ(said.size(), 2u);
  std::string pid = "(pid " + std::to_string(getpid()) + ")";
  EXPECT_TRUE(contains(said[0], pid) && contains(said[0], "at most 200 ms")) << said[0];
  EXPECT_TRUE(contains(said[1], "prefetching beside it")) << said[1];
}

}  // namespace
}  // namespace neuron_cache::testing
