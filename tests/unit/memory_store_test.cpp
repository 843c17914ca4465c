// The MemoryStore itself, and the miss policy over it: a failed read is a Failure value, never
// an empty answer.
#include "memory_store.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "neuron_cache/error.h"
#include "neuron_cache/storage/policies.h"
#include "test_support.h"

namespace neuron_cache::testing {
namespace {

TEST(MemoryStore, ListsStatsAndReadsAtARevision) {
  MemoryStore store;
  store.put("a/b/c.json", "C");
  std::string first = store.head();
  store.put("a/d.json", "DD");
  EXPECT_NE(store.head(), first);
  EXPECT_EQ(store.list("a", true, "").size(), 2u);
  auto level = store.list("a", false, "");
  ASSERT_EQ(level.size(), 2u);
  EXPECT_TRUE(level[0].is_directory);
  EXPECT_EQ(level[0].path, "a/b");
  EXPECT_EQ(store.list("a", true, first).size(), 1u) << "an older revision is a snapshot";
  EXPECT_EQ(store.stat({"a/d.json", "nope"}, "").size(), 1u);
  EXPECT_EQ(store.read_small("a/d.json", "", 10), "DD");
  EXPECT_EQ(store.read_small("nope", "", 10), std::nullopt);
}

TEST(MemoryStore, ACommitOnAStaleParentConflicts) {
  TempDir tmp;
  write_file(tmp / "x", "X");
  MemoryStore store;
  std::string parent = store.head();
  auto result = store.commit({{storage::CommitOperation::Kind::Add, "x", tmp / "x"}}, "m", parent);
  EXPECT_TRUE(result.committed);
  EXPECT_EQ(result.revision, store.head());
  EXPECT_THROW(store.commit({{storage::CommitOperation::Kind::Add, "y", tmp / "x"}}, "m", parent),
               CommitConflict);
  EXPECT_FALSE(
      store.commit({{storage::CommitOperation::Kind::Add, "x", tmp / "x"}}, "m", store.head())
          .committed)
      << "unchanged content makes no commit";
}

TEST(MemoryStore, FaultsFailReadsAndListWrongSizes) {
  MemoryStore store;
  store.put("idx/a.json", "A");
  store.fail_reads("idx/", 2);
  EXPECT_THROW(store.stat({"idx/a.json"}, ""), Error);
  EXPECT_THROW(store.read_small("idx/a.json", "", 10), Error);
  EXPECT_EQ(store.stat({"idx/a.json"}, "").size(), 1u);
  EXPECT_EQ(store.failed_reads(), 2);
  store.lie_about_sizes("idx/", 5);
  auto entries = store.stat({"idx/a.json"}, "");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].size, 6u);
  FILE* file = std::tmpfile();
  std::vector<storage::DownloadRequest> requests = {{"idx/a.json", fileno(file), entries[0]}};
  auto results = store.download("", requests);
  std::fclose(file);
  EXPECT_FALSE(results[0].ok) << "a wrong size fails verification";
}

TEST(MissOnFailureStore, AFailedReadIsAFailureNotAnEmptyAnswer) {
  MemoryStore inner;
  inner.put("idx/a.json", "A");
  storage::MissOnFailureStore store(inner);
  inner.fail_reads("idx/", 1);
  auto failed = store.stat_or_failure({"idx/a.json", "idx/b.json"}, "");
  ASSERT_TRUE(failed.failed());
  EXPECT_TRUE(contains(failed.failure().message, "500")) << failed.failure().message;
  ASSERT_EQ(store.problems().size(), 1u);
  auto answered = store.stat_or_failure({"idx/a.json", "idx/b.json"}, "");
  ASSERT_FALSE(answered.failed());
  EXPECT_EQ(answered.value().size(), 1u) << "b.json is absent: an answer, not a failure";
}

TEST(ReadOnlyStore, AsksTheInnerPolicyAboutFailures) {
  MemoryStore backend;
  storage::MissOnFailureStore misses(backend);
  storage::ReadOnlyStore store(misses);
  backend.fail_reads("", 1);
  EXPECT_TRUE(store.list_or_failure("", true, "").failed());
  EXPECT_EQ(misses.problems().size(), 1u);
  storage::ReadOnlyStore strict(backend);
  backend.fail_reads("", 1);
  EXPECT_THROW(strict.list_or_failure("", true, ""), Error) << "no policy: the failure throws";
}

}  // namespace
}  // namespace neuron_cache::testing
