// EntryInstall: an entry written by neuron-cache is either complete (SUCCESS with the exact bytes)
// or not SUCCESS at all, whatever the moment the writer dies, and concurrent writers of one entry
// produce one complete copy. Writers run in forked children so that they can be killed for real.
#include "neuron_cache/local/entry_install.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/cleanup.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using layout::EntryState;
using testing::Kind;
using testing::make_entry;
using testing::read_file;
using testing::TempDir;
using testing::write_file;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kCompiler = testing::kCompilerDir;
constexpr const char* kModule = "MODULE_42+d7cde3b5";
constexpr int kExitInstalled = 0;
constexpr int kExitAlreadyComplete = 3;
constexpr int kExitError = 99;

using Files = std::vector<std::pair<std::string, std::string>>;

// A compiled entry as libneuronxla leaves it; the NEFF holds NUL bytes to prove exact copies.
Files compiled_entry(const std::string& neff) {
  return {{"model.hlo_module.pb", "hlo-bytes"},
          {"compile_flags.json", "[\"--model-type=transformer\", \"--auto-cast=none\"]"},
          {"model.neff", neff},
          {"model.done", ""}};
}

const std::string kNeff = std::string("neff\0with\0nul", 13);

void stage(local::EntryInstall& install, const Files& files) {
  for (const auto& [name, content] : files) install.add_file(name, content);
}

fs::path entry_path(const fs::path& root) {
  return root / kCompiler / kModule;
}
fs::path staging_path(const fs::path& root) {
  return root / layout::kStagingDir;
}

// How optimum-neuron would classify the entry now; a missing folder is EMPTY.
EntryState state_of(const fs::path& root) {
  if (!fs::is_directory(entry_path(root))) return EntryState::Empty;
  sys::SafeDir compiler = sys::SafeDir::open(root / kCompiler);
  return local::LocalCache(root).inspect_module(compiler, kModule).state;
}

size_t count_children(const fs::path& dir) {
  if (!fs::is_directory(dir)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

bool has_lock_file(const fs::path& root) {
  return fs::exists(fs::symlink_status(entry_path(root) / layout::kEntryLock));
}

local::InstallOutcome install_now(const fs::path& root, const Files& files,
                                  std::chrono::milliseconds timeout = 2s) {
  local::EntryInstall install(root, kCompiler, kModule);
  stage(install, files);
  return install.commit(timeout);
}

local::InstallOutcome install_traced(const fs::path& root, const Files& files) {
  local::EntryInstall install(root, kCompiler, "MODULE_5e484d66cb3e29251244");
  stage(install, files);
  return install.commit(2s);
}

// ---------------------------------------------------------------------------------------------
// Child processes

// Both ends of a pipe, closed at scope exit.
class Pipe {
 public:
  Pipe() {
    if (pipe(fds_) != 0) throw std::runtime_error("pipe failed");
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void close_read() { close_fd(fds_[0]); }
  void close_write() { close_fd(fds_[1]); }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  int fds_[2] = {-1, -1};
};

void write_line(int fd, std::string_view line) {
  std::string text = std::string(line) + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) _exit(kExitError);
}

// One line, or nothing at end of file.
std::optional<std::string> read_line(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional(line);
    if (c == '\n') return line;
    line += c;
  }
}

// Runs `body` in a forked child whose exit code is its return value; it never returns into the
// test runner (an exception exits with kExitError).
pid_t fork_child(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int code = kExitError;
  try {
    code = body();
  } catch (...) {
  }
  _exit(code);
}

// The exit code, or -signal for a killed child.
int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

int exit_code_of(local::InstallOutcome outcome) {
  return outcome == local::InstallOutcome::Installed ? kExitInstalled : kExitAlreadyComplete;
}

// A stuck child or pipe must fail the run rather than hang it.
class EntryInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alarm(120);
    previous_sigpipe_ = signal(SIGPIPE, SIG_IGN);  // a dead child must not kill the runner
  }
  void TearDown() override {
    alarm(0);
    signal(SIGPIPE, previous_sigpipe_);
  }
  fs::path root() const { return temp_ / "cache"; }
  TempDir temp_;
  sighandler_t previous_sigpipe_ = SIG_DFL;
};

