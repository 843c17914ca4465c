// SafeDir: every name inside the cache is resolved without following symlinks, because the
// default root sits in world-writable /var/tmp where anyone may plant a link.
#include "neuron_cache/sys/safe_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <set>

#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/temp_file.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::read_file;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

// A cache root and an "outside" folder that the code must never touch through a link.
class SafeDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    write_file(outside() / "secret.txt", "outside secret");
    write_file(outside() / "folder" / "data.bin", "outside data");
  }
  fs::path root() const { return temp_ / "cache"; }
  fs::path outside() const { return temp_ / "outside"; }

  TempDir temp_;
};

mode_t permission_bits(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// Sets the process umask for one test and puts the previous one back.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(umask(mask)) {}
  ~ScopedUmask() { umask(previous_); }

 private:
  mode_t previous_;
};

TEST_F(SafeDirTest, MakeSubdirRefusesAPlantedSymlinkAndWritesNothingOutside) {
  fs::create_directory_symlink(outside() / "folder", root() / "neuronxcc-2.21");
  auto before = snapshot_tree(outside());
  sys::SafeDir dir = sys::SafeDir::open(root());
  try {
    dir.make_subdir("neuronxcc-2.21");
    FAIL() << "make_subdir went through a symlink";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Operational);
    EXPECT_NE(std::string(error.what()).find("is a symlink or a file"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(dir.make_path("neuronxcc-2.21/MODULE_1+2"), Error);
  EXPECT_EQ(snapshot_tree(outside()), before);
}

TEST_F(SafeDirTest, MakeSubdirRefusesARegularFile) {
  write_file(root() / "not-a-dir", "x");
  EXPECT_THROW(sys::SafeDir::open(root()).make_subdir("not-a-dir"), Error);
}

TEST_F(SafeDirTest, MakePathCreatesEveryComponent) {
  sys::SafeDir leaf = sys::SafeDir::open(root()).make_path("a/b/c");
  EXPECT_TRUE(fs::is_directory(root() / "a" / "b" / "c"));
  EXPECT_EQ(leaf.path(), root() / "a" / "b" / "c");
  // Opening again is fine: existing folders are reused.
  EXPECT_NO_THROW(sys::SafeDir::open(root()).make_path("a/b/c"));
}

TEST_F(SafeDirTest, OpenSubdirReturnsNothingForSymlinksFilesAndMissingNames) {
  fs::create_directory_symlink(outside() / "folder", root() / "linked");
  write_file(root() / "file", "x");
  fs::create_directory(root() / "real");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_FALSE(dir.open_subdir("linked").has_value());
  EXPECT_FALSE(dir.open_subdir("file").has_value());
  EXPECT_FALSE(dir.open_subdir("missing").has_value());
  EXPECT_TRUE(dir.open_subdir("real").has_value());
}

TEST_F(SafeDirTest, OpenReadRefusesSymlinks) {
  fs::create_symlink(outside() / "secret.txt", root() / "model.log");
  sys::SafeDir dir = sys::SafeDir::open(root());
  try {
    dir.open_read("model.log");
    FAIL() << "open_read followed a symlink";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("is a symlink"), std::string::npos) << error.what();
  }
  EXPECT_THROW(dir.read_small_file("model.log"), Error);
}

// A FIFO planted under a registry name must not hang status or cleanup forever.
TEST_F(SafeDirTest, OpenReadRefusesAFifoWithoutBlocking) {
  ASSERT_EQ(mkfifo((root() / "entry.json").c_str(), 0644), 0);
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_THROW(dir.open_read("entry.json"), Error);
  EXPECT_THROW(dir.read_small_file("entry.json"), Error);
}

TEST_F(SafeDirTest, ReadSmallFileReadsAndEnforcesTheLimit) {
  write_file(root() / "flags.json", "[\"--target=trn1\"]");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_EQ(dir.read_small_file("flags.json"), "[\"--target=trn1\"]");
  EXPECT_THROW(dir.read_small_file("flags.json", 4), Error);
}

// O_EXCL never follows a link: a planted model.neff link cannot create a file elsewhere.
TEST_F(SafeDirTest, CreateNewDoesNotWriteThroughASymlink) {
  fs::create_symlink(outside() / "created-by-link", root() / "model.neff");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_THROW(dir.write_new_file("model.neff", "payload"), Error);
  EXPECT_FALSE(fs::exists(outside() / "created-by-link"));
  write_file(root() / "existing", "old");
  EXPECT_THROW(dir.write_new_file("existing", "new"), Error);
  EXPECT_EQ(read_file(root() / "existing"), "old");
}

TEST_F(SafeDirTest, RemoveTreeDeletesLinksButNotWhatTheyPointTo) {
  fs::path victim = root() / "MODULE_1+2";
  write_file(victim / "model.neff", "0123456789");    // 10 bytes
  write_file(victim / "sub" / "model.log", "12345");  // 5 bytes
  fs::create_symlink(outside() / "secret.txt", victim / "file-link");
  fs::create_directory_symlink(outside() / "folder", victim / "dir-link");
  fs::create_directory_symlink(outside(), victim / "sub" / "up-link");
  auto before = snapshot_tree(outside());

  uint64_t freed = sys::SafeDir::open(root()).remove_tree("MODULE_1+2");

  EXPECT_EQ(freed, 15u);  // regular files only: links are not counted
  EXPECT_FALSE(fs::exists(fs::symlink_status(victim)));
  EXPECT_EQ(snapshot_tree(outside()), before);
}

TEST_F(SafeDirTest, RemoveTreeOfALinkRemovesOnlyTheLink) {
  fs::create_directory_symlink(outside() / "folder", root() / "MODULE_link");
  auto before = snapshot_tree(outside());
  EXPECT_EQ(sys::SafeDir::open(root()).remove_tree("MODULE_link"), 0u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(root() / "MODULE_link")));
  EXPECT_EQ(snapshot_tree(outside()), before);
  EXPECT_EQ(sys::SafeDir::open(root()).remove_tree("missing"), 0u);
}

