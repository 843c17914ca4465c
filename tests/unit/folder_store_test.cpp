// FolderStore (file:///path): a shared folder many machines write. Checked at production shapes:
// two processes merging one index file, a writer killed with kill -9 mid-commit, symlinks planted
// in the store, a 1 GiB file.
#include "neuron_cache/storage/folder_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "index_samples.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/storage/forwarding_store.h"
#include "neuron_cache/sys/mounts.h"
#include "neuron_cache/sys/safe_dir.h"
#include "test_support.h"

namespace neuron_cache::storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_file;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;

constexpr const char* kShard = "neuron-cache-index/neuronxcc-2.21/org--model.json";
constexpr const char* kModule = "neuronxcc-2.21/MODULE_123+abcdef01";

CommitOperation add(const std::string& path, const fs::path& local, Expected expected = {}) {
  return {CommitOperation::Kind::Add, path, local, std::move(expected)};
}

// Writes `bytes` pseudo-random bytes (seeded) to `file` without holding them in memory.
void write_random_file(const fs::path& file, uint64_t bytes, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB
  std::ofstream out(file, std::ios::binary);
  for (uint64_t done = 0; done < bytes;) {
    for (auto& word : block) word = generator();
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(block.size() * 8, bytes - done));
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(chunk));
    done += chunk;
  }
}

class FolderStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    create_folder_store(root());  // what `neuron-cache create -n file:///...` does
    fs::create_directories(work());
  }
  fs::path root() const { return temp_ / "store"; }
  fs::path work() const { return temp_ / "work"; }
  fs::path local(const std::string& name, const std::string& content) const {
    write_file(work() / name, content);
    return work() / name;
  }

  TempDir temp_;
};