// ---------------------------------------------------------------------------------------------
// Plain installs

TEST_F(EntryInstallTest, NewEntryIsSuccessWithExactBytesAndNothingLeftBehind) {
  EXPECT_EQ(install_now(root(), compiled_entry(kNeff)), local::InstallOutcome::Installed);

  EXPECT_EQ(state_of(root()), EntryState::Success);
  for (const auto& [name, content] : compiled_entry(kNeff)) {
    EXPECT_EQ(read_file(entry_path(root()) / name), content) << name;
  }
  EXPECT_EQ(count_children(entry_path(root())), 4u);
  EXPECT_FALSE(has_lock_file(root()));
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, StreamedFileIsInstalledByteForByte) {
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 251);
  {
    local::EntryInstall install(root(), kCompiler, kModule);
    sys::UniqueFd fd = install.create_file("model.neff");
    for (size_t offset = 0; offset < big.size(); offset += 65536) {
      ASSERT_EQ(write(fd.get(), big.data() + offset, 65536), 65536);
    }
    fd = sys::UniqueFd();
    install.add_file("model.done", "");
    EXPECT_EQ(install.commit(), local::InstallOutcome::Installed);
  }
  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"), big);
  EXPECT_EQ(state_of(root()), EntryState::Success);
}

// A NEFF replacing a cached compiler failure must drop model.log, or the entry stays poisoned.
TEST_F(EntryInstallTest, InstallOverAFailedEntryRemovesTheLog) {
  make_entry(root(), kModule, Kind::Failed);
  ASSERT_EQ(state_of(root()), EntryState::Failed);

  EXPECT_EQ(install_now(root(), compiled_entry(kNeff)), local::InstallOutcome::Installed);

  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_FALSE(fs::exists(entry_path(root()) / "model.log"));
  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"), kNeff);
}

TEST_F(EntryInstallTest, CompleteEntryIsKeptAsItIs) {
  make_entry(root(), kModule, Kind::Success);
  std::string old_neff = read_file(entry_path(root()) / "model.neff");

  EXPECT_EQ(install_now(root(), compiled_entry("other bytes")),
            local::InstallOutcome::AlreadyComplete);

  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"), old_neff);
  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_FALSE(has_lock_file(root()));
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

// The batch path prefetch uses: several folders, three filesystem flushes, same outcomes.
TEST_F(EntryInstallTest, BatchInstallsEachFolderOrKeepsTheCompleteOne) {
  make_entry(root(), kModule, Kind::Success);
  std::string old_neff = read_file(entry_path(root()) / "model.neff");
  std::vector<std::unique_ptr<local::EntryInstall>> installs;
  std::vector<local::EntryInstall::BatchItem> items;
  const std::vector<std::string> names = {kModule, "MODULE_43+d7cde3b5", "MODULE_44+d7cde3b5"};
  for (const auto& name : names) {
    installs.push_back(std::make_unique<local::EntryInstall>(root(), kCompiler, name));
    stage(*installs.back(), compiled_entry(kNeff + name));
    items.push_back({installs.back().get(), std::nullopt, ""});
  }
  std::vector<std::string> steps;
  installs[1]->on_step = [&](std::string_view step) { steps.emplace_back(step); };
  local::EntryInstall::commit_all(items);
  EXPECT_EQ(items[0].outcome, local::InstallOutcome::AlreadyComplete);
  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"), old_neff);
  for (size_t i = 1; i < names.size(); ++i) {
    EXPECT_EQ(items[i].outcome, local::InstallOutcome::Installed) << items[i].error;
    fs::path dir = root() / kCompiler / names[i];
    EXPECT_EQ(read_file(dir / "model.neff"), kNeff + names[i]);
    sys::SafeDir compiler = sys::SafeDir::open(root() / kCompiler);
    EXPECT_EQ(local::LocalCache(root()).inspect_module(compiler, names[i]).state,
              EntryState::Success);
    EXPECT_FALSE(fs::exists(dir / "model.hlo_module.pb.lock"));
  }
  // model.done moves only after every other file of the batch was renamed and flushed.
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front(), "staged");
  EXPECT_EQ(steps.back(), "synced");
  installs.clear();
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, StaleDoneMarkerWithoutNeffIsReplaced) {
  fs::create_directories(entry_path(root()));
  write_file(entry_path(root()) / "model.done", "");
  write_file(entry_path(root()) / "model.hlo_module.pb.lock", "");
  EXPECT_EQ(install_now(root(), compiled_entry(kNeff)), local::InstallOutcome::Installed);
  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_FALSE(has_lock_file(root()));
}

