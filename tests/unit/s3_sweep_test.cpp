// Multipart uploads a killed writer left (issue 21): a push aborts those under the store's prefix
// begun more than a day ago, never a younger one (another machine may be uploading it), reads a
// bounded number of listing pages, does it once per run, and a failing sweep is a warning that
// never fails the push. Against the in-process S3 stand-in, whose uploads carry Initiated dates.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>

#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "s3_stand_in.h"
#include "test_support.h"

namespace neuron_cache::storage {
namespace {

using testing::TempDir;
using testing::write_file;

const std::string kNeff = "neuronxcc-2.21.33363.0+82129205/MODULE_9+abcdef01/model.neff";

// S3's form of a time `hours` ago.
std::string hours_ago(int hours) {
  std::time_t when = std::time(nullptr) - hours * 3600;
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000Z", &utc);
  return text;
}

CommitResult push_one(S3Store& store, const TempDir& dir, const std::string& path = kNeff) {
  write_file(dir / "neff", "NEFF " + path);
  return store.commit({{CommitOperation::Kind::Add, path, dir / "neff"}}, "", std::nullopt);
}

size_t listings(testing::S3StandIn& s3) {
  auto log = s3.log();
  return std::count_if(log.begin(), log.end(), [](const std::string& line) {
    return line.find("?uploads") != std::string::npos && line.rfind("GET", 0) == 0;
  });
}

TEST(S3Sweep, OldUploadsAreAbortedYoungOnesKeptOncePerRun) {
  testing::S3StandIn s3;
  s3.uploads_per_page_ = 2;  // the listing pages
  std::string old1 = s3.add_upload("c/n/MODULE_1/model.neff", "2020-01-01T00:00:00.000Z");
  std::string old2 = s3.add_upload("c/n/MODULE_2/model.neff", hours_ago(25));
  std::string young = s3.add_upload("c/n/MODULE_3/model.neff", hours_ago(23));
  std::string undated = s3.add_upload("c/n/MODULE_4/model.neff", "yesterday");
  std::string elsewhere = s3.add_upload("other/model.neff", "2020-01-01T00:00:00.000Z");
  TempDir dir;
  S3Store store("s3://bucket/c", s3.access(), s3.options());
  CommitResult result = push_one(store, dir);
  EXPECT_EQ(result.uploads_aborted, 2u);
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
  EXPECT_TRUE(s3.has("c/" + kNeff));
  std::vector<std::string> left = s3.uploads();
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{young, undated, elsewhere};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
  EXPECT_EQ(listings(s3), 2u);  // 4 uploads under c/, 2 a page
  // Once per run: the next push of the same run does not list again.
  s3.add_upload("c/n/MODULE_5/model.neff", "2020-01-01T00:00:00.000Z");
  EXPECT_EQ(push_one(store, dir, kNeff + ".2").uploads_aborted, 0u);
  EXPECT_EQ(listings(s3), 2u);
}

TEST(S3Sweep, AFailingSweepIsAWarningAndThePushGoesOn) {
  testing::S3StandIn s3;
  s3.fail_upload_listing_ = true;
  std::string old = s3.add_upload("c/n/MODULE_1/model.neff", "2020-01-01T00:00:00.000Z");
  TempDir dir;
  S3Options options = s3.options();
  options.retry.max_attempts = 2;
  S3Store store("s3://bucket/c", s3.access(), options);
  CommitResult result = push_one(store, dir);
  EXPECT_TRUE(s3.has("c/" + kNeff));
  EXPECT_EQ(result.large_sent, 1u);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("listing the multipart uploads in s3://bucket/c failed: HTTP "
                                    "500 InternalError"),
            std::string::npos)
      << result.warnings[0];
  EXPECT_NE(result.warnings[0].find("AbortIncompleteMultipartUpload"), std::string::npos);
  EXPECT_EQ(s3.uploads(), std::vector<std::string>{old});
}

// The listing reads a bounded number of pages: what it found is aborted, the rest waits for the
// next run, and the push says so.
TEST(S3Sweep, TheListingIsBoundedAndTheNextRunGoesOn) {
  testing::S3StandIn s3;
  s3.uploads_per_page_ = 1;
  for (int i = 0; i < 15; ++i) {
    s3.add_upload("c/n/MODULE_" + std::to_string(10 + i) + "/model.neff",
                  "2020-01-01T00:00:00.000Z");
  }
  TempDir dir;
  S3Store first("s3://bucket/c", s3.access(), s3.options());
  CommitResult result = push_one(first, dir);
  EXPECT_EQ(result.uploads_aborted, 10u);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("10 pages"), std::string::npos) << result.warnings[0];
  EXPECT_EQ(s3.uploads().size(), 5u);
  S3Store next("s3://bucket/c", s3.access(), s3.options());
  EXPECT_EQ(push_one(next, dir, kNeff + ".2").uploads_aborted, 5u);
  EXPECT_TRUE(s3.uploads().empty());
}

// An upload record is store text: whatever it holds, it is refused with a reason or read as a
// plain path below the store's prefix and an id of S3's characters.
TEST(S3Sweep, UploadRecordsAreValidatedWhenReadBack) {
  std::string why;
  auto record = parse_upload_record(
      upload_record_text({"neuronxcc-1/MODULE_1/model.neff", "a.B-c_d~e+f/g="}), why);
  ASSERT_TRUE(record) << why;
  EXPECT_EQ(record->path, "neuronxcc-1/MODULE_1/model.neff");
  EXPECT_EQ(record->upload_id, "a.B-c_d~e+f/g=");
  for (std::string hostile :
       {std::string(""), std::string("[]"),
        std::string("{\"format\":2,\"path\":\"a\",\"upload_id\":\"b\"}"),
        std::string("{\"format\":1,\"path\":7,\"upload_id\":\"b\"}"),
        upload_record_text({"a/../../b", "id"}), upload_record_text({"a//b", "id"}),
        upload_record_text({"a/./b", "id"}), upload_record_text({"a/b/", "id"}),
        upload_record_text({"a\nb", "id"}), upload_record_text({"a\\b", "id"}),
        upload_record_text({std::string(2000, 'a'), "id"}), upload_record_text({"a", ""}),
        upload_record_text({"a", "id&x=1"}), upload_record_text({"a", std::string(2000, 'i')}),
        upload_record_text({"neuron-cache-uploads/0123456789abcdef.json", "id"}),
        std::string(kMaxUploadRecordBytes + 1, ' '), std::string("\xff\xfe{")}) {
    why.clear();
    EXPECT_FALSE(parse_upload_record(hostile, why)) << hostile;
    EXPECT_FALSE(why.empty()) << hostile;
  }
  EXPECT_TRUE(is_upload_record_path(new_upload_record_path()));
  EXPECT_FALSE(is_upload_record_path("neuron-cache-uploads/0123456789ABCDEF.json"));
  EXPECT_FALSE(is_upload_record_path("neuron-cache-uploads/x/0123456789abcdef.json"));
  EXPECT_FALSE(is_upload_record_path("neuron-cache-index/0123456789abcdef.json"));
}

}  // namespace
}  // namespace neuron_cache::storage
