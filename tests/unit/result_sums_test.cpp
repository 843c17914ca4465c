// One sum per result type: a retry, a fetch after waiting for another machine and a push made
// before waiting all add to a run's results with the same `+=`. The counts that once drifted
// (resumed and reused bytes, completed keys, the newest commit, deletions) are checked here.
#include <gtest/gtest.h>

#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/transfer/prefetch.h"
#include "neuron_cache/transfer/push.h"

namespace neuron_cache::testing {
namespace {

transfer::PrefetchResult fetched(uint64_t bytes, uint64_t resumed, uint64_t reused) {
  transfer::PrefetchResult r;
  r.modules_installed = 1;
  r.files_downloaded = 2;
  r.bytes_downloaded = bytes;
  r.files_resumed = 1;
  r.bytes_resumed = resumed;
  r.files_reused = 1;
  r.bytes_reused = reused;
  return r;
}

TEST(ResultSums, APrefetchAddsEveryCount) {
  transfer::PrefetchResult first = fetched(100, 10, 1);
  first.modules_present = 3;
  first.staging_reclaimed = 1;
  first.completed = {"a"};
  first.failed = {{"b", "timed out"}};
  transfer::PrefetchResult later = fetched(200, 20, 2);
  later.modules_present = 1;
  later.completed = {"b"};
  later.failed = {{"c", "refused"}};

  first += later;
  EXPECT_EQ(first.modules_installed, 2u);
  EXPECT_EQ(first.modules_present, 4u);
  EXPECT_EQ(first.files_downloaded, 4u);
  EXPECT_EQ(first.bytes_downloaded, 300u);
  EXPECT_EQ(first.files_resumed, 2u);
  EXPECT_EQ(first.bytes_resumed, 30u);
  EXPECT_EQ(first.files_reused, 2u);
  EXPECT_EQ(first.bytes_reused, 3u);
  EXPECT_EQ(first.staging_reclaimed, 1);
  // The retry completed "b": it is no longer failed; "c" failed later.
  EXPECT_EQ(first.completed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(first.failed, (std::map<std::string, std::string>{{"c", "refused"}}));
}

TEST(ResultSums, AKeyCompletedTwiceIsListedOnce) {
  transfer::PrefetchResult first;
  first.completed = {"a"};
  transfer::PrefetchResult again;
  again.completed = {"a"};
  first += again;
  EXPECT_EQ(first.completed.size(), 1u);
}

TEST(ResultSums, ALaterFailureOfAKeyReplacesItsReason) {
  transfer::PrefetchResult first;
  first.failed = {{"a", "timed out"}};
  transfer::PrefetchResult later;
  later.failed = {{"a", "refused"}};
  first += later;
  EXPECT_EQ(first.failed.at("a"), "refused");
}

storage::CommitResult commit(const std::string& revision, size_t deleted) {
  storage::CommitResult c;
  c.committed = !revision.empty();
  c.revision = revision;
  c.link = revision.empty() ? "" : "https://hub/commit/" + revision;
  c.small_files = 1;
  c.large_sent = 2;
  c.large_already_stored = 1;
  c.unchanged = 1;
  c.deleted = deleted;
  c.bytes_sent = 1000;
  return c;
}

TEST(ResultSums, TheNewestCommitWinsAndDeletionsAddUp) {
  storage::CommitResult first = commit("1111", 2);
  first.warnings = {"w1"};
  storage::CommitResult later = commit("2222", 3);
  later.warnings = {"w2"};
  later.uploads_aborted = 4;
  first += later;
  EXPECT_TRUE(first.committed);
  EXPECT_EQ(first.revision, "2222");
  EXPECT_EQ(first.link, "https://hub/commit/2222");
  EXPECT_EQ(first.deleted, 5u);
  EXPECT_EQ(first.small_files, 2u);
  EXPECT_EQ(first.large_sent, 4u);
  EXPECT_EQ(first.large_already_stored, 2u);
  EXPECT_EQ(first.unchanged, 2u);
  EXPECT_EQ(first.bytes_sent, 2000u);
  EXPECT_EQ(first.uploads_aborted, 4u);
  EXPECT_EQ(first.warnings, (std::vector<std::string>{"w1", "w2"}));
}

TEST(ResultSums, ALaterPushThatCommittedNothingKeepsTheCommitBefore) {
  storage::CommitResult first = commit("1111", 0);
  first += commit("", 0);
  EXPECT_EQ(first.revision, "1111");
  EXPECT_TRUE(first.committed);
}

pipeline::PushStep push_step(const std::string& key, const std::string& revision) {
  pipeline::PushStep step;
  step.attempted = true;
  step.result.pushed = {key};
  step.result.modules_added = 1;
  step.result.attempts = 1;
  step.result.commit = commit(revision, 1);
  step.seconds = 1;
  return step;
}

// A machine pushed twice before waiting for others, then its push step found nothing new.
TEST(ResultSums, PushesBeforeWaitingThenNothingNewReportTheNewestCommit) {
  pipeline::PushStep last;
  last.skipped_reason = "nothing new to push";
  last.seconds = 0.5;

  pipeline::PushStep all;
  all += push_step("a", "1111");
  all += push_step("b", "2222");
  all += last;
  EXPECT_TRUE(all.attempted);
  EXPECT_EQ(all.skipped_reason, "");
  EXPECT_EQ(all.result.pushed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(all.result.modules_added, 2u);
  EXPECT_EQ(all.result.attempts, 2);
  EXPECT_EQ(all.result.commit.revision, "2222");
  EXPECT_EQ(all.result.commit.deleted, 2u);
  EXPECT_DOUBLE_EQ(all.seconds, 2.5);
}

TEST(ResultSums, AFailedLastPushKeepsItsError) {
  pipeline::PushStep failed;
  failed.attempted = true;
  failed.skipped_reason = "503 Service Unavailable";
  pipeline::PushStep all;
  all += push_step("a", "1111");
  all += failed;
  EXPECT_TRUE(all.attempted);
  EXPECT_EQ(all.skipped_reason, "503 Service Unavailable");
  EXPECT_EQ(all.result.commit.revision, "1111");
}

TEST(ResultSums, NothingAttemptedKeepsTheReason) {
  pipeline::PushStep skipped;
  skipped.skipped_reason = "--read-only";
  pipeline::PushStep all;
  all += skipped;
  EXPECT_FALSE(all.attempted);
  EXPECT_EQ(all.skipped_reason, "--read-only");
}

// The report of a run that fetched after waiting for another machine counts those bytes: the
// resumed ones and the failures too, not only the downloaded ones.
TEST(ResultSums, TheReportCountsWhatWasFetchedAfterWaiting) {
  pipeline::RunResult run;
  pipeline::PrefetchStep prefetch;
  prefetch.result = fetched(100, 10, 1);
  run.prefetch = prefetch;
  run.compile.emplace();
  run.compile->fetched.hits = 1;
  run.compile->fetched.result = fetched(200, 20, 2);
  run.compile->fetched.result.failed = {{"k", "refused"}};
  report::Totals t = report::totals(run);
  EXPECT_EQ(t.bytes_downloaded, 300u);
  EXPECT_EQ(t.bytes_resumed, 30u);
  EXPECT_EQ(t.store_hits, 1u);
  EXPECT_EQ(t.not_installed, 1u);
}

TEST(ResultSums, APrefetchStepAddsHitsAndSeconds) {
  pipeline::PrefetchStep first;
  first.hits = 2;
  first.seconds = 1.5;
  first.result = fetched(5, 1, 1);
  pipeline::PrefetchStep later;
  later.hits = 1;
  later.seconds = 0.5;
  later.result = fetched(7, 2, 3);
  first += later;
  EXPECT_EQ(first.hits, 3u);
  EXPECT_DOUBLE_EQ(first.seconds, 2.0);
  EXPECT_EQ(first.result.bytes_downloaded, 12u);
  EXPECT_EQ(first.result.bytes_reused, 4u);
}

}  // namespace
}  // namespace neuron_cache::testing