// Export files under a NEFF folder's name ("+<flags key>") make no traced export, and a plain
// folder without model.neff is never installed: nothing of it lands in the entry.
TEST_F(EntryInstallTest, APlainFolderWithoutItsNeffIsRefused) {
  const Files traced = {{"model.neuron", "traced-model"},
                        {"config.json", "{\"model_type\": \"bert\"}"},
                        {"tokenizer/vocab.txt", "[PAD]\n"}};
  try {
    install_now(root(), traced);
    FAIL() << "installed a folder without model.neff";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no model.neff"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(entry_path(root()) / "config.json"));
  EXPECT_FALSE(fs::exists(entry_path(root()) / "model.done"));
  EXPECT_FALSE(has_lock_file(root()));
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

// model.done is the installer's: whatever was staged under that name (bytes a store served) is
// replaced by libneuronxla's empty marker, and a caller that stages none still gets one.
TEST_F(EntryInstallTest, TheDoneMarkerIsWrittenByTheInstallerAlone) {
  Files files = compiled_entry(kNeff);
  files.back().second = "bytes a store said were the marker";
  EXPECT_EQ(install_now(root(), files), local::InstallOutcome::Installed);
  EXPECT_EQ(read_file(entry_path(root()) / "model.done"), "");

  fs::remove_all(entry_path(root()));
  files.pop_back();
  EXPECT_EQ(install_now(root(), files), local::InstallOutcome::Installed);
  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_EQ(read_file(entry_path(root()) / "model.done"), "");
}

// Staging names are a digest, not the module's name: a 255-byte name (allowed) still installs,
// and a killed writer's staging of it is still found and reused.
TEST_F(EntryInstallTest, AModuleNameOfTheMaximumLengthInstalls) {
  const std::string name = "MODULE_" + std::string(255 - 7 - 9, '7') + "+d7cde3b5";
  ASSERT_EQ(name.size(), 255u);
  // Left as a killed writer leaves it: the folder stays, its flock goes with the process.
  pid_t child = fork_child([&] {
    local::EntryInstall killed(root(), kCompiler, name);
    stage(killed, compiled_entry(kNeff));
    kill(getpid(), SIGKILL);
    return 0;
  });
  ASSERT_EQ(wait_child(child), -SIGKILL);
  local::EntryInstall install(root(), kCompiler, name);
  auto reused = install.reuse_abandoned({{"model.neff", kNeff.size(), sha256_hex(kNeff)}},
                                        local::list_staging_folders(root()));
  EXPECT_EQ(reused.files, std::vector<std::string>{"model.neff"});
  install.add_file("compile_flags.json", "[]");
  EXPECT_EQ(install.commit(2s), local::InstallOutcome::Installed);
  EXPECT_EQ(read_file(root() / kCompiler / name / "model.neff"), kNeff);
  EXPECT_EQ(read_file(root() / kCompiler / name / "model.done"), "");
}

// rename() cannot put a folder over a file nor a file over a folder: both must still install.
TEST_F(EntryInstallTest, FilesAndFoldersReplaceEachOther) {
  write_file(entry_path(root()) / "tokenizer", "a file where the export now has a folder");
  write_file(entry_path(root()) / "config.json" / "old.txt", "a folder where a file goes");

  EXPECT_EQ(install_now(
                root(),
                {{"tokenizer/vocab.txt", "[PAD]\n"}, {"config.json", "{}"}, {"model.neff", kNeff}}),
            local::InstallOutcome::Installed);

  EXPECT_EQ(read_file(entry_path(root()) / "tokenizer" / "vocab.txt"), "[PAD]\n");
  EXPECT_EQ(read_file(entry_path(root()) / "config.json"), "{}");
  EXPECT_FALSE(has_lock_file(root()));
}

TEST_F(EntryInstallTest, AbandonedInstallLeavesNoStagingAfterDestruction) {
  {
    local::EntryInstall install(root(), kCompiler, kModule);
    stage(install, compiled_entry(kNeff));
    EXPECT_EQ(count_children(staging_path(root())), 1u);
  }
  EXPECT_EQ(count_children(staging_path(root())), 0u);
  EXPECT_FALSE(fs::exists(entry_path(root())));
}

TEST_F(EntryInstallTest, BadNamesAreRefused) {
  EXPECT_THROW(local::EntryInstall(root(), "..", kModule), Error);
  EXPECT_THROW(local::EntryInstall(root(), kCompiler, "a/b"), Error);
  local::EntryInstall install(root(), kCompiler, kModule);
  EXPECT_THROW(install.add_file("../escape", "x"), Error);
  EXPECT_FALSE(fs::exists(staging_path(root()).parent_path() / "escape"));
}

// ---------------------------------------------------------------------------------------------
// Killed writers

// What the parent saw of a writer it killed at one of its steps.
struct KillReport {
  std::vector<std::string> steps;  // the steps the writer reported, the kill step last
  bool killed = false;             // false: the writer finished before reaching the step
  int exit_code = 0;
};

// Forks a writer that pauses at every step of commit() until the parent lets it go on, and
// SIGKILLs it while it waits at step number `kill_at`.
KillReport kill_at_step(const fs::path& root, size_t kill_at, const Files& files) {
  Pipe steps, go;
  pid_t pid = fork_child([&] {
    steps.close_read();
    go.close_write();
    local::EntryInstall install(root, kCompiler, kModule);
    stage(install, files);
    install.on_step = [&](std::string_view step) {
      write_line(steps.write_end(), step);
      char c = 0;
      if (read(go.read_end(), &c, 1) != 1) _exit(kExitError);
    };
    return exit_code_of(install.commit(2s));
  });
  steps.close_write();
  go.close_read();
  KillReport report;
  while (auto step = read_line(steps.read_end())) {
    report.steps.push_back(*step);
    if (report.steps.size() == kill_at + 1) {
      kill(pid, SIGKILL);
      report.killed = true;
      break;
    }
    if (write(go.write_end(), "c", 1) != 1) break;
  }
  report.exit_code = wait_child(pid);
  return report;
}

bool reached(const std::vector<std::string>& steps, const std::string& step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

// After any kill: a fresh install of the entry works (the dead writer's flock is gone even if
// its lock file is not), and cleanup removes the dead writer's staging folder.
void expect_recovery(const fs::path& root, const std::string& where) {
  bool was_complete = state_of(root) == EntryState::Success;
  size_t leftovers = count_children(staging_path(root));
  local::InstallOutcome outcome = install_now(root, compiled_entry(kNeff), 1s);
  EXPECT_EQ(outcome == local::InstallOutcome::AlreadyComplete, was_complete) << where;
  EXPECT_EQ(state_of(root), EntryState::Success) << where;
  if (!was_complete) {
    EXPECT_EQ(read_file(entry_path(root) / "model.neff"), kNeff) << where;
  }
  EXPECT_FALSE(has_lock_file(root)) << where;  // both outcomes remove the lock file they hold

  local::CleanupResult cleaned =
      local::cleanup_cache(local::LocalCache(root), local::CleanupOptions{});
  EXPECT_EQ(cleaned.staging_removed, static_cast<int>(leftovers)) << where;
  EXPECT_EQ(count_children(staging_path(root)), 0u) << where;
}

// Kills a writer at each step of commit() in turn, over an entry prepared by `prepare`.
// Returns the steps killed at.
std::set<std::string> kill_at_every_step(const std::function<void(const fs::path&)>& prepare) {
  std::set<std::string> killed_at;
  for (size_t k = 0; k < 20; ++k) {
    TempDir temp;
    fs::path root = temp / "cache";
    prepare(root);
    KillReport report = kill_at_step(root, k, compiled_entry(kNeff));
    if (!report.killed) {
      EXPECT_EQ(report.exit_code, kExitInstalled);
      EXPECT_EQ(state_of(root), EntryState::Success);
      break;
    }
    const std::string& step = report.steps.back();
    killed_at.insert(step);
    EntryState state = state_of(root);
    if (reached(report.steps, "done")) {
      EXPECT_EQ(state, EntryState::Success) << "killed at " << step;
    } else {
      EXPECT_NE(state, EntryState::Success) << "killed at " << step;
    }
    expect_recovery(root, "killed at " + step);
  }
  return killed_at;
}

const std::set<std::string> kAllSteps = {"staged",
                                         "locked",
                                         "moved model.hlo_module.pb",
                                         "moved compile_flags.json",
                                         "moved model.neff",
                                         "synced",
                                         "done",
                                         "unlocked"};

TEST_F(EntryInstallTest, KilledAtAnyStepANewEntryIsNeverSuccessBeforeDone) {
  std::set<std::string> killed_at =
      kill_at_every_step([](const fs::path& root) { fs::create_directories(root); });
  EXPECT_EQ(killed_at, kAllSteps);
}

TEST_F(EntryInstallTest, KilledAtAnyStepOverAFailedEntryIsNeverSuccessBeforeDone) {
  std::set<std::string> killed_at =
      kill_at_every_step([](const fs::path& root) { make_entry(root, kModule, Kind::Failed); });
  EXPECT_EQ(killed_at, kAllSteps);
}

// A done marker left by an interrupted writer must be dropped before the new NEFF lands.
TEST_F(EntryInstallTest, KilledAtAnyStepOverAStaleDoneMarkerIsNeverSuccessBeforeDone) {
  std::set<std::string> killed_at = kill_at_every_step([](const fs::path& root) {
    make_entry(root, kModule, Kind::Empty);
    write_file(entry_path(root) / "model.done", "");
  });
  EXPECT_EQ(killed_at, kAllSteps);
}

// Kills a writer streaming a 64 MiB NEFF after it reported `kill_after_chunks` chunks written.
// Steps are reported without pausing, so the kill can land anywhere after that point.
KillReport kill_while_streaming(const fs::path& root, int kill_after_chunks) {
  constexpr size_t kChunk = 1 << 20;
  constexpr int kChunks = 64;
  Pipe steps;
  pid_t pid = fork_child([&] {
    steps.close_read();
    local::EntryInstall install(root, kCompiler, kModule);
    install.on_step = [&](std::string_view step) { write_line(steps.write_end(), step); };
    sys::UniqueFd neff = install.create_file("model.neff");
    const std::string chunk(kChunk, 'n');
    for (int i = 0; i < kChunks; ++i) {
      if (write(neff.get(), chunk.data(), kChunk) != static_cast<ssize_t>(kChunk)) return 98;
      write_line(steps.write_end(), "chunk");
    }
    neff = sys::UniqueFd();
    install.add_file("model.done", "");
    return exit_code_of(install.commit(2s));
  });
  steps.close_write();
  KillReport report;
  int chunks = 0;
  while (auto step = read_line(steps.read_end())) {
    if (*step == "chunk" && ++chunks > kill_after_chunks && !report.killed) {
      kill(pid, SIGKILL);
      report.killed = true;
    }
    if (*step != "chunk") report.steps.push_back(*step);
  }
  report.exit_code = wait_child(pid);
  return report;
}

TEST_F(EntryInstallTest, KilledAtRandomPointsOfALargeStreamedWriteIsNeverSuccess) {
  std::mt19937 random(20240611);  // fixed seed: the same kill points on every run
  std::uniform_int_distribution<int> chunk(0, 63);
  for (int round = 0; round < 5; ++round) {
    TempDir temp;
    fs::path root = temp / "cache";
    int kill_after = round == 4 ? 63 : chunk(random);  // the last round: right before commit
    KillReport report = kill_while_streaming(root, kill_after);
    std::string where = "killed after chunk " + std::to_string(kill_after);
    // The done marker is renamed just after "synced", before "done" can be reported.
    if (!reached(report.steps, "synced")) {
      EXPECT_NE(state_of(root), EntryState::Success) << where;
    }
    // Nothing is moved into the entry before the writer holds the lock and says so.
    if (!reached(report.steps, "locked")) {
      EXPECT_FALSE(fs::exists(entry_path(root) / "model.neff")) << where;
    }
    expect_recovery(root, where);
  }
}

// ---------------------------------------------------------------------------------------------
// Concurrent writers and locks

TEST_F(EntryInstallTest, ConcurrentWritersProduceExactlyOneCompleteEntry) {
  constexpr int kWriters = 4;
  fs::create_directories(root());
  Pipe start;
  std::vector<pid_t> pids;
  for (int i = 0; i < kWriters; ++i) {
    pids.push_back(fork_child([&, i] {
      start.close_write();
      local::EntryInstall install(root(), kCompiler, kModule);
      stage(install, compiled_entry("neff of writer " + std::to_string(i)));
      char c = 0;
      if (read(start.read_end(), &c, 1) != 0) return kExitError;  // released together at EOF
      return exit_code_of(install.commit(20s));
    }));
  }
  start.close_write();
  std::vector<int> codes;
  for (pid_t pid : pids) codes.push_back(wait_child(pid));

  ASSERT_EQ(std::count(codes.begin(), codes.end(), kExitInstalled), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), kExitAlreadyComplete), kWriters - 1);
  int winner =
      static_cast<int>(std::find(codes.begin(), codes.end(), kExitInstalled) - codes.begin());
  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"),
            "neff of writer " + std::to_string(winner));
  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_FALSE(has_lock_file(root()));
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, LockHeldByAnotherProcessTimesOutWithAHelpfulMessage) {
  sys::SafeDir entry =
      sys::SafeDir::open_or_create(root()).make_path(std::string(kCompiler) + "/" + kModule);
  Pipe locked, release;
  pid_t holder = fork_child([&] {
    locked.close_read();
    release.close_write();
    local::EntryLock lock = local::EntryLock::acquire(entry, 1s);
    write_line(locked.write_end(), "locked");
    char c = 0;
    return read(release.read_end(), &c, 1) == 0 ? 0 : kExitError;  // hold until released
  });
  locked.close_write();
  release.close_read();
  ASSERT_EQ(read_line(locked.read_end()), "locked");

  auto started = std::chrono::steady_clock::now();
  try {
    local::EntryLock::acquire(entry, 300ms);
    ADD_FAILURE() << "acquired a lock another process holds";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_EQ(error.kind(), ErrorKind::Operational);
    EXPECT_NE(message.find(entry.path().string()), std::string::npos) << message;
    EXPECT_NE(message.find("locked by another process"), std::string::npos) << message;
    EXPECT_NE(message.find("fuser -v"), std::string::npos) << message;  // how to find the holder
  }
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  EXPECT_THROW(install_now(root(), compiled_entry(kNeff), 200ms), Error);
  EXPECT_NE(state_of(root()), EntryState::Success);

  release.close_write();
  EXPECT_EQ(wait_child(holder), 0);
  EXPECT_NO_THROW(local::EntryLock::acquire(entry, 1s).release_and_remove());
  EXPECT_FALSE(has_lock_file(root()));
}

