// S3Store's conditional index writes against a small S3 stand-in that ENFORCES If-Match and
// If-None-Match (s3rver accepts and ignores them), and one that ignores them while another writer
// replaces the object: both must end in CommitConflict, never in a silently lost update.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/remote/commit_on_head.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_stand_in.h"
#include "test_support.h"

namespace neuron_cache::storage {
namespace {

using testing::TempDir;
using testing::write_file;

CommitOperation add(const std::string& path, const std::filesystem::path& local,
                    Expected expected = {}) {
  return {CommitOperation::Kind::Add, path, local, std::move(expected)};
}

const std::string kIndex = "neuron-cache-index/neuronxcc-2.21.33363.0+82129205/acme--m.json";

TEST(S3StoreConditional, SecondCreatorConflicts) {
  testing::S3StandIn s3;
  TempDir dir;
  write_file(dir / "a", "{\"a\":1}");
  write_file(dir / "b", "{\"b\":1}");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  S3Store b("s3://bucket/c", s3.access(), s3.options());
  SmallFile a_read = a.read_versioned(kIndex, "", 1 << 20);
  SmallFile b_read = b.read_versioned(kIndex, "", 1 << 20);
  EXPECT_FALSE(a_read.content);
  EXPECT_FALSE(b_read.content);
  a.commit({add(kIndex, dir / "a", a_read.expected())}, "", std::nullopt);
  EXPECT_THROW(b.commit({add(kIndex, dir / "b", b_read.expected())}, "", std::nullopt),
               CommitConflict);
  EXPECT_EQ(s3.body("c/" + kIndex), "{\"a\":1}");  // a's update was not lost
  // b reads again (merges) and publishes.
  b_read = b.read_versioned(kIndex, "", 1 << 20);
  EXPECT_EQ(*b_read.content, "{\"a\":1}");
  write_file(dir / "b", "{\"a\":1,\"b\":1}");
  EXPECT_EQ(b.commit({add(kIndex, dir / "b", b_read.expected())}, "", std::nullopt).small_files,
            1u);
  EXPECT_EQ(s3.body("c/" + kIndex), "{\"a\":1,\"b\":1}");
  EXPECT_TRUE(s3.signed_.load());
}

// A lease's age on S3 (fleet/lease_watch.h): Last-Modified against the same answer's Date, both
// the server's clock; an absent object has none.
TEST(S3StoreConditional, ASmallReadGivesTheServersTimes) {
  testing::S3StandIn s3;
  S3Store store("s3://bucket/c", s3.access(), s3.options());
  EXPECT_FALSE(store.read_versioned(kIndex, "", 1 << 20).times);
  s3.put("c/" + kIndex, "v1");
  const int64_t written = static_cast<int64_t>(std::time(nullptr)) - 100;
  s3.set_modified("c/" + kIndex, written);
  SmallFile read = store.read_versioned(kIndex, "", 1 << 20);
  ASSERT_TRUE(read.times);
  EXPECT_EQ(read.times->written, written);
  EXPECT_GE(read.times->now - written, 100);
  EXPECT_LT(read.times->now - written, 160);
}

TEST(S3StoreConditional, StaleUpdateConflictsAndArtifactsGoFirst) {
  testing::S3StandIn s3;
  s3.put("c/" + kIndex, "v1");
  TempDir dir;
  write_file(dir / "neff", "NEFF");
  write_file(dir / "a", "va");
  write_file(dir / "b", "vb");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  S3Store b("s3://bucket/c", s3.access(), s3.options());
  SmallFile a_read = a.read_versioned(kIndex, "", 100);
  SmallFile b_read = b.read_versioned(kIndex, "", 100);
  EXPECT_EQ(*a_read.content, "v1");
  EXPECT_EQ(*b_read.content, "v1");
  EXPECT_EQ(a_read.version, b_read.version);  // the ETag
  b.commit({add(kIndex, dir / "b", b_read.expected())}, "", std::nullopt);
  s3.clear_log();
  EXPECT_THROW(a.commit({add(kIndex, dir / "a", a_read.expected()),
                         add("n/MODULE_1/model.neff", dir / "neff")},
                        "", std::nullopt),
               CommitConflict);
  EXPECT_EQ(s3.body("c/" + kIndex), "vb");
  // The artifact went first, then the index with If-Match.
  std::vector<std::string> puts;
  for (const auto& line : s3.log()) {
    bool probe = line.find(S3Store::kProbePrefix) != std::string::npos;
    if (line.rfind("PUT", 0) == 0 && !probe) puts.push_back(line);
  }
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0], "PUT /bucket/c/n/MODULE_1/model.neff");
  EXPECT_EQ(puts[1], "PUT /bucket/c/" + kIndex + " If-Match");
  s3.conflict_status_ = 409;  // S3's ConditionalRequestConflict
  EXPECT_THROW(a.commit({add(kIndex, dir / "a", a_read.expected())}, "", std::nullopt),
               CommitConflict);
}

TEST(S3StoreConditional, IgnoredConditionsAreCaughtByReadingBack) {
  testing::S3StandIn s3;
  s3.enforce_ = false;  // like s3rver
  TempDir dir;
  write_file(dir / "a", "va");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  SmallFile read = a.read_versioned(kIndex, "", 100);
  EXPECT_FALSE(read.content);
  s3.replace_before_head_ = true;
  EXPECT_THROW(a.commit({add(kIndex, dir / "a", read.expected())}, "", std::nullopt),
               CommitConflict);
}

