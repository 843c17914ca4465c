// cleanup_cache: optimum-cli neuron cache cleanup semantics and wording (format spec 5.4, 6), and
// the guarantee that nothing outside the cache is ever deleted through a planted symlink.
#include "neuron_cache/local/cleanup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/process/process.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::Kind;
using testing::make_entry;
using testing::read_file;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kCurrentDir = testing::kCompilerDir;
constexpr const char* kOldDir = "neuronxcc-2.19.0.1+abcdef12";
constexpr const char* kInstalled = "2.21.33363.0";

class CleanupTest : public ::testing::Test {
 protected:
  fs::path root() const { return temp_ / "cache"; }
  fs::path outside() const { return temp_ / "outside"; }
  fs::path current() const { return root() / kCurrentDir; }

  // A FAILED entry of exactly 34 bytes (hlo 9 + log 25), as in optimum-neuron's tests.
  void make_failed(const std::string& module, const std::string& compiler = kCurrentDir) {
    fs::path dir = make_entry(root(), module, Kind::Failed, compiler);
    fs::remove(dir / "compile_flags.json");
  }

  // One entry of each state; the locked one has an empty lock file.
  void make_every_state() {
    make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
    make_failed("MODULE_2+d7cde3b5");
    make_entry(root(), "MODULE_3+d7cde3b5", Kind::Locked);
    make_entry(root(), "MODULE_4+d7cde3b5", Kind::Empty);
    make_entry(root(), "MODULE_5e484d66cb3e29251244", Kind::Traced);
  }

  local::CleanupResult clean(local::CleanupOptions options = {}) {
    return local::cleanup_cache(local::LocalCache(root()), options);
  }

  TempDir temp_;
};

local::CleanupOptions with_all() {
  local::CleanupOptions options;
  options.remove_empty = true;
  return options;
}

local::CleanupOptions with_old_versions() {
  local::CleanupOptions options;
  options.remove_old_versions = true;
  options.installed_compiler = kInstalled;
  return options;
}

local::CleanupOptions with_wipe() {
  local::CleanupOptions options;
  options.wipe = true;
  return options;
}

local::CleanupOptions dry(local::CleanupOptions options) {
  options.dry_run = true;
  return options;
}

// ---------------------------------------------------------------------------------------------
// What is removed