// cleanup must not delete the staging folder of a writer that is still running.
TEST_F(EntryInstallTest, CleanupKeepsTheStagingFolderOfALiveWriter) {
  local::EntryInstall install(root(), kCompiler, kModule);
  stage(install, compiled_entry(kNeff));
  local::CleanupResult cleaned =
      local::cleanup_cache(local::LocalCache(root()), local::CleanupOptions{});
  EXPECT_EQ(cleaned.staging_removed, 0);
  EXPECT_EQ(count_children(staging_path(root())), 1u);
  EXPECT_EQ(install.commit(), local::InstallOutcome::Installed);
  EXPECT_EQ(read_file(entry_path(root()) / "model.neff"), kNeff);
}

TEST_F(EntryInstallTest, RootWritableByAllNeedsTheStickyBit) {
  fs::create_directories(root());
  ASSERT_EQ(chmod(root().c_str(), 0777), 0);
  try {
    local::check_root_is_safe(root());
    ADD_FAILURE() << "a world-writable root without sticky bit was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("sticky bit"), std::string::npos) << error.what();
  }
  EXPECT_THROW(local::EntryInstall(root(), kCompiler, kModule), Error);

  ASSERT_EQ(chmod(root().c_str(), 01777), 0);  // like /var/tmp itself
  EXPECT_NO_THROW(local::check_root_is_safe(root()));
  ASSERT_EQ(chmod(root().c_str(), 0755), 0);
  EXPECT_NO_THROW(local::check_root_is_safe(root()));
  EXPECT_NO_THROW(local::check_root_is_safe(temp_ / "missing"));
}

