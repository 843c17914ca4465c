// A hostile S3 server (an httplib stand-in): listings whose pages never end and answers that drip.
// Every one must end with a message, quickly, whatever the server keeps sending.
#include <gtest/gtest.h>
#include <httplib.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/sys/fd.h"
#include "s3_server.h"

namespace neuron_cache::storage {
namespace {

using namespace std::chrono_literals;

enum class Mode { EndlessPages, DrippingList, ServeBytes };

// What ServeBytes mode serves for every GET: 4 KiB of known bytes.
const std::string kServed = std::string(4096, 'n');

class HostileS3 {
 public:
  explicit HostileS3(Mode mode) : mode_(mode) {
    server_.Get("/(.*)", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      if (mode_ == Mode::EndlessPages) return endless_page(res);
      if (mode_ == Mode::ServeBytes) {
        res.set_header("ETag", "\"" + md5_hex(kServed) + "\"");
        return res.set_content(kServed, "application/octet-stream");
      }
      drip(res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~HostileS3() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }

  config::AwsAccess access() const { return testing::loopback_access(port_); }
  int requests() const { return requests_; }
  std::atomic<bool> stopping_{false};

 private:
  // Always "more follow", a fresh token each time, and nothing on the page.
  void endless_page(httplib::Response& res) {
    res.set_content("<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t" +
                        std::to_string(requests_.load()) +
                        "</NextContinuationToken></ListBucketResult>",
                    "application/xml");
  }

  // A valid listing, two bytes a second.
  void drip(httplib::Response& res) {
    res.set_chunked_content_provider("application/xml", [this](size_t, httplib::DataSink& sink) {
      const std::string body =
          "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
      for (size_t i = 0; i < body.size() && !stopping_; i += 2) {
        if (!sink.write(body.data() + i, std::min<size_t>(2, body.size() - i))) return false;
        std::this_thread::sleep_for(1s);
      }
      sink.done();
      return true;
    });
  }

  Mode mode_;
  std::atomic<int> requests_{0};
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

S3Options fast_options() {
  S3Options options;
  options.retry = {2, 10ms, 20ms};
  options.timeout = 500ms;
  return options;
}

TEST(S3Hostile, PagesThatNeverEndAreCutOffWithAMessage) {
  HostileS3 s3(Mode::EndlessPages);
  S3Store store("s3://bucket/c", s3.access(), fast_options());
  auto start = std::chrono::steady_clock::now();
  try {
    store.list("neuron-cache-index", true, "");
    ADD_FAILURE() << "an endless listing ended";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("held nothing but said more follow"),
              std::string::npos)
        << error.what();
  }
  EXPECT_LE(s3.requests(), 12);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(S3Hostile, AListingThatDripsIsCutAtItsDeadline) {
  HostileS3 s3(Mode::DrippingList);
  S3Store store("s3://bucket/c", s3.access(), fast_options());
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store.list("neuron-cache-index", true, ""), Error);
  // 8 times the 500 ms timeout per attempt, two attempts at most.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  s3.stopping_ = true;
}

// The digest check of S3 downloads, offline: bytes that are not the ones an index entry names
// (same size, another sha256) are never reported downloaded; the right ones are.
TEST(S3Hostile, DownloadedBytesAreCheckedAgainstTheEntrysSha256) {
  HostileS3 s3(Mode::ServeBytes);
  S3Store store("s3://bucket/c", s3.access(), fast_options());
  for (bool right : {false, true}) {
    SCOPED_TRACE(right);
    sys::UniqueFd fd(memfd_create("download", MFD_CLOEXEC));
    RemoteEntry expected;
    expected.size = kServed.size();
    expected.content_sha256 = sha256_hex(right ? kServed : kServed.substr(1) + "x");
    std::vector<DownloadRequest> requests{{"MODULE_1+abcdef01/model.neff", fd.get(), expected}};
    DownloadResult result = store.download("", requests).front();
    EXPECT_EQ(result.ok, right) << result.error;
    EXPECT_EQ(result.error.empty(), right) << result.error;
  }
}

}  // namespace
}  // namespace neuron_cache::storage