TEST_F(SafeDirTest, TreeSizeCountsRegularFilesAndIgnoresSymlinks) {
  fs::path entry = root() / "MODULE_1+2";
  write_file(entry / "model.neff", std::string(1000, 'n'));
  write_file(entry / "nested" / "more.bin", std::string(24, 'm'));
  fs::create_symlink(outside() / "secret.txt", entry / "file-link");
  fs::create_directory_symlink(outside() / "folder", entry / "dir-link");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_EQ(dir.tree_size("MODULE_1+2"), 1024u);
  EXPECT_EQ(sys::SafeDir::open(entry).tree_size("file-link"), 0u);
  EXPECT_EQ(dir.tree_size("missing"), 0u);
}

TEST_F(SafeDirTest, ListReportsTypesAndSizesWithoutFollowingLinks) {
  write_file(root() / "file", "abc");
  fs::create_directory(root() / "dir");
  fs::create_symlink(outside() / "secret.txt", root() / "link");
  std::map<std::string, std::pair<sys::NodeType, uint64_t>> seen;
  for (const auto& item : sys::SafeDir::open(root()).list())
    seen[item.name] = {item.type, item.size};
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen["file"], std::make_pair(sys::NodeType::File, uint64_t{3}));
  EXPECT_EQ(seen["dir"].first, sys::NodeType::Directory);
  EXPECT_EQ(seen["link"], std::make_pair(sys::NodeType::Symlink, uint64_t{0}));
}

// A folder larger than one getdents64 buffer is listed whole, and again from its start by the
// next list() (the offset is the descriptor's own); its size from that listing is tree_size's.
TEST_F(SafeDirTest, ListOfALargeFolderIsWholeEveryTime) {
  fs::path big = root() / "MODULE_big";
  for (int i = 0; i < 1500; ++i)
    write_file(big / ("a-rather-long-file-name-to-fill-the-buffer-" + std::to_string(i)), "xy");
  write_file(big / "nested" / "more.bin", std::string(10, 'm'));
  sys::SafeDir dir = sys::SafeDir::open(big);
  std::vector<sys::DirEntry> first = dir.list();
  std::vector<sys::DirEntry> second = dir.list();
  EXPECT_EQ(first.size(), 1501u);
  EXPECT_EQ(second.size(), first.size());
  std::set<std::string> names;
  for (const auto& item : second) names.insert(item.name);
  EXPECT_EQ(names.size(), 1501u);
  EXPECT_FALSE(names.count(".") || names.count(".."));
  EXPECT_EQ(dir.listed_size(first), 3010u);
  EXPECT_EQ(sys::SafeDir::open(root()).tree_size("MODULE_big"), 3010u);
}

TEST_F(SafeDirTest, MoveToWithNoReplaceKeepsTheExistingFile) {
  write_file(root() / "staged", "new");
  write_file(root() / "target", "old");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_FALSE(dir.move_to("staged", dir, "target", true));
  EXPECT_EQ(read_file(root() / "target"), "old");
  EXPECT_TRUE(dir.move_to("staged", dir, "target", false));
  EXPECT_EQ(read_file(root() / "target"), "new");
  EXPECT_FALSE(fs::exists(root() / "staged"));
}

// The one atomic small-file write: whole file or none, the existing one kept on request, and no
// temporary left behind either way (it would be published by synchronize otherwise).
TEST_F(SafeDirTest, PublishFileReplacesOrKeepsAndLeavesNoTemporaryFile) {
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_TRUE(dir.publish_file("entry.json", "first", true));
  EXPECT_FALSE(dir.publish_file("entry.json", "second", true));
  EXPECT_EQ(read_file(root() / "entry.json"), "first");
  EXPECT_TRUE(dir.publish_file("entry.json", "third", false));
  EXPECT_EQ(read_file(root() / "entry.json"), "third");
  EXPECT_EQ(permission_bits(root() / "entry.json"), 0644u);
  EXPECT_EQ(dir.list().size(), 1u);
  EXPECT_THROW(dir.publish_file("../escape", "x", false), Error);
}