// ---------------------------------------------------------------------------------------------
// Traced exports (MODULE_<entry hash>, no model.neff/model.done): renamed into place whole.

constexpr const char* kTraced = "MODULE_5e484d66cb3e29251244";

// A diffusion export: model_index.json at the top, compiled components in sub-folders.
const Files kDiffusion = {{"model_index.json", "{\"_class_name\": \"StableDiffusionPipeline\"}"},
                          {"unet/config.json", "{\"neuron\": {}}"},
                          {"unet/model.neuron", std::string("unet\0neff", 9)},
                          {"text_encoder/config.json", "{}"},
                          {"text_encoder/model.neuron", "text-encoder"},
                          {"tokenizer/vocab.json", "{}"}};

fs::path traced_path(const fs::path& root) {
  return root / kCompiler / kTraced;
}

EntryState traced_state(const fs::path& root) {
  sys::SafeDir compiler = sys::SafeDir::open(root / kCompiler);
  return local::LocalCache(root).inspect_module(compiler, kTraced).state;
}

TEST_F(EntryInstallTest, TracedExportAppearsOnlyWholeUnderItsName) {
  local::EntryInstall install(root(), kCompiler, kTraced);
  stage(install, kDiffusion);
  std::vector<std::string> seen;
  install.on_step = [&](std::string_view step) {
    seen.push_back(std::string(step) + (fs::exists(traced_path(root())) ? " present" : ""));
  };

  EXPECT_EQ(install.commit(), local::InstallOutcome::Installed);

  EXPECT_EQ(seen, (std::vector<std::string>{"staged", "renamed present"}));
  for (const auto& [name, content] : kDiffusion) {
    EXPECT_EQ(read_file(traced_path(root()) / name), content) << name;
  }
  EXPECT_EQ(traced_state(root()), EntryState::Traced);
  EXPECT_FALSE(fs::exists(traced_path(root()) / layout::kEntryLock)) << "it would be LOCKED";
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, CompleteTracedExportIsKeptAndAnIncompleteOneReplaced) {
  make_entry(root(), kTraced, Kind::Traced);  // complete: config.json, model.neuron, tokenizer/
  const std::string before = read_file(traced_path(root()) / "model.neuron");
  EXPECT_EQ(install_traced(root(), kDiffusion), local::InstallOutcome::AlreadyComplete);
  EXPECT_EQ(read_file(traced_path(root()) / "model.neuron"), before);

  fs::remove(traced_path(root()) / "model.neuron");  // a copy killed half-way
  ASSERT_EQ(traced_state(root()), EntryState::Empty);
  EXPECT_EQ(install_traced(root(), kDiffusion), local::InstallOutcome::Installed);
  EXPECT_EQ(traced_state(root()), EntryState::Traced);
  EXPECT_FALSE(fs::exists(traced_path(root()) / "config.json")) << "the old folder is gone";
  EXPECT_EQ(read_file(traced_path(root()) / "unet/model.neuron"), kDiffusion[2].second);
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, IncompleteStagedTracedExportIsRefused) {
  Files no_config = {{"model.neuron", "x"}, {"tokenizer.json", "{}"}};
  EXPECT_THROW(install_traced(root(), no_config), Error);
  EXPECT_FALSE(fs::exists(traced_path(root())));
  EXPECT_EQ(count_children(staging_path(root())), 0u);
}

