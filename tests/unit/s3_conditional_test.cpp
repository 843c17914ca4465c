// S3Store's conditional index writes against a small S3 stand-in that ENFORCES If-Match and
// If-None-Match (s3rver accepts and ignores them), and one that ignores them while another writer
// replaces the object: both must end in CommitConflict, never in a silently lost update.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>
#include <atomic>

#include <mutex>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_server.h"
#include "test_support.h"

namespace neuron_cache::storage {
namespace {

using testing::TempDir;
using testing::write_file;

// Objects in memory, served path-style at http://127.0.0.1:PORT/<bucket>/<key>.
class ConditionalS3 {
 public:
  ConditionalS3() {
    server_.Get("/(.*)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      log_.push_back(req.method + " " + req.path);
      // httplib turns a 503 to a Range request into 416: ranged 503s are S3FaultTest's, through
      // the fault proxy in front of s3rver.
      if (!req.has_header("Range") && slow_down()) return slow_down_answer(res);
      auto found = objects_.find(req.path);
      if (found == objects_.end()) {
        res.status = 404;
        res.set_content("<Error><Code>NoSuchKey</Code></Error>", "application/xml");
        return;
      }
      std::string etag = found->second.second;
      if (req.method == "HEAD" && replace_before_head_) {
        etag = md5_hex("another writer");  // someone replaced it after our PUT
        replace_before_head_ = false;
      }
      res.set_header("ETag", "\"" + etag + "\"");
      res.set_content(found->second.first, "application/octet-stream");
    });
    server_.Put("/(.*)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      log_.push_back("PUT " + req.path + (req.has_header("If-Match") ? " If-Match" : "") +
                     (req.has_header("If-None-Match") ? " If-None-Match" : ""));
      if (slow_down()) return slow_down_answer(res);
      signed_ = signed_ &&
                req.get_header_value("Authorization").rfind("AWS4-HMAC-SHA256", 0) == 0 &&
                req.get_header_value("x-amz-content-sha256") == sha256_hex(req.body);
      auto found = objects_.find(req.path);
      if (enforce_) {
        bool exists = found != objects_.end();
        std::string match = req.get_header_value("If-Match");
        bool refused = (req.get_header_value("If-None-Match") == "*" && exists) ||
                       (!match.empty() && (!exists || match != "\"" + found->second.second + "\""));
        if (refused) {
          res.status = conflict_status_;
          res.set_content(conflict_status_ == 409
                              ? "<Error><Code>ConditionalRequestConflict</Code></Error>"
                              : "<Error><Code>PreconditionFailed</Code></Error>",
                          "application/xml");
          return;
        }
      }
      std::string etag = md5_hex(req.body);
      objects_[req.path] = {req.body, etag};
      res.set_header("ETag", "\"" + etag + "\"");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ConditionalS3() {
    server_.stop();
    thread_.join();
  }

  config::AwsAccess access() const { return testing::loopback_access(port_); }
  S3Options options() const {
    S3Options options;
    options.retry.base = std::chrono::milliseconds(10);
    return options;
  }
  void put(const std::string& key, const std::string& body) {
    std::lock_guard lock(mutex_);
    objects_["/bucket/" + key] = {body, md5_hex(body)};
  }
  std::string body(const std::string& key) {
    std::lock_guard lock(mutex_);
    return objects_["/bucket/" + key].first;
  }

  // Atomic: the server answers on several threads (parallel ranged GETs).
  bool slow_down() {
    int left = slow_downs_.load();
    while (left > 0 && !slow_downs_.compare_exchange_weak(left, left - 1)) {
    }
    return left > 0;
  }
  static void slow_down_answer(httplib::Response& res) {
    res.status = 503;
    res.set_content(
        "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>",
        "application/xml");
  }

