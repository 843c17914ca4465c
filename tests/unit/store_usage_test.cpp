// maintenance::store_usage (`neuron-cache du`) on the in-memory store and a shared folder: exact
// numbers on usage_layout(), a cost that follows versions and shards rather than files, and a
// hostile store's sizes, names and number of files.
#include "neuron_cache/maintenance/store_usage.h"

#include <gtest/gtest.h>

#include <limits>

#include "memory_store.h"
#include "neuron_cache/error.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/storage/folder_store.h"
#include "test_support.h"
#include "usage_layout.h"

namespace neuron_cache::maintenance {
namespace {

using testing::MemoryStore;
using testing::usage_layout;
using testing::UsageLayout;

UsageOptions at_now() {
  return {testing::usage_now(), kMaxUsageFiles};
}

void put_all(MemoryStore& store, const UsageLayout& layout) {
  for (const auto& [path, content] : layout.files) store.put(path, content);
}

// Adds `count` MODULE_ folders nothing indexes to `version` (4 files each).
void add_unindexed(MemoryStore& store, const std::string& version, int count) {
  UsageLayout more;
  for (int i = 0; i < count; ++i)
    testing::add_usage_module(more, version, "MODULE_" + std::to_string(90000 + i) + "+e30acd3a",
                              10);
  put_all(store, more);
}

TEST(StoreUsage, MemoryStoreGivesExactNumbers) {
  MemoryStore store;
  UsageLayout layout = usage_layout();
  put_all(store, layout);
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_EQ(usage.store, "acme/neuron-cache");
  EXPECT_EQ(usage.kind, "hub");
  testing::expect_layout_usage(usage, layout);
}

TEST(StoreUsage, FolderStoreGivesExactNumbers) {
  testing::TempDir dir;
  std::filesystem::path root = dir / "store";
  std::filesystem::create_directories(root);
  storage::create_folder_store(root);
  UsageLayout layout = usage_layout();
  for (const auto& [path, content] : layout.files) testing::write_file(root / path, content);
  storage::FolderStore store(root);
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_EQ(usage.kind, "folder");
  testing::expect_layout_usage(usage, layout);  // the store's marker file is not listed
}

// The head, the root's top level, one listing per top folder and one batch of index
// downloads: 200 more MODULE_ folders cost no request.
TEST(StoreUsage, RequestsFollowVersionsAndShardsNotFiles) {
  MemoryStore store;
  put_all(store, usage_layout());
  uint64_t before = store.requests();
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_EQ(usage.requests, store.requests() - before);
  EXPECT_EQ(usage.requests, 1u + 1u + 4u + 1u);  // 4 top folders; 5 index files in one batch
  add_unindexed(store, testing::kUsageV1, 200);
  StoreUsage bigger = store_usage(store, at_now());
  EXPECT_EQ(bigger.total.count, usage.total.count + 800);
  EXPECT_EQ(bigger.unindexed.count, 201u);
  EXPECT_EQ(bigger.requests, usage.requests);
}

TEST(StoreUsage, EmptyStoreGivesZerosAndEveryBucket) {
  MemoryStore store;
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_EQ(usage.total.count, 0u);
  EXPECT_EQ(usage.total.bytes, 0u);
  EXPECT_TRUE(usage.versions.empty());
  EXPECT_TRUE(usage.models.empty());
  ASSERT_EQ(usage.ages.size(), 6u);
  EXPECT_EQ(usage.ages.back().name, "unknown");
  EXPECT_TRUE(usage.problems.empty());
}

// Listed sizes near 2^64: every sum stops at UINT64_MAX and says so, none wraps around.
TEST(StoreUsage, HugeListedSizesSaturate) {
  MemoryStore store;
  put_all(store, usage_layout());
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  store.lie_about_sizes("neuronxcc-", kMax - 100);
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_TRUE(usage.saturated);
  EXPECT_EQ(usage.total.bytes, kMax);
  EXPECT_EQ(usage.modules.bytes, kMax);
  EXPECT_EQ(usage.models[0].referenced.bytes, kMax);
  EXPECT_EQ(usage.total.count, 32u);  // counts are still exact
  EXPECT_EQ(usage.configurations, 6u);
}

TEST(StoreUsage, TooManyFilesAreRefused) {
  MemoryStore store;
  put_all(store, usage_layout());
  UsageOptions options = at_now();
  options.max_files = 20;
  try {
    store_usage(store, options);
    FAIL() << "a store listing more files than the bound was measured";
  } catch (const Error& error) {
    EXPECT_TRUE(testing::contains(error.what(), "lists more than 20 files")) << error.what();
    EXPECT_TRUE(testing::contains(error.what(), "check that the store's root")) << error.what();
  }
}

// Names a store lists reach the report printable: no escape sequence, no line break.
TEST(StoreUsage, HostileNamesArePrintable) {
  MemoryStore store;
  std::string version = std::string("2.21\x1b[2J\nneuron-cache: ok") + std::string(500, 'x');
  testing::UsageLayout layout;
  testing::add_usage_module(layout, version, "MODULE_1+e30acd3a", 10);
  put_all(store, layout);
  StoreUsage usage = store_usage(store, at_now());
  ASSERT_EQ(usage.versions.size(), 1u);
  const std::string& shown = usage.versions[0].compiler_version;
  EXPECT_EQ(shown.find('\x1b'), std::string::npos) << shown;
  EXPECT_EQ(shown.find('\n'), std::string::npos) << shown;
  EXPECT_LT(shown.size(), 300u);
  EXPECT_EQ(usage.versions[0].modules.count, 1u);
}

// Shards that are not index files, or too large to be one, are problems; the rest is counted.
TEST(StoreUsage, DamagedIndexFilesAreProblemsNotFailures) {
  MemoryStore store;
  put_all(store, usage_layout());
  std::string v1 = std::string("neuron-cache-index/neuronxcc-") + testing::kUsageV1;
  store.put(v1 + "/acme--empty.json", "");
  store.put(v1 + "/acme--array.json", "[1, 2, 3]");
  store.put(v1 + "/acme--deep.json", std::string(100000, '[') + std::string(100000, ']'));
  store.put(v1 + "/acme--huge.json", "{}");
  store.lie_about_sizes(v1 + "/acme--huge.json", remote::kMaxIndexFileBytes);
  StoreUsage usage = store_usage(store, at_now());
  EXPECT_EQ(usage.problems.size(), 5u) << ::testing::PrintToString(usage.problems);
  EXPECT_EQ(usage.configurations, 6u);
  EXPECT_EQ(usage.index.count, 9u);
  EXPECT_EQ(usage.index_files_read, 4u);
}

}  // namespace
}  // namespace neuron_cache::maintenance
