// maintenance::plan_gc / apply_gc (`neuron-cache gc`) on an S3 bucket (the in-process S3 stand-in,
// which lists LastModified): the same decisions as on a shared folder, the index rewrite
// conditional on the ETag read, and deletions that follow the plan's files, not the bucket's.
#include <gtest/gtest.h>

#include "gc_layout.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/maintenance/gc.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_stand_in.h"

namespace neuron_cache::maintenance {
namespace {

using testing::kGcDay;

constexpr int64_t kNow = 1'780'000'000;

void put_layout(testing::S3StandIn& s3, const testing::GcLayout& layout) {
  for (const auto& [path, content] : layout.files) {
    s3.put("c/" + path, content);
    auto it = layout.modified.find(path);
    s3.set_modified("c/" + path, it == layout.modified.end() ? kNow - 30 * kGcDay : it->second);
  }
}

GcOptions options(const testing::GcLayout& layout) {
  GcOptions o;
  o.now = kNow;
  o.older_than = 90 * kGcDay;
  o.declared = {layout.declared_key};
  return o;
}

TEST(S3Gc, RemovesExactlyWhatNothingNeeds) {
  testing::S3StandIn s3;
  testing::GcLayout layout = testing::gc_layout(kNow);
  put_layout(s3, layout);
  s3.put("other-prefix/neuronxcc-9.9/MODULE_1+e30acd3a/model.neff", "not this store's");
  storage::S3Store store("s3://bucket/c", s3.access(), s3.options());
  GcOptions o = options(layout);
  GcPlan plan = plan_gc(store, o);
  EXPECT_EQ(plan.kind, "s3");
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'B', 'U'}));
  EXPECT_EQ(plan.dropped.size(), 1u);
  ASSERT_EQ(plan.leases.size(), 2u);
  EXPECT_EQ(plan.freed.count, 10u);
  // The root, 4 top folders, 3 index files, 4 lease files: no request per MODULE_ file.
  EXPECT_LE(plan.requests, 1u + 4u + 3u + 4u + 2u) << plan.requests;

  apply_gc(store, plan, o, {6, std::chrono::milliseconds(1), std::chrono::milliseconds(2)});
  EXPECT_EQ(plan.files_deleted, 10u);
  EXPECT_EQ(plan.index_files_rewritten, 1u);
  for (const auto& [path, content] : layout.files) {
    bool gone = path.starts_with(layout.folder('B') + "/") ||
                path.starts_with(layout.folder('U') + "/") || path == layout.lease_done_old ||
                path == layout.lease_damaged;
    EXPECT_EQ(s3.has("c/" + path), !gone) << path;
  }
  EXPECT_TRUE(s3.has("other-prefix/neuronxcc-9.9/MODULE_1+e30acd3a/model.neff"));
  auto mistral = artifact_index::parse_index(s3.body("c/" + layout.v1_shard_mistral), "t");
  EXPECT_TRUE(mistral.entries.empty());
  GcPlan again = plan_gc(store, o);
  EXPECT_TRUE(again.removed.empty());
  EXPECT_TRUE(again.dropped.empty());
}

// Another writer pushes the dropped entry again between the plan and --apply: gc reads the shard
// again at apply time, the entry pushed again stays, and so does its folder.
TEST(S3Gc, AShardRewrittenAfterThePlanIsReadAgain) {
  testing::S3StandIn s3;
  testing::GcLayout layout = testing::gc_layout(kNow);
  put_layout(s3, layout);
  storage::S3Store store("s3://bucket/c", s3.access(), s3.options());
  GcOptions o = options(layout);
  GcPlan plan = plan_gc(store, o);
  auto [path, content] = testing::gc_push("acme/mistral", "MODULE_1002+e30acd3a", kNow);
  s3.put("c/" + path, content);

  apply_gc(store, plan, o, {6, std::chrono::milliseconds(1), std::chrono::milliseconds(2)});
  EXPECT_EQ(plan.index_files_rewritten, 0u);
  EXPECT_EQ(plan.spared, (std::vector<std::string>{layout.folder('B')}));
  EXPECT_TRUE(s3.has("c/" + layout.folder('B') + "/model.neff"));
  EXPECT_FALSE(s3.has("c/" + layout.folder('U') + "/model.neff"));
}

}  // namespace
}  // namespace neuron_cache::maintenance