TEST_F(SafeDirTest, PublishFileWritesNotThroughASymlinkedName) {
  fs::create_symlink(outside() / "secret.txt", root() / "link.json");
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_TRUE(dir.publish_file("link.json", "replaced", false));
  EXPECT_EQ(read_file(outside() / "secret.txt"), "outside secret");
  EXPECT_FALSE(fs::is_symlink(root() / "link.json"));
  EXPECT_EQ(read_file(root() / "link.json"), "replaced");
}

TEST_F(SafeDirTest, LinkFdLinksTheOpenedInodeEvenAfterItsNameChanged) {
  write_file(root() / "checked", "checked bytes");
  sys::SafeDir dir = sys::SafeDir::open(root());
  sys::UniqueFd fd = dir.open_read("checked");
  fs::rename(root() / "checked", root() / "moved");  // a deleted file cannot be linked again
  fs::create_symlink(outside() / "secret.txt", root() / "checked");
  EXPECT_TRUE(dir.link_fd(fd.get(), "linked"));
  EXPECT_EQ(read_file(root() / "linked"), "checked bytes");
  EXPECT_FALSE(dir.link_fd(fd.get(), "linked"));  // EEXIST: never replaces
}

TEST(CheckPlainName, RejectsNamesThatCouldLeaveTheFolder) {
  for (std::string_view bad : {"", ".", "..", "a/b", "/abs", "trailing/"}) {
    EXPECT_THROW(sys::check_plain_name(bad), Error) << "\"" << bad << "\"";
  }
  EXPECT_THROW(sys::check_plain_name(std::string_view("a\0b", 3)), Error);
  for (std::string_view good : {"MODULE_1+2", "model.neff", "...", ".cache", "a b"}) {
    EXPECT_NO_THROW(sys::check_plain_name(good)) << good;
  }
}

TEST_F(SafeDirTest, NamesWithSlashesAreRefusedByEveryOperation) {
  sys::SafeDir dir = sys::SafeDir::open(root());
  EXPECT_THROW(dir.open_subdir("../outside"), Error);
  EXPECT_THROW(dir.make_subdir(".."), Error);
  EXPECT_THROW(dir.open_read("../outside/secret.txt"), Error);
  EXPECT_THROW(dir.remove_tree(".."), Error);
  EXPECT_THROW(dir.write_new_file("a/b", "x"), Error);
}

// Modes must not depend on the caller's umask: with umask 0 a created folder would otherwise be
// world-writable, and check_root_is_safe would refuse the cache we just created.
TEST_F(SafeDirTest, CreatedFoldersAre0755AndFiles0644EvenWithUmaskZero) {
  ScopedUmask mask(0);
  sys::SafeDir created = sys::SafeDir::open_or_create(temp_ / "fresh" / "root");
  EXPECT_EQ(permission_bits(temp_ / "fresh"), 0755u);
  EXPECT_EQ(permission_bits(temp_ / "fresh" / "root"), 0755u);
  sys::SafeDir sub = created.make_path("neuronxcc-2.21/MODULE_1+2");
  EXPECT_EQ(permission_bits(temp_ / "fresh" / "root" / "neuronxcc-2.21"), 0755u);
  EXPECT_EQ(permission_bits(sub.path()), 0755u);
  sub.write_new_file("model.neff", "neff");
  sys::UniqueFd streamed = sub.create_new("model.hlo_module.pb");
  EXPECT_TRUE(streamed);
  EXPECT_EQ(permission_bits(sub.path() / "model.neff"), 0644u);
  EXPECT_EQ(permission_bits(sub.path() / "model.hlo_module.pb"), 0644u);
}

TEST_F(SafeDirTest, OpenOrCreateOpensAnExistingFolderAndRefusesAFile) {
  EXPECT_EQ(sys::SafeDir::open_or_create(root()).path(), root());
  write_file(temp_ / "plain-file", "x");
  EXPECT_THROW(sys::SafeDir::open_or_create(temp_ / "plain-file"), Error);
  EXPECT_THROW(sys::SafeDir::open(temp_ / "missing"), Error);
}

TEST(UniqueFdTest, ClosesOnDestructionAndMoves) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    sys::UniqueFd first(raw);
    sys::UniqueFd second(std::move(first));
    EXPECT_FALSE(first);
    EXPECT_EQ(second.get(), raw);
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);  // closed exactly once
}

// What a commit sends from a temporary file (an index shard, a lease) is readable by its path
// like any file, and a process killed while holding it leaves nothing in TMPDIR.
TEST(TempFile, IsReadByItsPathAndAKilledProcessLeavesNothingBehind) {
  TempDir tmp;
  const char* old = getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  {
    sys::TempFile file("{\"format\": 2}");
    EXPECT_EQ(read_file(file.path()), "{\"format\": 2}");
    EXPECT_EQ(fs::file_size(file.path()), 13u);
  }
  pid_t child = fork();
  if (child == 0) {
    sys::TempFile file(std::string(1 << 20, 'x'));
    kill(getpid(), SIGKILL);  // no destructor runs
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  if (saved.empty()) {
    unsetenv("TMPDIR");
  } else {
    setenv("TMPDIR", saved.c_str(), 1);
  }
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "a killed push left a file in TMPDIR";
}

}  // namespace
}  // namespace neuron_cache