TEST_F(CleanupTest, DefaultRemovesFailedEntriesAndStaleLockFiles) {
  make_every_state();

  local::CleanupResult result = clean();

  EXPECT_EQ(result.failed_removed, 1);
  EXPECT_EQ(result.locks_removed, 1);
  EXPECT_EQ(result.empty_removed, 0);
  EXPECT_EQ(result.bytes_freed, 34u);
  EXPECT_EQ(result.summary(false),
            "Removed 1 failed entries. Removed 1 stale lock files. Freed 34 B.");
  EXPECT_FALSE(fs::exists(current() / "MODULE_2+d7cde3b5"));
  // The locked entry itself stays: only its lock file goes.
  EXPECT_TRUE(fs::exists(current() / "MODULE_3+d7cde3b5" / "model.hlo_module.pb"));
  EXPECT_FALSE(fs::exists(current() / "MODULE_3+d7cde3b5" / "model.hlo_module.pb.lock"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_1+d7cde3b5" / "model.neff"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_4+d7cde3b5"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_5e484d66cb3e29251244"));
  EXPECT_EQ(result.removed,
            (std::vector<std::string>{
                std::string(kCurrentDir) + "/MODULE_2+d7cde3b5",
                std::string(kCurrentDir) + "/MODULE_3+d7cde3b5/model.hlo_module.pb.lock"}));
}

TEST_F(CleanupTest, NothingToCleanUp) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  local::CleanupResult result = clean();
  EXPECT_EQ(result.summary(false), "Nothing to clean up. Freed 0 B.");
  EXPECT_TRUE(result.removed.empty());
  EXPECT_TRUE(fs::exists(current() / "MODULE_1+d7cde3b5" / "model.done"));
}

TEST_F(CleanupTest, TheSummarySaysWhatTheCompileViewsLetGoAndWhatTheyStillHold) {
  local::CleanupResult result;
  result.view_entries_unseeded = 2;
  result.bytes_freed = 2048;
  EXPECT_EQ(result.summary(false),
            "Removed 2 deleted entries from idle compile views. Freed 2.0 KB.");
  result.views_in_use = 1;
  result.view_bytes_held = 1024;
  EXPECT_EQ(result.summary(false),
            "Removed 2 deleted entries from idle compile views. Freed 2.0 KB. 1.0 KB of deleted "
            "entries stay held by 1 compile views in use until their compiles end.");
}

TEST_F(CleanupTest, MissingRootIsNothingToCleanUp) {
  local::CleanupResult result =
      local::cleanup_cache(local::LocalCache(temp_ / "missing"), with_wipe());
  EXPECT_FALSE(result.wiped);
  EXPECT_EQ(result.summary(false), "Nothing to clean up. Freed 0 B.");
}

// Unlike optimum-neuron (whose --all deletes traced exports as EMPTY, format spec 2.4), --all
// keeps a complete traced export, and says so.
TEST_F(CleanupTest, AllRemovesEmptyEntriesButKeepsCompleteTracedExports) {
  make_every_state();

  local::CleanupResult result = clean(with_all());

  EXPECT_EQ(result.empty_removed, 1);
  EXPECT_EQ(result.traced_kept, 1);
  EXPECT_FALSE(fs::exists(current() / "MODULE_4+d7cde3b5"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_5e484d66cb3e29251244" / "model.neuron"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_1+d7cde3b5"));
  EXPECT_TRUE(fs::exists(current() / "MODULE_3+d7cde3b5"));  // LOCKED: lock removed, entry kept
  EXPECT_EQ(result.bytes_freed, 34u + 9u);
  EXPECT_EQ(result.summary(false),
            "Removed 1 failed entries. Removed 1 stale lock files. Removed 1 empty entries. Kept 1 "
            "complete traced exports (optimum-cli neuron cache cleanup --all would delete them as "
            "empty). Freed 43 B.");
}

// A traced export folder missing its *.neuron file (a copy killed half-way) is EMPTY: --all
// removes it.
TEST_F(CleanupTest, AllRemovesAnIncompleteTracedExport) {
  fs::path dir = make_entry(root(), "MODULE_5e484d66cb3e29251244", Kind::Traced);
  fs::remove(dir / "model.neuron");

  local::CleanupResult result = clean(with_all());

  EXPECT_EQ(result.empty_removed, 1);
  EXPECT_EQ(result.traced_kept, 0);
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(CleanupTest, OldVersionsRemovesCompilerFoldersNotMatchingTheInstalledPrefix) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success, "neuronxcc-2.21.33363.0+0000aaaa");
  make_failed("MODULE_2+d7cde3b5", kOldDir);  // counted as old-version data, not as failed
  write_file(root() / kOldDir / "0_REGISTRY/0.4.5/x/y.json", "{}");

  local::CleanupResult result = clean(with_old_versions());

  EXPECT_EQ(result.old_versions_removed, std::vector<std::string>{kOldDir});
  EXPECT_EQ(result.failed_removed, 0);
  EXPECT_EQ(result.bytes_freed, 34u + 2u);
  EXPECT_FALSE(fs::exists(root() / kOldDir));
  EXPECT_TRUE(fs::exists(current()));
  EXPECT_TRUE(fs::exists(root() / "neuronxcc-2.21.33363.0+0000aaaa"));  // same version prefix
  EXPECT_EQ(result.summary(false),
            "Removed old compiler versions: neuronxcc-2.19.0.1+abcdef12. Freed 36 B.");
}

TEST_F(CleanupTest, OldVersionsWithoutAnInstalledVersionIsAnInputError) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success, kOldDir);
  local::CleanupOptions options = with_old_versions();
  options.installed_compiler.clear();
  try {
    clean(options);
    FAIL() << "--old-versions ran without knowing the installed compiler";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
  }
  EXPECT_TRUE(fs::exists(root() / kOldDir / "MODULE_1+d7cde3b5"));
}

