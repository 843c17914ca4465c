// maintenance::plan_gc / apply_gc (`neuron-cache gc`) on an S3 bucket (the in-process S3 stand-in,
// which lists LastModified): the same decisions as on a shared folder, the index rewrite
// conditional on the ETag read, and deletions that follow the plan's files, not the bucket's.
#include <gtest/gtest.h>

#include "gc_layout.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/maintenance/gc.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "s3_stand_in.h"
#include "test_support.h"

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

// On a server without ListMultipartUploads (s3rver, some S3-compatibles) the push's sweep finds
// nothing: each upload leaves a record under neuron-cache-uploads/ while it runs, and gc aborts
// the uploads whose record is older than a day, then deletes the record.
TEST(S3GcLeftovers, APushRecordsItsUploadOnlyWhileItRuns) {
  testing::S3StandIn s3;
  s3.lacks_upload_listing_ = true;
  storage::S3Options small = s3.options();
  small.part_size = storage::S3Options::kMinPartSize;
  storage::S3Store store("s3://bucket/c", s3.access(), small);
  testing::TempDir dir;
  std::string neff(storage::S3Options::kMinPartSize + 40, 'n');  // two parts
  testing::write_file(dir / "neff", neff);
  storage::CommitResult result = store.commit(
      {{storage::CommitOperation::Kind::Add, "neuronxcc-1/MODULE_1/model.neff", dir / "neff"}}, "",
      std::nullopt);
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
  EXPECT_TRUE(s3.body("c/neuronxcc-1/MODULE_1/model.neff") == neff);
  EXPECT_TRUE(s3.uploads().empty());
  EXPECT_TRUE(s3.keys("c/neuron-cache-uploads/").empty());
  size_t records = 0;
  for (const auto& line : s3.log())
    records += line.starts_with("PUT /bucket/c/neuron-cache-uploads/") ? 1 : 0;
  EXPECT_EQ(records, 1u);
}

TEST(S3GcLeftovers, OldRecordsAbortTheirUploadsHostileOnesAreOnlyDeleted) {
  testing::S3StandIn s3;
  s3.lacks_upload_listing_ = true;
  auto record = [&](const std::string& name, const std::string& text, int64_t modified) {
    std::string key = "c/neuron-cache-uploads/" + name;
    s3.put(key, text);
    s3.set_modified(key, modified);
    return key;
  };
  auto text = [](const std::string& path, const std::string& id) {
    return storage::upload_record_text({path, id});
  };
  std::string neff = "neuronxcc-1/MODULE_1/model.neff";
  std::string killed = s3.add_upload("c/" + neff, "2020-01-01T00:00:00.000Z");
  std::string live = s3.add_upload("c/neuronxcc-1/MODULE_2/model.neff", "2020-01-01T00:00:00.000Z");
  std::string outside = s3.add_upload("other/x", "2020-01-01T00:00:00.000Z");
  std::string old_record = record("0123456789abcdef.json", text(neff, killed), kNow - 2 * kGcDay);
  std::string young_record =
      record("1111111111111111.json", text("neuronxcc-1/MODULE_2/model.neff", live), kNow - 3600);
  // Hostile records, all old: only the record goes, never another upload.
  std::set<std::string> hostile = {
      record("2222222222222222.json", text("../other/x", outside), kNow - 2 * kGcDay),
      record("3333333333333333.json", text("/other/x", outside), kNow - 2 * kGcDay),
      record("4444444444444444.json", text(neff, "id\r\nHost: evil"), kNow - 2 * kGcDay),
      record("5555555555555555.json", "{\"format\":1,\"path\":", kNow - 2 * kGcDay),
      record("6666666666666666.json", std::string(5000, '{'), kNow - 2 * kGcDay),
      record("7777777777777777.json", text("neuron-cache-uploads/x", outside), kNow - 2 * kGcDay)};
  std::string other_shape = record("notes.txt", "not a record", kNow - 2 * kGcDay);
  storage::S3Store store("s3://bucket/c", s3.access(), s3.options());
  GcOptions o;
  o.now = kNow;

  GcPlan plan = plan_gc(store, o);
  EXPECT_TRUE(plan.problems.empty()) << plan.problems.front();
  ASSERT_EQ(plan.leftovers.size(), 1u + hostile.size());
  for (const auto& l : plan.leftovers) {
    EXPECT_EQ(l.kind, storage::Leftover::Kind::Upload);
    bool good = "c/" + l.path == old_record;
    EXPECT_TRUE(good || hostile.count("c/" + l.path)) << l.path;
    EXPECT_EQ(l.target, good ? neff : "") << l.path << ": " << l.why;
    EXPECT_EQ(l.upload_id, good ? killed : "") << l.path;
    if (!good) {
      EXPECT_NE(l.why.find("damaged upload record"), std::string::npos) << l.why;
    }
  }
  EXPECT_EQ(s3.uploads().size(), 3u);  // a dry run

  apply_gc(store, plan, o, {6, std::chrono::milliseconds(1), std::chrono::milliseconds(2)});
  EXPECT_EQ(plan.leftovers_removed, 1u + hostile.size());
  std::vector<std::string> left = s3.uploads();
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected = {live, outside};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
  EXPECT_FALSE(s3.has(old_record));
  for (const auto& key : hostile) EXPECT_FALSE(s3.has(key)) << key;
  EXPECT_TRUE(s3.has(young_record));
  EXPECT_TRUE(s3.has(other_shape));
  EXPECT_TRUE(plan_gc(store, o).leftovers.empty());
}

}  // namespace
}  // namespace neuron_cache::maintenance