  std::mutex mutex_;
  std::atomic<int> slow_downs_{0};  // the next requests answered 503 SlowDown
  bool enforce_ = true;
  bool replace_before_head_ = false;
  int conflict_status_ = 412;
  bool signed_ = true;
  std::vector<std::string> log_;

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::map<std::string, std::pair<std::string, std::string>> objects_;
};

CommitOperation add(const std::string& path, const std::filesystem::path& local) {
  return {CommitOperation::Kind::Add, path, local};
}

const std::string kIndex = "neuron-cache-index/neuronxcc-2.21.33363.0+82129205/acme--m.json";

TEST(S3StoreConditional, SecondCreatorConflicts) {
  ConditionalS3 s3;
  TempDir dir;
  write_file(dir / "a", "{\"a\":1}");
  write_file(dir / "b", "{\"b\":1}");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  S3Store b("s3://bucket/c", s3.access(), s3.options());
  EXPECT_FALSE(a.read_small(kIndex, "", 1 << 20));
  EXPECT_FALSE(b.read_small(kIndex, "", 1 << 20));
  a.commit({add(kIndex, dir / "a")}, "", std::nullopt);
  EXPECT_THROW(b.commit({add(kIndex, dir / "b")}, "", std::nullopt), CommitConflict);
  EXPECT_EQ(s3.body("c/" + kIndex), "{\"a\":1}");  // a's update was not lost
  // b reads again (merges) and publishes.
  EXPECT_EQ(*b.read_small(kIndex, "", 1 << 20), "{\"a\":1}");
  write_file(dir / "b", "{\"a\":1,\"b\":1}");
  EXPECT_EQ(b.commit({add(kIndex, dir / "b")}, "", std::nullopt).small_files, 1u);
  EXPECT_EQ(s3.body("c/" + kIndex), "{\"a\":1,\"b\":1}");
  EXPECT_TRUE(s3.signed_);
}

TEST(S3StoreConditional, StaleUpdateConflictsAndArtifactsGoFirst) {
  ConditionalS3 s3;
  s3.put("c/" + kIndex, "v1");
  TempDir dir;
  write_file(dir / "neff", "NEFF");
  write_file(dir / "a", "va");
  write_file(dir / "b", "vb");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  S3Store b("s3://bucket/c", s3.access(), s3.options());
  EXPECT_EQ(*a.read_small(kIndex, "", 100), "v1");
  EXPECT_EQ(*b.read_small(kIndex, "", 100), "v1");
  b.commit({add(kIndex, dir / "b")}, "", std::nullopt);
  s3.log_.clear();
  EXPECT_THROW(a.commit({add(kIndex, dir / "a"), add("n/MODULE_1/model.neff", dir / "neff")}, "",
                        std::nullopt),
               CommitConflict);
  EXPECT_EQ(s3.body("c/" + kIndex), "vb");
  // The artifact went first, then the index with If-Match.
  std::vector<std::string> puts;
  for (const auto& line : s3.log_) {
    if (line.rfind("PUT", 0) == 0) puts.push_back(line);
  }
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0], "PUT /bucket/c/n/MODULE_1/model.neff");
  EXPECT_EQ(puts[1], "PUT /bucket/c/" + kIndex + " If-Match");
  s3.conflict_status_ = 409;  // S3's ConditionalRequestConflict
  EXPECT_THROW(a.commit({add(kIndex, dir / "a")}, "", std::nullopt), CommitConflict);
}

TEST(S3StoreConditional, IgnoredConditionsAreCaughtByReadingBack) {
  ConditionalS3 s3;
  s3.enforce_ = false;  // like s3rver
  TempDir dir;
  write_file(dir / "a", "va");
  S3Store a("s3://bucket/c", s3.access(), s3.options());
  EXPECT_FALSE(a.read_small(kIndex, "", 100));
  s3.replace_before_head_ = true;
  EXPECT_THROW(a.commit({add(kIndex, dir / "a")}, "", std::nullopt), CommitConflict);
}

TEST(S3StoreConditional, SlowDownIsRetried) {
  ConditionalS3 s3;
  std::string big(6u << 20, 'n');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  s3.put("c/big", big);
  s3.put("c/" + kIndex, "v1");
  S3Options options = s3.options();
  options.part_size = S3Options::kMinPartSize;  // 2 ranged parts
  S3Store store("s3://bucket/c", s3.access(), options);
  s3.slow_downs_ = 2;
  EXPECT_EQ(*store.read_small(kIndex, "", 100), "v1");
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
  EXPECT_EQ(store.commit({add(kIndex, dir / "v2")}, "", std::nullopt).small_files, 1u);
  EXPECT_EQ(s3.body("c/" + kIndex), "v2");
}

}  // namespace
}  // namespace neuron_cache::storage