TEST_F(CleanupTest, WipeRemovesTheRoot) {
  make_every_state();
  write_file(root() / "lock", "");
  uint64_t total = 9 + 48 + std::string("neff-bytes-MODULE_1+d7cde3b5").size() + 34 + 9 + 9 + 40;

  local::CleanupResult result = clean(with_wipe());

  EXPECT_TRUE(result.wiped);
  EXPECT_EQ(result.bytes_freed, total);
  EXPECT_EQ(result.summary(false), "Cache wiped. Freed " + local::format_size(total) + ".");
  EXPECT_EQ(result.summary(false), "Cache wiped. Freed 177 B.");
  EXPECT_FALSE(fs::exists(root()));
  EXPECT_TRUE(fs::exists(temp_.path()));
}

// "--cache-dir /var/tmp/neuron-compile-cache/" from shell completion names the same folder.
TEST_F(CleanupTest, WipeAcceptsARootWithATrailingSlash) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  local::CleanupResult result =
      local::cleanup_cache(local::LocalCache(root().string() + "/"), with_wipe());
  EXPECT_TRUE(result.wiped);
  EXPECT_FALSE(fs::exists(root()));
}

TEST_F(CleanupTest, WipeRefusesARootThatIsASymlink) {
  make_entry(outside(), "MODULE_1+d7cde3b5", Kind::Success);
  fs::create_directory_symlink(outside(), temp_ / "linked-cache");
  auto before = snapshot_tree(outside());
  try {
    local::cleanup_cache(local::LocalCache(temp_ / "linked-cache"), with_wipe());
    FAIL() << "wiped through a symlinked root";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
  }
  EXPECT_EQ(snapshot_tree(outside()), before);
}

TEST_F(CleanupTest, RunningCompilerKeepsLockFiles) {
  make_every_state();
  local::CleanupOptions options;
  options.compiler_running = true;

  local::CleanupResult result = clean(options);

  EXPECT_EQ(result.locks_removed, 0);
  EXPECT_TRUE(fs::exists(current() / "MODULE_3+d7cde3b5" / "model.hlo_module.pb.lock"));
  EXPECT_EQ(result.failed_removed, 1);  // failures are removed even then, as in optimum-neuron
  EXPECT_EQ(result.summary(false),
            "Removed 1 failed entries. Skipped lock cleanup: neuronx-cc processes are currently "
            "running. Freed 34 B.");
}

// A lock file some live process holds an flock on is not stale, even with no neuronx-cc running
// (a neuron-cache download, or a compiler under another name): deleting it would let a second
// writer into the entry.
TEST_F(CleanupTest, LockFileHeldByALiveProcessIsKept) {
  fs::path entry = make_entry(root(), "MODULE_3+d7cde3b5", Kind::Locked);
  sys::SafeDir dir = sys::SafeDir::open(entry);
  int locked[2], release[2];
  ASSERT_EQ(pipe(locked), 0);
  ASSERT_EQ(pipe(release), 0);
  pid_t holder = fork();
  if (holder == 0) {
    close(release[1]);
    local::EntryLock lock = local::EntryLock::acquire(dir, 1s);
    char c = 'L';
    _exit(write(locked[1], &c, 1) == 1 && read(release[0], &c, 1) == 0 ? 0 : 1);
  }
  close(locked[1]);
  close(release[0]);
  char c = 0;
  ASSERT_EQ(read(locked[0], &c, 1), 1);

  local::CleanupResult while_held = clean();

  close(release[1]);
  close(locked[0]);
  int status = 0;
  waitpid(holder, &status, 0);
  EXPECT_EQ(while_held.locks_removed, 0);
  EXPECT_EQ(while_held.summary(false), "Nothing to clean up. Freed 0 B.");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(fs::exists(entry / "model.hlo_module.pb.lock"));
  EXPECT_EQ(clean().locks_removed, 1);  // its holder is gone: now it is stale
  EXPECT_FALSE(fs::exists(entry / "model.hlo_module.pb.lock"));
}