// One writer's publication as push makes it: read the index (a JSON list of names), add `name`
// unless it is there, write it conditionally; a conflict reads and merges again.
void publish(S3Store& store, const std::string& name, const std::filesystem::path& scratch) {
  net::RetryPolicy conflicts;
  conflicts.max_attempts = 5;
  conflicts.base = std::chrono::milliseconds(1);
  int attempts = 0;
  remote::commit_on_head(store, conflicts, "pushing", attempts, [&](const std::string&) {
    SmallFile read = store.read_versioned(kIndex, "", 1 << 20);
    std::set<std::string> names;
    if (read.content) names = nlohmann::json::parse(*read.content).get<std::set<std::string>>();
    if (!names.insert(name).second) return;
    write_file(scratch, nlohmann::json(names).dump());
    store.commit({add(kIndex, scratch, read.expected())}, "", std::nullopt);
  });
}

// Two first pushes to a store that ignores conditions: b read "no index" before a wrote, and
// b's PUT lands just after a read its own write back. Both entries must end in the index.
TEST(S3StoreConditional, IgnoredConditionsAreCaughtByReadingAgainLater) {
  testing::S3StandIn s3;
  s3.enforce_ = false;  // like s3rver, older MinIO
  TempDir dir;
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  s3.after_head_ = [&](const std::string& key) {
    EXPECT_EQ(key, "c/" + kIndex);
    s3.put(key, "[\"b\"]");  // b's write, conditional on "absent" too, is not refused
  };
  publish(a, "a", dir / "a");
  EXPECT_EQ(s3.body("c/" + kIndex), "[\"a\",\"b\"]");
  // The probe ran once, and left nothing behind.
  std::vector<std::string> log = s3.log();
  EXPECT_EQ(std::count_if(log.begin(), log.end(),
                          [](const std::string& line) {
                            return line.find(S3Store::kProbePrefix) != std::string::npos &&
                                   line.rfind("PUT", 0) == 0;
                          }),
            1);
  EXPECT_EQ(std::count_if(log.begin(), log.end(),
                          [](const std::string& line) {
                            return line.find(S3Store::kProbePrefix) != std::string::npos &&
                                   line.rfind("DELETE", 0) == 0;
                          }),
            1);
}

// b merged and wrote after a's read but before a's write: a's check of the version it read,
// made just before writing, finds it changed, and a merges without overwriting b.
TEST(S3StoreConditional, IgnoredConditionsAreCheckedBeforeWriting) {
  testing::S3StandIn s3;
  s3.enforce_ = false;
  TempDir dir;
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  SmallFile read = a.read_versioned(kIndex, "", 100);
  EXPECT_FALSE(read.content);
  s3.put("c/" + kIndex, "[\"b\"]");
  write_file(dir / "a", "[\"a\"]");
  s3.clear_log();
  EXPECT_THROW(a.commit({add(kIndex, dir / "a", read.expected())}, "", std::nullopt),
               CommitConflict);
  EXPECT_EQ(s3.body("c/" + kIndex), "[\"b\"]");
  for (const auto& line : s3.log()) EXPECT_NE(line, "PUT /bucket/c/" + kIndex + " If-None-Match");
}

// A store that enforces conditions is asked once whether it does, and no write waits.
TEST(S3StoreConditional, EnforcedConditionsNeedNoSecondRead) {
  testing::S3StandIn s3;
  TempDir dir;
  S3Options options = s3.options();
  options.recheck = std::chrono::milliseconds(20000);
  S3Store a("s3://bucket/c", s3.access(), options);
  auto start = std::chrono::steady_clock::now();
  publish(a, "a", dir / "a");
  publish(a, "b", dir / "b");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(s3.body("c/" + kIndex), "[\"a\",\"b\"]");
  std::vector<std::string> log = s3.log();
  EXPECT_EQ(std::count_if(log.begin(), log.end(),
                          [](const std::string& line) {
                            return line.find(S3Store::kProbePrefix) != std::string::npos;
                          }),
            1);
}

TEST(S3StoreConditional, SlowDownIsRetried) {
  testing::S3StandIn s3;
  std::string big(6u << 20, 'n');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  s3.put("c/big", big);
  s3.put("c/" + kIndex, "v1");
  S3Options options = s3.options();
  options.part_size = S3Options::kMinPartSize;  // 2 ranged parts
  S3Store store("s3://bucket/c", s3.access(), options);
  s3.slow_downs_ = 2;
  SmallFile read = store.read_versioned(kIndex, "", 100);
  EXPECT_EQ(*read.content, "v1");
  EXPECT_EQ(store.requests(), 3u);
  TempDir dir;
  s3.slow_downs_ = 3;
  auto stated = store.stat({"big"}, "");
  ASSERT_EQ(stated.size(), 1u);
  RemoteEntry expected = stated[0];
  expected.content_sha256 = sha256_hex(big);
  int fd = ::open((dir / "big").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::vector<DownloadRequest> requests{{"big", fd, expected}};
  s3.slow_downs_ = 3;
  auto results = store.download("", requests);
  ::close(fd);
  EXPECT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(testing::read_file(dir / "big"), big);
  write_file(dir / "v2", "v2");
  s3.slow_downs_ = 1;
  EXPECT_EQ(store.commit({add(kIndex, dir / "v2", read.expected())}, "", std::nullopt).small_files,
            1u);
  EXPECT_EQ(s3.body("c/" + kIndex), "v2");
}

}  // namespace
}  // namespace neuron_cache::storage
