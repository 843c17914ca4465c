// A hostile S3 server (an httplib stand-in): listings whose pages never end and answers that drip.
// Every one must end with a message, quickly, whatever the server keeps sending.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/storage/s3_store.h"

namespace neuron_cache::storage {
namespace {

using namespace std::chrono_literals;

enum class Mode { EndlessPages, DrippingList };

class HostileS3 {
 public:
  explicit HostileS3(Mode mode) : mode_(mode) {
    server_.Get("/(.*)", [this](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      if (mode_ == Mode::EndlessPages) return endless_page(res);
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

  config::AwsAccess access() const {
    config::AwsAccess access;
    access.access_key_id = "KEY";
    access.secret_access_key = "SECRET";
    access.region = "us-east-1";
    access.endpoint = "http://127.0.0.1:" + std::to_string(port_);
    access.custom_endpoint = true;
    return access;
  }
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

}  // namespace
}  // namespace neuron_cache::storage