TEST_F(FolderStoreTest, ListsStatsReadsAndDownloadsWhatItCommitted) {
  FolderStore store(root());
  EXPECT_EQ(store.location(), "file://" + root().string());
  EXPECT_EQ(store.kind(), Kind::Folder);
  EXPECT_EQ(store.unreachable(), "");
  EXPECT_EQ(store.why_not_writable(), "");
  EXPECT_EQ(store.read_small(kShard, "", 1 << 20), std::nullopt);
  CommitResult result = store.commit({add(std::string(kModule) + "/model.neff", local("n", "NEFF")),
                                      add(std::string(kModule) + "/model.done", local("d", "")),
                                      add(kShard, local("s", "{\"a\":1}"))},
                                     "m", std::nullopt);
  EXPECT_TRUE(result.committed);
  EXPECT_EQ(result.small_files, 3u);

  auto top = store.list("", false, "");
  ASSERT_EQ(top.size(), 2u);  // two folders, the lock file is not listed
  for (const auto& entry : top) EXPECT_TRUE(entry.is_directory) << entry.path;
  auto files = store.list(kModule, true, "");
  ASSERT_EQ(files.size(), 2u);
  std::map<std::string, RemoteEntry> by_path;
  for (auto& entry : files) by_path[entry.path] = entry;
  const RemoteEntry& neff = by_path.at(std::string(kModule) + "/model.neff");
  EXPECT_EQ(neff.size, 4u);
  EXPECT_EQ(neff.oid, sha256_hex("NEFF"));
  EXPECT_TRUE(store.content_matches(neff, "NEFF"));
  EXPECT_FALSE(store.content_matches(neff, "NEFX"));

  auto stats = store.stat({kShard, "missing/file", std::string(kModule) + "/model.done"}, "");
  EXPECT_EQ(stats.size(), 2u);
  EXPECT_EQ(store.read_small(kShard, "", 1 << 20), "{\"a\":1}");
  EXPECT_THROW(store.read_small(kShard, "", 3), Error);  // larger than max_bytes

  sys::UniqueFd out(open((work() / "copy").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::vector<DownloadRequest> requests{{std::string(kModule) + "/model.neff", out.get(), neff}};
  RemoteEntry wrong = neff;
  wrong.content_sha256 = sha256_hex("other");
  sys::UniqueFd out2(
      open((work() / "copy2").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  requests.push_back({std::string(kModule) + "/model.neff", out2.get(), wrong});
  RemoteEntry absent;
  requests.push_back({"neuronxcc-2.21/MODULE_9/model.neff", out2.get(), absent});
  auto results = store.download("", requests);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(read_file(work() / "copy"), "NEFF");
  EXPECT_FALSE(results[1].ok);
  EXPECT_NE(results[1].error.find("sha256"), std::string::npos) << results[1].error;
  EXPECT_FALSE(results[2].ok);

  Store::Url url = store.download_url("", std::string(kModule) + "/model.neff");
  EXPECT_EQ(url.url,
            "file://" + root().string() + "/neuronxcc-2.21/MODULE_123%2Babcdef01/model.neff");
  EXPECT_FALSE(url.needs_token);
  EXPECT_GT(store.requests(), 0u);

  // The same content again: nothing is copied.
  CommitResult again = store.commit({add(std::string(kModule) + "/model.neff", local("n", "NEFF"))},
                                    "m", std::nullopt);
  EXPECT_FALSE(again.committed);
  EXPECT_EQ(again.unchanged, 1u);
}

// What a writer killed mid-copy leaves (a ".<name>.<random>.tmp" copy) is deleted by the next
// writer of that name once it is an hour old; a live writer's fresh copy is kept.
TEST_F(FolderStoreTest, AbandonedCopiesOfAKilledWriterAreSwept) {
  FolderStore store(root());
  fs::path dir = root() / kModule;
  fs::path stale = dir / ".model.neff.0123456789ab.tmp";
  fs::path fresh = dir / ".model.neff.ba9876543210.tmp";
  write_file(stale, std::string(1 << 20, 's'));
  write_file(fresh, "a live writer's copy");
  struct timespec two_hours_ago[2] = {{time(nullptr) - 7200, 0}, {time(nullptr) - 7200, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, stale.c_str(), two_hours_ago, 0), 0);
  store.commit({add(std::string(kModule) + "/model.neff", local("n", "NEFF"))}, "m", std::nullopt);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_EQ(read_file(dir / "model.neff"), "NEFF");
}

// A lease's age on a shared folder (fleet/lease_watch.h): the file's mtime against a probe's,
// both the file server's clock. The probe is gone after; an absent file has no times.
TEST_F(FolderStoreTest, WriteTimesAreTheFilesMtimeAndTheStoresNow) {
  const std::string lease = "neuron-cache-leases/neuronxcc-2.21/" + std::string(32, 'a') + ".json";
  FolderStore store(root());
  EXPECT_EQ(store.write_times(lease, ""), std::nullopt);
  store.commit({add(lease, local("lease", "{}"))}, "a lease", std::nullopt);
  fs::path file = root() / lease;
  const int64_t written = static_cast<int64_t>(std::time(nullptr)) - 100;
  struct timespec times[2] = {{written, 0}, {written, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
  std::optional<StoreTimes> got = store.write_times(lease, "");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->written, written);
  EXPECT_GE(got->now - got->written, 100);
  EXPECT_LT(got->now - got->written, 160);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(file.parent_path()))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{std::string(32, 'a') + ".json"}) << "no probe left";
  EXPECT_EQ(store.write_times("neuron-cache-leases", ""), std::nullopt) << "a folder";
}

TEST_F(FolderStoreTest, AMissingRootIsUnreachableAndNeverCreated) {
  FolderStore store(temp_ / "not-mounted");
  EXPECT_NE(store.unreachable().find("cannot be reached"), std::string::npos);
  EXPECT_NE(store.why_not_writable(), "");
  EXPECT_THROW(store.list("", true, ""), Error);
  EXPECT_THROW(store.commit({add("a/b.json", local("x", "x"))}, "m", std::nullopt), Error);
  EXPECT_FALSE(fs::exists(temp_ / "not-mounted"));
  EXPECT_THROW(FolderStore("relative/path"), Error);
  EXPECT_EQ(folder_root_from_url("file:///mnt/fsx/neuron%20cache"), "/mnt/fsx/neuron cache");
  EXPECT_THROW(folder_root_from_url("file://server/share"), Error);
}

// An unmounted share is an empty folder on the local disk: it is never taken for the store. Proof
// is the marker `create` writes, the mount itself, or a store tree already there.
TEST_F(FolderStoreTest, AnEmptyFolderThatWasNeverMadeAStoreIsNeverWritten) {
  fs::path mount_point = temp_ / "mnt-share";
  fs::create_directories(mount_point);
  FolderStore store(mount_point);
  EXPECT_EQ(store.unreachable(), "");
  std::string why = store.why_not_writable();
  EXPECT_NE(why.find("not known to be a neuron-cache store"), std::string::npos) << why;
  EXPECT_NE(why.find("neuron-cache create -n file://" + mount_point.string()), std::string::npos);
  try {
    store.commit({add(std::string(kModule) + "/model.neff", local("n", "NEFF")),
                  add(kShard, local("s", "{}"))},
                 "m", std::nullopt);
    ADD_FAILURE() << "an unproven folder was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Operational);
    EXPECT_EQ(std::string(e.what()), why);
  }
  EXPECT_TRUE(fs::is_empty(mount_point));

  EXPECT_TRUE(create_folder_store(mount_point));
  EXPECT_FALSE(create_folder_store(mount_point));  // a second create changes nothing
  EXPECT_EQ(store.why_not_writable(), "");
  store.commit({add(kShard, local("s", "{}"))}, "m", std::nullopt);
  EXPECT_EQ(read_file(mount_point / kShard), "{}");
  for (const RemoteEntry& entry : store.list("", true, "")) {
    EXPECT_NE(entry.path, kFolderStoreMarker) << "a dot-file: never listed nor synchronized";
  }
}

TEST_F(FolderStoreTest, AFolderHoldingAStoreTreeIsTheStoreAndGetsTheMarker) {
  fs::path older = temp_ / "older-store";
  fs::create_directories(older / "neuronxcc-2.21" / "MODULE_1+2");
  FolderStore store(older);
  EXPECT_EQ(store.why_not_writable(), "");
  store.commit({add(kShard, local("s", "{}"))}, "m", std::nullopt);
  EXPECT_TRUE(fs::is_regular_file(older / kFolderStoreMarker));
  fs::path decoy = temp_ / "decoy";  // a symlinked or file "compiler folder" proves nothing
  fs::create_directories(decoy);
  write_file(decoy / "neuronxcc-2.21", "a file");
  fs::create_directory_symlink(older / "neuronxcc-2.21", decoy / "neuronxcc-2.22");
  EXPECT_NE(FolderStore(decoy).why_not_writable(), "");
}

TEST_F(FolderStoreTest, CreateMakesTheLastFolderOnlyAndAMountPointIsTheStore) {
  EXPECT_TRUE(create_folder_store(temp_ / "new-store"));
  EXPECT_TRUE(fs::is_regular_file(temp_ / "new-store" / kFolderStoreMarker));
  EXPECT_THROW(create_folder_store(temp_ / "no-parent" / "store"), Error);
  EXPECT_FALSE(fs::exists(temp_ / "no-parent"));
  EXPECT_TRUE(sys::is_mount_point("/proc"));
  EXPECT_TRUE(sys::is_mount_point("/"));
  EXPECT_FALSE(sys::is_mount_point(temp_.path()));
  EXPECT_FALSE(sys::is_mount_point(temp_ / "missing"));
}

TEST_F(FolderStoreTest, ASymlinkInTheStoreIsNeverFollowed) {
  fs::path outside = temp_ / "outside";
  write_file(outside / "secret.json", "outside secret");
  write_file(outside / "folder" / "model.neff", "outside neff");
  fs::create_directories(root() / "neuronxcc-2.21");
  fs::create_directory_symlink(outside / "folder", root() / kModule);
  fs::create_symlink(outside / "secret.json", root() / "neuronxcc-2.21" / "link.json");
  fs::create_directories(root() / "neuron-cache-index");
  fs::create_directory_symlink(outside, root() / "neuron-cache-index" / "neuronxcc-2.21");
  auto before = snapshot_tree(outside);

  FolderStore store(root());
  EXPECT_TRUE(store.list("", true, "").empty());
  EXPECT_TRUE(store.list(kModule, true, "").empty());
  EXPECT_THROW(store.stat({"neuronxcc-2.21/link.json"}, ""), Error);  // named, not followed
  EXPECT_TRUE(store.stat({std::string(kModule) + "/model.neff"}, "").empty());
  EXPECT_EQ(store.read_small("neuronxcc-2.21/link.json", "", 1 << 20), std::nullopt);
  EXPECT_EQ(store.read_small("neuron-cache-index/neuronxcc-2.21/secret.json", "", 1 << 20),
            std::nullopt);
  sys::UniqueFd out(open((work() / "copy").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  RemoteEntry expected;
  expected.size = 12;
  std::vector<DownloadRequest> requests{
      {std::string(kModule) + "/model.neff", out.get(), expected}};
  EXPECT_FALSE(store.download("", requests)[0].ok);
  EXPECT_EQ(read_file(work() / "copy"), "");
  // Writing through the link is refused, and hostile names are input errors.
  EXPECT_THROW(
      store.commit({add(std::string(kModule) + "/model.neff", local("n", "x"))}, "m", std::nullopt),
      Error);
  EXPECT_THROW(store.commit({add(kShard, local("s", "x"))}, "m", std::nullopt), Error);
  for (const char* hostile : {"../outside/secret.json", "a/../../x", "/etc/passwd", "a//b"}) {
    EXPECT_THROW(store.read_small(hostile, "", 100), Error) << hostile;
    EXPECT_THROW(store.commit({add(hostile, local("h", "x"))}, "m", std::nullopt), Error)
        << hostile;
  }
  EXPECT_EQ(snapshot_tree(outside), before);
  // A link planted where an index file goes is replaced, not written through.
  fs::create_symlink(outside / "secret.json", root() / "top.json");
  EXPECT_EQ(store.read_small("top.json", "", 100), std::nullopt);
  store.commit({add("top.json", local("t", "new"))}, "m", std::nullopt);
  EXPECT_FALSE(fs::is_symlink(root() / "top.json"));
  EXPECT_EQ(read_file(root() / "top.json"), "new");
  EXPECT_EQ(snapshot_tree(outside), before);
}

// An index file that is a symlink or a FIFO is never followed nor read, and never skipped without
// a word: asking for it fails, naming it and what to do.
TEST_F(FolderStoreTest, AnIndexFileThatIsASymlinkOrAFifoIsNamedNotSkipped) {
  FolderStore store(root());
  fs::create_directories((root() / kShard).parent_path());
  write_file(work() / "elsewhere.json", "{}");
  fs::create_symlink(work() / "elsewhere.json", root() / kShard);
  try {
    store.stat({kShard}, "");
    FAIL() << "a symlinked index file must not pass for an absent one";
  } catch (const Error& error) {
    EXPECT_TRUE(testing::contains(error.what(), "symbolic link")) << error.what();
    EXPECT_TRUE(testing::contains(error.what(), "never follows")) << error.what();
  }
  fs::remove(root() / kShard);
  ASSERT_EQ(mkfifo((root() / kShard).c_str(), 0644), 0);
  try {
    store.stat({kShard}, "");
    FAIL() << "a FIFO index file must not pass for an absent one";
  } catch (const Error& error) {
    EXPECT_TRUE(testing::contains(error.what(), "FIFO")) << error.what();
  }
  EXPECT_EQ(store.read_versioned(kShard, "", 1 << 20).content, std::nullopt)
      << "never read: a FIFO would block the reader";
}

TEST_F(FolderStoreTest, AnIndexFileChangedSinceItWasReadIsAConflict) {
  FolderStore first(root()), second(root());
  SmallFile first_read = first.read_versioned(kShard, "", 1 << 20);
  SmallFile second_read = second.read_versioned(kShard, "", 1 << 20);
  EXPECT_EQ(second_read.content, std::nullopt);
  first.commit({add(kShard, local("a", "[\"a\"]"), first_read.expected())}, "m", std::nullopt);
  EXPECT_THROW(second.commit({add(kShard, local("b", "[\"b\"]"), second_read.expected())}, "m",
                             std::nullopt),
               CommitConflict);
  EXPECT_EQ(read_file(root() / kShard), "[\"a\"]");
  second_read = second.read_versioned(kShard, "", 1 << 20);
  EXPECT_EQ(second_read.content, "[\"a\"]");
  EXPECT_EQ(second_read.version, sha256_hex("[\"a\"]"));
  second.commit({add(kShard, local("b", "[\"a\",\"b\"]"), second_read.expected())}, "m",
                std::nullopt);
  // The version read travels with the write, nothing is remembered: the same expectation again,
  // after its own write, is a conflict; what it reads now is the version to write on.
  EXPECT_THROW(second.commit({add(kShard, local("c", "[\"c\"]"), second_read.expected())}, "m",
                             std::nullopt),
               CommitConflict);
  second_read = second.read_versioned(kShard, "", 1 << 20);
  second.commit({add(kShard, local("c", "[\"a\",\"b\",\"c\"]"), second_read.expected())}, "m",
                std::nullopt);
  EXPECT_EQ(read_file(root() / kShard), "[\"a\",\"b\",\"c\"]");
}

// Another machine's push, landing between a reader's stat of a shard and its download.
class RewrittenDuringDownload : public ForwardingStore {
 public:
  RewrittenDuringDownload(FolderStore& inner, std::function<void()> rewrite, int times)
      : ForwardingStore(inner), rewrite_(std::move(rewrite)), times_(times) {}
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override {
    if (times_-- > 0) rewrite_();
    return ForwardingStore::download(revision, requests);
  }

 private:
  std::function<void()> rewrite_;
  int times_;
};

TEST_F(FolderStoreTest, AShardReplacedDuringItsDownloadIsReadAgainNeverTakenForAbsent) {
  namespace ai = artifact_index;
  FolderStore store(root());
  ai::Entry first = testing::sample_index_entry(testing::sample_key_inputs("org/model"), "c1");
  const std::string version = first.inputs.compiler_version;
  const std::string shard = ai::remote_shard_path(first.inputs);
  ai::IndexFile index = ai::shard_for(first.inputs);
  index.entries.emplace(first.key, first);
  store.commit({add(shard, local("one.json", ai::serialize_index(index)))}, "m", std::nullopt);
  int pushes = 0;
  std::vector<std::string> keys = {first.key};
  auto push_another = [&] {  // each push adds one more configuration: the shard grows
    cache_key::KeyInputs inputs = first.inputs;
    inputs.batch_size = 10 + ++pushes;
    ai::Entry more = testing::sample_index_entry(inputs, "c" + std::to_string(inputs.batch_size));
    index.entries.emplace(more.key, more);
    keys.push_back(more.key);
    store.commit({add(shard, local("more.json", ai::serialize_index(index)))}, "m", std::nullopt);
  };
  for (int rewrites : {1, remote::kRewriteRetries}) {
    RewrittenDuringDownload reader(store, push_another, rewrites);
    remote::RemoteIndex read = remote::RemoteIndex::open(reader);
    read.load({{version, shard}});
    ASSERT_TRUE(read.complete()) << read.why_incomplete();
    for (const std::string& key : keys) EXPECT_NE(read.find(version, key), nullptr) << key;
  }
  // Replaced on every try: what the shard holds is unknown, which the index says.
  RewrittenDuringDownload reader(store, push_another, 100);
  remote::RemoteIndex read = remote::RemoteIndex::open(reader);
  read.load({{version, shard}});
  EXPECT_FALSE(read.complete());
  EXPECT_TRUE(testing::contains(read.why_incomplete(), "could not be fetched intact"))
      << read.why_incomplete();
}

// Reads the shard, adds `entry`, commits; again after each CommitConflict. Returns conflicts.
int add_entry(FolderStore& store, const fs::path& work, const std::string& entry,
              const std::function<void()>& between = {}) {
  for (int conflicts = 0;; ++conflicts) {
    SmallFile read = store.read_versioned(kShard, "", 1 << 20);
    json doc = read.content ? json::parse(*read.content) : json::array();
    doc.push_back(entry);
    write_file(work / (entry + ".json"), doc.dump());
    if (between) between();
    try {
      store.commit({add(kShard, work / (entry + ".json"), read.expected())}, "add " + entry,
                   std::nullopt);
      return conflicts;
    } catch (const CommitConflict&) {
      if (conflicts > 500) throw;
    }
  }
}

void wait_for_file(const fs::path& file) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(file) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_F(FolderStoreTest, TwoProcessesCommittingOneIndexFileMergeBothEntries) {
  constexpr int kEntriesEach = 25;
  auto child = [&](const std::string& name, const std::string& other) {
    FolderStore store(root());
    fs::path work = temp_ / name;
    fs::create_directories(work);
    int conflicts = 0;
    // The first round: both processes have read the shard before either commits.
    conflicts += add_entry(store, work, name + "-0", [&] {
      static bool first = true;
      if (!first) return;
      first = false;
      write_file(temp_ / (name + ".ready"), "");
      wait_for_file(temp_ / (other + ".ready"));
    });
    std::mt19937 random(std::hash<std::string>{}(name));
    for (int i = 1; i < kEntriesEach; ++i) {
      conflicts += add_entry(store, work, name + "-" + std::to_string(i), [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
      });
    }
    write_file(temp_ / (name + ".conflicts"), std::to_string(conflicts));
  };
  std::vector<pid_t> pids;
  for (auto [name, other] : {std::pair{"a", "b"}, std::pair{"b", "a"}}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        child(name, other);
        _exit(0);
      } catch (const std::exception& e) {
        fprintf(stderr, "child %s: %s\n", name, e.what());
        _exit(1);
      }
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  json doc = json::parse(read_file(root() / kShard));
  std::set<std::string> entries(doc.begin(), doc.end());
  EXPECT_EQ(doc.size(), 2u * kEntriesEach);
  EXPECT_EQ(entries.size(), 2u * kEntriesEach);
  for (const char* name : {"a", "b"}) {
    for (int i = 0; i < kEntriesEach; ++i) {
      EXPECT_TRUE(entries.count(std::string(name) + "-" + std::to_string(i))) << name << i;
    }
  }
  int conflicts =
      std::stoi(read_file(temp_ / "a.conflicts")) + std::stoi(read_file(temp_ / "b.conflicts"));
  EXPECT_GE(conflicts, 1);  // the first round guarantees one
  std::cout << "conflicts retried: " << conflicts << "\n";
}

// POSIX record locks do not exclude threads of one process: the process-wide mutex must.
TEST_F(FolderStoreTest, ThreadsOfOneProcessCommittingOneIndexFileMergeEveryEntry) {
  constexpr int kThreads = 4, kEntriesEach = 15;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      FolderStore store(root());
      fs::path work = temp_ / ("t" + std::to_string(t));
      fs::create_directories(work);
      for (int i = 0; i < kEntriesEach; ++i) {
        conflicts += add_entry(store, work, "t" + std::to_string(t) + "-" + std::to_string(i));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  json doc = json::parse(read_file(root() / kShard));
  std::set<std::string> entries(doc.begin(), doc.end());
  EXPECT_EQ(doc.size(), size_t{kThreads * kEntriesEach});
  EXPECT_EQ(entries.size(), size_t{kThreads * kEntriesEach});
  std::cout << "conflicts retried: " << conflicts << "\n";
}

// The name of a writer's temporary file in `dir` that is partly written, or "".
std::string partial_temp_file(const fs::path& dir, uint64_t full_size) {
  std::error_code error;
  for (const auto& item : fs::directory_iterator(dir, error)) {
    std::string name = item.path().filename().string();
    if (name.front() != '.' || !name.ends_with(".tmp")) continue;
    uint64_t size = item.file_size(error);
    if (!error && size > 0 && size < full_size) return name;
  }
  return {};
}

TEST_F(FolderStoreTest, KillDuringCommitLeavesNoVisiblePartialFile) {
  constexpr uint64_t kSize = 256ull << 20;
  fs::path big = work() / "big.neff";
  write_random_file(big, kSize, 7);
  std::string sha = sha256_of_file(big);
  fs::create_directories(root() / kModule);
  write_file(work() / "big.neff.idx", "[]");
  FolderStore(root()).commit({add(kShard, work() / "big.neff.idx")}, "m", std::nullopt);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      FolderStore store(root());
      // The shard keeps its content: every commit meets the version read, under the lock.
      Expected shard = store.read_versioned(kShard, "", 1 << 20).expected();
      for (int i = 0;; ++i) {
        store.commit({add(std::string(kModule) + "/part" + std::to_string(i) + ".neff", big),
                      add(kShard, work() / "big.neff.idx", shard)},
                     "m", std::nullopt);
      }
    } catch (const std::exception& e) {
      fprintf(stderr, "writer: %s\n", e.what());
    }
    _exit(1);
  }
  std::string partial;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (partial.empty() && std::chrono::steady_clock::now() < deadline) {
    partial = partial_temp_file(root() / kModule, kSize);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_FALSE(partial.empty()) << "the writer was never seen mid-copy";

  FolderStore store(root());
  auto files = store.list("", true, "");
  EXPECT_TRUE(fs::exists(root() / kModule / partial));  // left on disk, but never listed
  for (const auto& entry : files) {
    EXPECT_EQ(entry.path.find(".tmp"), std::string::npos) << entry.path;
    if (entry.path.ends_with(".neff")) {
      EXPECT_EQ(entry.size, kSize) << entry.path;
      EXPECT_EQ(sha256_of_file(root() / entry.path), sha) << entry.path;
    }
  }
  // The killed writer's index lock went with it: the next commit takes it at once.
  auto started = std::chrono::steady_clock::now();
  Expected shard = store.read_versioned(kShard, "", 1 << 20).expected();
  store.commit({add(kShard, local("i", "[1]"), shard)}, "m", std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(read_file(root() / kShard), "[1]");
}

// libneuronxla takes a MODULE folder holding model.done as whole: the mark is published after
// every other file, whatever order the commit lists them in, so a NEFF that cannot be written
// leaves no mark behind.
TEST_F(FolderStoreTest, AFailedNeffLeavesNoCompletionMark) {
  FolderStore store(root());
  std::string module = "neuronxcc-2.21/MODULE_9+abcdef01";
  EXPECT_THROW(store.commit({add(module + "/model.done", local("done", "")),
                             add(module + "/model.neff", work() / "no-such-file")},
                            "m", std::nullopt),
               Error);
  EXPECT_FALSE(fs::exists(root() / module / "model.done"));
}

// Every MODULE folder of the store that holds model.done also holds a whole model.neff (its
// size and sha256); returns how many marks it saw.
int marks_beside_whole_neffs(const fs::path& root, uint64_t size, const std::string& sha) {
  int marks = 0;
  for (const auto& module : fs::directory_iterator(root / "neuronxcc-2.21")) {
    if (!fs::exists(module.path() / "model.done")) continue;
    ++marks;
    fs::path neff = module.path() / "model.neff";
    EXPECT_TRUE(fs::exists(neff)) << module.path();
    if (!fs::exists(neff)) continue;
    EXPECT_EQ(fs::file_size(neff), size) << neff;
    if (fs::file_size(neff) == size) {
      EXPECT_EQ(sha256_of_file(neff), sha) << neff;
    }
  }
  return marks;
}

// A writer killed with kill -9 at random points of pushes whose operations list model.done
// first: no kill leaves a mark beside a missing or partial NEFF.
TEST_F(FolderStoreTest, AKillAtAnyPointNeverLeavesAMarkWithoutItsWholeNeff) {
  constexpr uint64_t kSize = 32ull << 20;
  fs::path neff = work() / "model.neff";
  write_random_file(neff, kSize, 11);
  std::string sha = sha256_of_file(neff);
  fs::path done = local("model.done", "");
  fs::create_directories(root() / "neuronxcc-2.21");
  std::mt19937 random(std::random_device{}());
  int marks = 0;
  for (int round = 0; round < 12; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        FolderStore store(root());
        for (int i = 0;; ++i) {
          std::string module = "neuronxcc-2.21/MODULE_" + std::to_string(round) + "_" +
                               std::to_string(i) + "+abcdef01";
          store.commit({add(module + "/model.done", done), add(module + "/model.neff", neff)}, "m",
                       std::nullopt);
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "writer: %s\n", e.what());
      }
      _exit(1);
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 400)(random)));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    marks = marks_beside_whole_neffs(root(), kSize, sha);
  }
  EXPECT_GT(marks, 0) << "no push ever completed: the kills proved nothing";
}

TEST_F(FolderStoreTest, AOneGibRandomFileRoundTripsByteIdentical) {
  constexpr uint64_t kSize = 1ull << 30;
  fs::path big = work() / "big.neff";
  write_random_file(big, kSize, 42);
  std::string sha = sha256_of_file(big);
  FolderStore store(root());
  const std::string path = std::string(kModule) + "/model.neff";
  auto started = std::chrono::steady_clock::now();
  CommitResult result = store.commit({add(path, big)}, "m", std::nullopt);
  auto committed = std::chrono::steady_clock::now();
  EXPECT_EQ(result.large_sent, 1u);
  EXPECT_EQ(result.bytes_sent, kSize);
  auto listed = store.stat({path}, "");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].size, kSize);
  EXPECT_EQ(listed[0].oid, "");  // large files are not read to be listed
  RemoteEntry expected = listed[0];
  expected.content_sha256 = sha;
  sys::UniqueFd out(
      open((work() / "back.neff").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::vector<DownloadRequest> requests{{path, out.get(), expected}};
  auto results = store.download("", requests);
  auto downloaded = std::chrono::steady_clock::now();
  ASSERT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(results[0].bytes, kSize);
  EXPECT_EQ(sha256_of_file(work() / "back.neff"), sha);
  EXPECT_EQ(testing::run_command("cmp -s " + big.string() + " " + (work() / "back.neff").string()),
            0);
  using ms = std::chrono::milliseconds;
  std::cout << "1 GiB: commit " << std::chrono::duration_cast<ms>(committed - started).count()
            << " ms, download+verify "
            << std::chrono::duration_cast<ms>(downloaded - committed).count() << " ms\n";
}

}  // namespace
}  // namespace neuron_cache::storage