TEST_F(EntryInstallTest, BatchInstallsTracedAndNeffEntriesTogether) {
  local::EntryInstall traced(root(), kCompiler, kTraced);
  stage(traced, kDiffusion);
  local::EntryInstall neff(root(), kCompiler, kModule);
  stage(neff, compiled_entry(kNeff));
  std::vector<local::EntryInstall::BatchItem> items{{&traced, std::nullopt, ""},
                                                    {&neff, std::nullopt, ""}};

  local::EntryInstall::commit_all(items);

  for (const auto& item : items) {
    EXPECT_EQ(item.outcome, local::InstallOutcome::Installed) << item.error;
  }
  EXPECT_EQ(traced_state(root()), EntryState::Traced);
  EXPECT_EQ(state_of(root()), EntryState::Success);
  EXPECT_EQ(read_file(traced_path(root()) / "text_encoder/model.neuron"), "text-encoder");
}

// ---------------------------------------------------------------------------------------------
// EntryInstall::link_file, which adopt() stages the compiled files with.

struct stat stat_of(const fs::path& path) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) throw std::runtime_error("cannot stat " + path.string());
  return info;
}

TEST(EntryInstallLinkFile, HardLinksTheSourceIntoTheEntry) {
  TempDir tmp;
  write_file(tmp / "src" / "model.neff", std::string("neff\0bytes", 10));
  write_file(tmp / "src" / "model.done", "");
  {
    local::EntryInstall install(tmp / "cache", kCompiler, "MODULE_7+d7cde3b5");
    install.link_file("model.neff", tmp / "src" / "model.neff");
    install.link_file("sub/dir/model.done", tmp / "src" / "model.done");
    install.link_file("model.done", tmp / "src" / "model.done");
    EXPECT_EQ(install.commit(), local::InstallOutcome::Installed);
  }
  fs::path entry = tmp / "cache" / kCompiler / "MODULE_7+d7cde3b5";
  EXPECT_EQ(read_file(entry / "model.neff"), std::string("neff\0bytes", 10));
  EXPECT_EQ(stat_of(entry / "model.neff").st_ino, stat_of(tmp / "src" / "model.neff").st_ino);
  EXPECT_TRUE(fs::is_regular_file(entry / "sub" / "dir" / "model.done"));
  // The top model.done is the installer's own marker, never a staged file.
  EXPECT_EQ(stat_of(tmp / "src" / "model.done").st_nlink, 2u);
}

