// The conditional write of the storage seam, one body for every backend: the in-memory store, a
// shared folder, S3 (the in-process stand-in, which enforces If-Match / If-None-Match) and the
// test Hub server. A write carries the version its writer read (SmallFile::expected); the store
// refuses it with CommitConflict when the file moved since, whoever moved it.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hub_fixture.h"
#include "memory_store.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/folder_store.h"
#include "neuron_cache/storage/forwarding_store.h"
#include "neuron_cache/storage/hub_store.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_stand_in.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache::storage {
namespace {

using testing::TempDir;

constexpr const char* kLease = "neuron-cache-leases/neuronxcc-2.21/k.json";
constexpr uint64_t kMaxBytes = 1 << 20;

// One backend, and two writers on it (two store objects, as two machines have).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Store& writer(int i) = 0;
};

class MemoryBackend : public Backend {
 public:
  MemoryBackend() : writers_{memory_.handle(), memory_.handle()} {}
  Store& writer(int i) override { return *writers_[i]; }

 private:
  testing::MemoryStore memory_;
  std::unique_ptr<Store> writers_[2];
};

// `dir` made a folder store, as `neuron-cache create -n file:///...` makes it.
std::filesystem::path folder_store_in(const TempDir& dir) {
  create_folder_store(dir.path());
  return dir.path();
}

class FolderBackend : public Backend {
 public:
  Store& writer(int i) override { return writers_[i]; }

 private:
  TempDir dir_;
  std::filesystem::path root_ = folder_store_in(dir_);
  FolderStore writers_[2] = {FolderStore(root_), FolderStore(root_)};
};

class S3Backend : public Backend {
 public:
  Store& writer(int i) override { return *writers_[i]; }

 private:
  testing::S3StandIn s3_;
  std::unique_ptr<S3Store> writers_[2] = {
      std::make_unique<S3Store>("s3://bucket/c", s3_.access(), s3_.options()),
      std::make_unique<S3Store>("s3://bucket/c", s3_.access(), s3_.options())};
};

class HubBackend : public Backend {
 public:
  HubBackend() : server_(testing::cache_hub_config(testing::kTestCacheRepo, {})) {
    hub::ClientOptions options;
    options.endpoint = server_.url();
    options.token = testing::kHubWriteToken;
    for (int i = 0; i < 2; ++i) {
      clients_[i] = std::make_unique<hub::HubClient>(options);
      writers_[i] = std::make_unique<HubStore>(*clients_[i], testing::kTestCacheRepo);
    }
  }
  Store& writer(int i) override { return *writers_[i]; }

 private:
  testing::HubServer server_;
  std::unique_ptr<hub::HubClient> clients_[2];
  std::unique_ptr<HubStore> writers_[2];
};

std::unique_ptr<Backend> open_backend(const std::string& kind) {
  if (kind == "memory") return std::make_unique<MemoryBackend>();
  if (kind == "folder") return std::make_unique<FolderBackend>();
  if (kind == "s3") return std::make_unique<S3Backend>();
  return std::make_unique<HubBackend>();
}

class ConditionalWrite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend_ = open_backend(GetParam()); }

  Store& a() { return backend_->writer(0); }
  Store& b() { return backend_->writer(1); }

  SmallFile read(Store& store) { return store.read_versioned(kLease, store.head(), kMaxBytes); }
  // Writes `content` expecting `expected`, on the store's head of now: on the Hub the parent
  // commit is current, so what refuses a stale write is the operation's expectation.
  void write(Store& store, const std::string& content, Expected expected) {
    std::filesystem::path local = work_ / ("w" + std::to_string(files_++));
    testing::write_file(local, content);
    store.commit({{CommitOperation::Kind::Add, kLease, local, std::move(expected)}}, "lease",
                 store.head());
  }
  std::optional<std::string> now() { return read(a()).content; }

  TempDir work_;
  std::atomic<int> files_{0};
  std::unique_ptr<Backend> backend_;
};

TEST_P(ConditionalWrite, AWriteOnAVersionAnotherWriterReplacedIsRefused) {
  EXPECT_TRUE(a().checks_conditional_writes());
  write(a(), "v1", Expected::anything());
  SmallFile seen_by_a = read(a());
  SmallFile seen_by_b = read(b());
  ASSERT_EQ(seen_by_a.content, "v1");
  write(b(), "v2 by b", seen_by_b.expected());
  EXPECT_THROW(write(a(), "v2 by a", seen_by_a.expected()), CommitConflict);
  EXPECT_EQ(now(), "v2 by b");
}

TEST_P(ConditionalWrite, AMustNotExistWriteIsRefusedWhenTheFileAppeared) {
  SmallFile seen = read(a());
  ASSERT_FALSE(seen.content);
  EXPECT_EQ(seen.expected().kind, Expected::Kind::Absent);
  write(b(), "b's", Expected::anything());
  EXPECT_THROW(write(a(), "a's", seen.expected()), CommitConflict);
  EXPECT_EQ(now(), "b's");
}

TEST_P(ConditionalWrite, AnUnchangedFileIsWritten) {
  write(a(), "first", read(a()).expected());  // absent, as expected
  EXPECT_EQ(now(), "first");
  SmallFile seen = read(b());
  write(b(), "second", seen.expected());
  EXPECT_EQ(now(), "second");
  // Nothing is remembered across writes: the next one reads the version it writes on.
  EXPECT_THROW(write(b(), "third", seen.expected()), CommitConflict);
  write(b(), "third", read(b()).expected());
  EXPECT_EQ(now(), "third");
}

TEST_P(ConditionalWrite, ReadersOfDifferentVersionsCannotBothWin) {
  write(a(), "v1", Expected::anything());
  SmallFile old = read(a());
  write(b(), "v2", read(b()).expected());
  SmallFile current = read(b());
  ASSERT_NE(old.version, current.version);
  EXPECT_THROW(write(a(), "from v1", old.expected()), CommitConflict);
  write(b(), "from v2", current.expected());
  EXPECT_EQ(now(), "from v2");
}

// Two writers that read the same version race their writes: exactly one lands.
TEST_P(ConditionalWrite, OfTwoConcurrentWritersOnOneVersionExactlyOneWins) {
  write(a(), "v1", Expected::anything());
  SmallFile seen[2] = {read(a()), read(b())};
  std::atomic<int> won{0}, refused{0}, ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < 2) std::this_thread::yield();
      try {
        write(backend_->writer(i), "by " + std::to_string(i), seen[i].expected());
        ++won;
      } catch (const CommitConflict&) {
        ++refused;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), 1);
  std::optional<std::string> content = now();
  EXPECT_TRUE(content == "by 0" || content == "by 1") << content.value_or("(none)");
}

INSTANTIATE_TEST_SUITE_P(Stores, ConditionalWrite,
                         ::testing::Values("memory", "folder", "s3", "hub"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace neuron_cache::storage