// Holds a lock of `kind` on `path` in a Python process, as libneuronxla might: "flock" is
// fcntl.flock (Python's filelock), "lockf" fcntl.lockf (a classic POSIX record lock). Released
// when the holder's stdin closes (release()) or the object goes.
class PythonLockHolder {
 public:
  PythonLockHolder(const fs::path& path, const std::string& kind) {
    static constexpr const char* kScript =
        "import fcntl, sys\n"
        "f = open(sys.argv[1], 'r+')\n"
        "(fcntl.flock if sys.argv[2] == 'flock' else fcntl.lockf)(f, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n";
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execlp("python3", "python3", "-c", kScript, path.c_str(), kind.c_str(), nullptr);
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    stdin_ = to_child[1];
    stdout_ = from_child[0];  // open until it exits: its print must never meet a closed pipe
    std::string said;
    char c = 0;
    while (said.size() < 16 && read(stdout_, &c, 1) == 1 && c != '\n') said += c;
    locked_ = said == "locked";
  }
  ~PythonLockHolder() { release(); }
  bool locked() const { return locked_; }
  int release() {
    if (pid_ <= 0) return -1;
    close(stdin_);
    int status = 0;
    waitpid(pid_, &status, 0);
    close(stdout_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  bool locked_ = false;
};

class CleanupLockKindTest : public CleanupTest,
                            public ::testing::WithParamInterface<std::string> {};

// libneuronxla's lock kind on model.hlo_module.pb.lock is not public, and on Linux an flock and
// a record lock do not exclude each other: cleanup and installs must see the entry busy under
// either, and take it once it is released.
TEST_P(CleanupLockKindTest, AnEntryLockedEitherWayIsBusyUntilReleased) {
  fs::path entry = make_entry(root(), "MODULE_3+d7cde3b5", Kind::Locked);
  fs::path lock_file = entry / "model.hlo_module.pb.lock";
  sys::SafeDir dir = sys::SafeDir::open(entry);
  PythonLockHolder holder(lock_file, GetParam());
  ASSERT_TRUE(holder.locked()) << "python3 could not take the " << GetParam() << " lock";

  EXPECT_FALSE(local::EntryLock::try_acquire(dir).has_value());
  EXPECT_THROW(local::EntryLock::acquire(dir, 200ms), Error);
  local::CleanupResult while_held = clean();
  EXPECT_EQ(while_held.locks_removed, 0);
  EXPECT_EQ(clean(dry({})).locks_removed, 0);
  ASSERT_TRUE(fs::exists(lock_file));

  ASSERT_EQ(holder.release(), 0);
  {
    std::optional<local::EntryLock> taken = local::EntryLock::try_acquire(dir);
    ASSERT_TRUE(taken.has_value());
    // Held by neuron-cache now: python3 cannot take either kind meanwhile.
    for (const char* kind : {"flock", "lockf"}) {
      auto probe = process::run_and_capture(
          {"python3", "-c",
           "import fcntl, sys\n"
           "f = open(sys.argv[1], 'r+')\n"
           "try:\n"
           "    (fcntl.flock if sys.argv[2] == 'flock' else fcntl.lockf)(f, fcntl.LOCK_EX | "
           "fcntl.LOCK_NB)\n"
           "except OSError:\n"
           "    sys.exit(3)\n",
           lock_file.string(), kind},
          10s);
      EXPECT_EQ(probe.exit_code, 3) << kind << " taken while neuron-cache held the entry";
    }
  }
  EXPECT_EQ(clean().locks_removed, 1);  // its holder is gone: now it is stale
  EXPECT_FALSE(fs::exists(lock_file));
}

INSTANTIATE_TEST_SUITE_P(PythonLocks, CleanupLockKindTest, ::testing::Values("flock", "lockf"));

TEST_F(CleanupTest, AbandonedStagingFoldersAreRemoved) {
  write_file(root() / ".cache/huggingface/neuron-cache-staging/MODULE_1+2.123.abc/model.neff",
             "0123456789");
  local::CleanupResult result = clean();
  EXPECT_EQ(result.staging_removed, 1);
  EXPECT_EQ(result.bytes_freed, 10u);
  EXPECT_EQ(result.summary(false), "Removed 1 abandoned neuron-cache staging folders. Freed 10 B.");
  EXPECT_TRUE(fs::is_empty(root() / ".cache/huggingface/neuron-cache-staging"));
}

// ---------------------------------------------------------------------------------------------
// Dry runs report exactly what the real run does, and change nothing

void expect_same_report(const local::CleanupResult& dry_result, const local::CleanupResult& real) {
  EXPECT_EQ(dry_result.failed_removed, real.failed_removed);
  EXPECT_EQ(dry_result.locks_removed, real.locks_removed);
  EXPECT_EQ(dry_result.empty_removed, real.empty_removed);
  EXPECT_EQ(dry_result.staging_removed, real.staging_removed);
  EXPECT_EQ(dry_result.old_versions_removed, real.old_versions_removed);
  EXPECT_EQ(dry_result.wiped, real.wiped);
  EXPECT_EQ(dry_result.bytes_freed, real.bytes_freed);
  EXPECT_EQ(dry_result.removed, real.removed);
  EXPECT_EQ(dry_result.summary(true), "[DRY RUN] " + real.summary(false));
}

TEST_F(CleanupTest, DryRunRemovesNothingAndReportsTheSame) {
  local::CleanupOptions every = with_old_versions();
  every.remove_empty = true;
  for (const local::CleanupOptions& options :
       {local::CleanupOptions{}, with_all(), every, with_wipe()}) {
    fs::remove_all(root());
    make_every_state();
    make_failed("MODULE_9+d7cde3b5", kOldDir);
    write_file(root() / ".cache/huggingface/neuron-cache-staging/x.1.abc/model.neff", "123");
    auto before = snapshot_tree(root());

    local::CleanupResult dry_result = clean(dry(options));
    EXPECT_EQ(snapshot_tree(root()), before);

    local::CleanupResult real = clean(options);
    expect_same_report(dry_result, real);
    EXPECT_NE(real.bytes_freed, 0u);
  }
}

TEST(CleanupSummary, DryRunPrefixesEveryForm) {
  local::CleanupResult nothing;
  EXPECT_EQ(nothing.summary(true), "[DRY RUN] Nothing to clean up. Freed 0 B.");
  local::CleanupResult wiped;
  wiped.wiped = true;
  wiped.bytes_freed = 1536;
  EXPECT_EQ(wiped.summary(true), "[DRY RUN] Cache wiped. Freed 1.5 KB.");
  local::CleanupResult several;
  several.old_versions_removed = {"neuronxcc-1", "neuronxcc-2"};
  EXPECT_EQ(several.summary(false),
            "Removed old compiler versions: neuronxcc-1, neuronxcc-2. Freed 0 B.");
}

TEST(FormatSize, MatchesOptimumNeuron) {
  EXPECT_EQ(local::format_size(0), "0 B");
  EXPECT_EQ(local::format_size(1023), "1023 B");
  EXPECT_EQ(local::format_size(1024), "1.0 KB");
  EXPECT_EQ(local::format_size(1024 * 1024 - 1),
            "1024.0 KB");  // Python's f"{x:.1f}" rounds the same
  EXPECT_EQ(local::format_size(3 * 1024 * 1024 / 2), "1.5 MB");
  EXPECT_EQ(local::format_size(2ull * 1024 * 1024 * 1024), "2.0 GB");
  EXPECT_EQ(local::format_size(5ull << 40), "5120.0 GB");
}

// ---------------------------------------------------------------------------------------------
// Symlink attack: links planted inside the cache never lead a deletion outside of it

class CleanupSymlinkAttackTest : public CleanupTest {
 protected:
  void SetUp() override {
    write_file(outside() / "victim_dir" / "model.log", "victim log");
    write_file(outside() / "victim_dir" / "model.hlo_module.pb", "victim hlo");
    write_file(outside() / "secret_log.txt", "secret log");
    write_file(outside() / "secret_lock.txt", "secret lock");
    write_file(outside() / "old_compiler" / "MODULE_1+2" / "model.log", "old log");
    write_file(outside() / "staging_victim" / "file", "staging victim");
    plant_links();
    before_ = snapshot_tree(outside());
  }

  void plant_links() {
    // A MODULE_ folder that is a link to a folder holding a model.log (FAILED if followed).
    fs::create_directories(current());
    fs::create_directory_symlink(outside() / "victim_dir", current() / "MODULE_linkdir+d7cde3b5");
    // A FAILED-looking entry whose model.log is a link to an outside file.
    fs::path failed_link = make_entry(root(), "MODULE_loglink+d7cde3b5", Kind::Empty);
    fs::create_symlink(outside() / "secret_log.txt", failed_link / "model.log");
    // A real FAILED entry (removed) holding links to outside files and folders.
    fs::path failed = make_entry(root(), "MODULE_failed+d7cde3b5", Kind::Failed);
    fs::create_symlink(outside() / "secret_log.txt", failed / "linked-file");
    fs::create_directory_symlink(outside() / "victim_dir", failed / "linked-dir");
    // A LOCKED entry whose lock file is a link to an outside file.
    fs::path locked = make_entry(root(), "MODULE_locklink+d7cde3b5", Kind::Empty);
    fs::create_symlink(outside() / "secret_lock.txt", locked / "model.hlo_module.pb.lock");
    // A compiler folder link (old version) and a real old folder holding a link.
    fs::create_directory_symlink(outside() / "old_compiler", root() / "neuronxcc-1.0.0+linked");
    make_entry(root(), "MODULE_1+2", Kind::Empty, kOldDir);
    fs::create_directory_symlink(outside(), root() / kOldDir / "MODULE_1+2" / "up");
    // Links in the staging area, and the staging area's parent as a link.
    fs::path staging = root() / ".cache/huggingface/neuron-cache-staging";
    fs::create_directories(staging);
    fs::create_directory_symlink(outside() / "staging_victim", staging / "MODULE_1+2.1.abc");
    fs::create_symlink(outside() / "secret_log.txt", staging / "MODULE_1+2.2.def");
  }

  void expect_outside_untouched() { EXPECT_EQ(snapshot_tree(outside()), before_); }

  std::map<std::string, std::string> before_;
};

TEST_F(CleanupSymlinkAttackTest, CleanupWithEveryOptionDeletesNothingOutside) {
  local::CleanupOptions options = with_old_versions();
  options.remove_empty = true;

  local::CleanupResult result = clean(options);

  expect_outside_untouched();
  EXPECT_FALSE(fs::exists(current() / "MODULE_failed+d7cde3b5"));
  EXPECT_FALSE(fs::exists(root() / kOldDir));
  EXPECT_FALSE(fs::exists(
      fs::symlink_status(current() / "MODULE_locklink+d7cde3b5" / "model.hlo_module.pb.lock")));
  // Links to folders are never entered, so the linked compiler and module folders stay.
  EXPECT_TRUE(fs::is_symlink(current() / "MODULE_linkdir+d7cde3b5"));
  EXPECT_TRUE(fs::is_symlink(root() / "neuronxcc-1.0.0+linked"));
  EXPECT_EQ(result.old_versions_removed, std::vector<std::string>{kOldDir});
}

TEST_F(CleanupSymlinkAttackTest, DefaultCleanupDeletesNothingOutside) {
  clean();
  expect_outside_untouched();
  EXPECT_FALSE(fs::exists(current() / "MODULE_failed+d7cde3b5"));
}

TEST_F(CleanupSymlinkAttackTest, WipeDeletesNothingOutside) {
  local::CleanupResult result = clean(with_wipe());
  expect_outside_untouched();
  EXPECT_TRUE(result.wiped);
  EXPECT_FALSE(fs::exists(fs::symlink_status(root())));
}

TEST_F(CleanupSymlinkAttackTest, DryRunsDeleteNothing) {
  auto inside = snapshot_tree(root());
  local::CleanupOptions every = with_old_versions();
  every.remove_empty = true;
  clean(dry(every));
  clean(dry(with_wipe()));
  expect_outside_untouched();
  EXPECT_EQ(snapshot_tree(root()), inside);
}

}  // namespace
}  // namespace neuron_cache