TEST(EntryInstallLinkFile, RefusesSymlinksAndMissingFiles) {
  TempDir tmp;
  write_file(tmp / "outside", "secret");
  fs::create_symlink(tmp / "outside", tmp / "link");
  local::EntryInstall install(tmp / "cache", kCompiler, "MODULE_7+d7cde3b5");
  EXPECT_THROW(install.link_file("model.neff", tmp / "link"), Error);
  EXPECT_THROW(install.link_file("model.neff", tmp / "missing"), Error);
  EXPECT_THROW(install.link_file("../model.neff", tmp / "outside"), Error);
}

TEST(EntryInstallLinkFile, CopiesAcrossFilesystems) {
  TempDir tmp;
  fs::path shm_file = "/dev/shm/neuron-cache-link-test-" + std::to_string(getpid());
  std::error_code error;
  write_file(shm_file, "neff from another filesystem");
  if (stat_of(shm_file).st_dev == stat_of(tmp.path()).st_dev) {
    fs::remove(shm_file, error);
    GTEST_SKIP() << "/dev/shm is on the same filesystem as the temp dir";
  }
  {
    local::EntryInstall install(tmp / "cache", kCompiler, "MODULE_7+d7cde3b5");
    install.link_file("model.neff", shm_file);
    install.commit();
  }
  fs::path neff = tmp / "cache" / kCompiler / "MODULE_7+d7cde3b5" / "model.neff";
  EXPECT_EQ(read_file(neff), "neff from another filesystem");
  EXPECT_EQ(stat_of(neff).st_nlink, 1u);
  fs::remove(shm_file, error);
}

}  // namespace
}  // namespace neuron_cache