namespace neuron_cache::storage {
namespace {

config::Settings settings_with(const std::string& name, const std::string& value) {
  config::Environment env;
  env.set("HOME", "/nonexistent");
  env.set(name, value);
  return config::Settings::resolve(env, {});
}

// HF_HUB_OFFLINE speaks of the Hugging Face Hub: a shared folder stays online; only the tool's
// own NEURON_CACHE_OFFLINE takes it offline.
TEST(FolderStoreSettings, OnlyTheNeutralOfflineSettingTakesTheFolderOffline) {
  EXPECT_FALSE(FolderStore::options_from(settings_with("HF_HUB_OFFLINE", "1")).offline);
  EXPECT_TRUE(FolderStore::options_from(settings_with("NEURON_CACHE_OFFLINE", "1")).offline);
  testing::TempDir temp;
  FolderStore store(temp.path(),
                    FolderStore::options_from(settings_with("NEURON_CACHE_OFFLINE", "1")));
  EXPECT_TRUE(store.offline());
}

// NEURON_CACHE_TIMEOUT_MS bounds the wait for another machine's index lock; unset, 60 s.
TEST(FolderStoreSettings, TheTimeoutBoundsTheIndexLockWait) {
  EXPECT_EQ(FolderStore::options_from(settings_with("HF_ENDPOINT", "x")).lock_wait,
            kFolderLockWait);
  EXPECT_EQ(FolderStore::options_from(settings_with("NEURON_CACHE_TIMEOUT_MS", "250")).lock_wait,
            std::chrono::milliseconds(250));
  testing::TempDir temp;
  std::filesystem::path lock = temp.path() / std::string(kFolderLockFile);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  if (holder == 0) {  // another machine: holds the lock until killed
    int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock all {};
    all.l_type = F_WRLCK;
    all.l_whence = SEEK_SET;
    if (fd < 0 || fcntl(fd, F_SETLK, &all) != 0) _exit(1);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  testing::write_file(temp.path() / "shard.json", "[]");
  create_folder_store(temp.path());
  FolderStore store(temp.path(), FolderOptions{false, std::chrono::milliseconds(300)});
  // Only an operation that expects a version is replaced under the lock.
  SmallFile read = store.read_versioned(kShard, "", 1 << 20);
  EXPECT_FALSE(read.content);
  auto start = std::chrono::steady_clock::now();
  try {
    store.commit(
        {{CommitOperation::Kind::Add, kShard, temp.path() / "shard.json", read.expected()}}, "m",
        std::nullopt);
    ADD_FAILURE() << "the lock is held";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NEURON_CACHE_TIMEOUT_MS"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace neuron_cache::storage
