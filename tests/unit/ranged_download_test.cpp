// The ranged download engine below the Hub and S3 adapters, against a server that ignores Range.
#include "neuron_cache/net/ranged_download.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

namespace neuron_cache::net {
namespace {

std::string random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::string bytes(size, '\0');
  for (auto& byte : bytes) byte = static_cast<char>(generator());
  return bytes;
}

// Answers every GET with the whole content and 200, whatever Range asks for.
class WholeBodyServer {
 public:
  explicit WholeBodyServer(std::string content) : content_(std::move(content)) {
    server_.Get("/file", [this](const httplib::Request&, httplib::Response& response) {
      ++requests;
      response.set_content(content_, "application/octet-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~WholeBodyServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> requests{0};

 private:
  std::string content_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

class PlainSource : public RangedSource {
 public:
  explicit PlainSource(std::string url) : url_(std::move(url)) {}
  HttpRequest request(const std::optional<ByteRange>&) override {
    HttpRequest r{"GET", url_ + "/file"};
    r.send_token = false;
    return r;
  }
  std::string failure(const HttpResponse& response, int) override {
    return "failed with " + std::to_string(response.status);
  }
  std::string corrupt(const std::string& actual) override { return "corrupt: " + actual; }

 private:
  std::string url_;
};

struct Downloaded {
  RangedResult result;
  std::string content;
};

Downloaded download(const std::string& url, uint64_t size, const std::string& sha256) {
  HttpOptions http_options;
  http_options.endpoint = url;
  HttpEngine http(http_options);
  std::FILE* file = std::tmpfile();
  std::vector<RangedFile> files;
  files.push_back({"file",
                   fileno(file),
                   size,
                   {HashAlgorithm::Sha256, "", sha256},
                   std::make_unique<PlainSource>(url)});
  RangedOptions options;
  options.part_size = 64 << 10;
  options.retry = {3, std::chrono::milliseconds(1), std::chrono::milliseconds(5)};
  Downloaded done{download_ranged(http, files, options)[0], std::string(size, '\0')};
  if (pread(fileno(file), done.content.data(), size, 0) != static_cast<ssize_t>(size)) {
    done.content.clear();
  }
  std::fclose(file);
  return done;
}

TEST(RangedDownloadTest, PartsAnsweredWithTheWholeFileStillGiveAVerifiedFile) {
  std::string content = random_bytes((300 << 10) + 17, 1);
  WholeBodyServer server(content);
  Downloaded done = download(server.url(), content.size(), sha256_hex(content));
  ASSERT_TRUE(done.result.ok) << done.result.error;
  EXPECT_TRUE(done.content == content);
  EXPECT_EQ(server.requests.load(), 5) << "one request per 64 KiB part, each skipping to its range";
}

TEST(RangedDownloadTest, AMismatchIsFetchedWholeTwiceThenReported) {
  std::string content = random_bytes(200 << 10, 2);
  WholeBodyServer server(content);
  std::string wrong(64, '0');
  Downloaded done = download(server.url(), content.size(), wrong);
  EXPECT_FALSE(done.result.ok);
  EXPECT_EQ(done.result.error, "corrupt: " + sha256_hex(content));
  EXPECT_EQ(server.requests.load(), 4 + 2) << "four parts, then two whole-file refetches";
}

}  // namespace
}  // namespace neuron_cache::net
