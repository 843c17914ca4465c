// The ranged download engine below the Hub and S3 adapters, against a server that ignores Range
// and one that answers it, resuming from spans an interrupted download left on disk.
#include "neuron_cache/net/ranged_download.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
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
    server_.Get("/file", [this](const httplib::Request& request, httplib::Response& response) {
      // httplib would otherwise answer a Range itself (206 and the slice).
      const_cast<httplib::Request&>(request).ranges.clear();
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

// Answers a Range request with 206 and those bytes (bytes=first-last only), anything else with
// 200 and the whole content; keeps the Range header of every request and the body bytes sent.
class RangeServer {
 public:
  explicit RangeServer(std::string content) : content_(std::move(content)) {
    server_.Get("/file", [this](const httplib::Request& request, httplib::Response& response) {
      // Answered here: httplib would slice the body a second time.
      const_cast<httplib::Request&>(request).ranges.clear();
      std::string range = request.get_header_value("Range");
      uint64_t first = 0, last = 0;
      std::string body = content_;
      if (std::sscanf(range.c_str(), "bytes=%" SCNu64 "-%" SCNu64, &first, &last) == 2 &&
          first <= last && last < content_.size()) {
        body = content_.substr(first, last - first + 1);
        response.status = 206;
        response.set_header("Content-Range", "bytes " + std::to_string(first) + "-" +
                                                 std::to_string(last) + "/" +
                                                 std::to_string(content_.size()));
      }
      {
        std::lock_guard lock(mutex_);
        ranges_.push_back(range);
        sent_ += body.size();
      }
      if (uint64_t cut = cut_after.exchange(0); cut > 0) return send_cut(response, body, cut);
      response.set_content(body, "application/octet-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~RangeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The Range header of each request ("" without one), sorted.
  std::vector<std::string> ranges() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> sorted = ranges_;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  uint64_t sent() const {
    std::lock_guard lock(mutex_);
    return sent_;
  }
  // When set, the next answer sends this many bytes of its body in odd-sized writes, then
  // breaks the connection.
  std::atomic<uint64_t> cut_after{0};

 private:
  static void send_cut(httplib::Response& response, std::string body, uint64_t cut) {
    uint64_t length = body.size();
    response.set_content_provider(
        length, "application/octet-stream",
        [body = std::move(body), cut](size_t offset, size_t, httplib::DataSink& sink) {
          if (offset >= cut) return false;
          size_t size = std::min<size_t>(999, static_cast<size_t>(cut - offset));
          return sink.write(body.data() + offset, size);
        });
  }

  std::string content_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> ranges_;
  uint64_t sent_ = 0;
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

// What an interrupted download left in the destination: `bytes` written at `offset`.
struct Prefill {
  uint64_t offset = 0;
  std::string bytes;
};

struct Resume {
  std::vector<Prefill> prefill;
  std::vector<ByteRange> on_disk;
  std::function<void(int fd, const std::vector<ByteRange>&)> on_progress;
  uint64_t part_size = 64 << 10;
};

Downloaded download(const std::string& url, uint64_t size, const std::string& sha256,
                    const Resume& resume = {}) {
  HttpOptions http_options;
  http_options.endpoint = url;
  HttpEngine http(http_options);
  std::FILE* file = std::tmpfile();
  int fd = fileno(file);
  for (const Prefill& p : resume.prefill) {
    EXPECT_EQ(pwrite(fd, p.bytes.data(), p.bytes.size(), static_cast<off_t>(p.offset)),
              static_cast<ssize_t>(p.bytes.size()));
  }
  std::vector<RangedFile> files;
  files.push_back({"file",
                   fd,
                   size,
                   {HashAlgorithm::Sha256, "", sha256},
                   std::make_unique<PlainSource>(url),
                   resume.on_disk});
  if (resume.on_progress) {
    files.back().on_progress = [&](const std::vector<ByteRange>& spans) {
      resume.on_progress(fd, spans);
    };
  }
  RangedOptions options;
  options.part_size = resume.part_size;
  options.retry = {3, std::chrono::milliseconds(1), std::chrono::milliseconds(5)};
  Downloaded done{download_ranged(http, files, options)[0], std::string(size, '\0')};
  if (pread(fd, done.content.data(), size, 0) != static_cast<ssize_t>(size)) {
    done.content.clear();
  }
  std::fclose(file);
  return done;
}

std::string range_header(uint64_t first, uint64_t last) {
  return "bytes=" + std::to_string(first) + "-" + std::to_string(last);
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

// 300 KiB in 64 KiB parts; an interrupted run wrote [0, 100 KiB) (part 0 and the start of part 1)
// and [192 KiB, 200 KiB) (the start of part 3): only the rest is asked for, and the verified file
// counts the 108 KiB as resumed.
TEST(RangedDownloadTest, AResumedMultiPartFileAsksOnlyForWhatIsNotOnDisk) {
  constexpr uint64_t kKiB = 1024;
  std::string content = random_bytes(300 * kKiB + 17, 3);
  RangeServer server(content);
  Resume resume;
  resume.prefill = {{0, content.substr(0, 100 * kKiB)},
                    {192 * kKiB, content.substr(192 * kKiB, 8 * kKiB)}};
  resume.on_disk = {{0, 100 * kKiB - 1}, {192 * kKiB, 200 * kKiB - 1}};
  Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(done.result.ok) << done.result.error;
  EXPECT_TRUE(done.content == content);
  std::vector<std::string> expected{
      range_header(100 * kKiB, 128 * kKiB - 1), range_header(128 * kKiB, 192 * kKiB - 1),
      range_header(200 * kKiB, 256 * kKiB - 1), range_header(256 * kKiB, content.size() - 1)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(server.ranges(), expected)
      << "part 0 is on disk; parts 1 and 3 start after their spans";
  EXPECT_EQ(server.sent(), content.size() - 108 * kKiB);
  EXPECT_EQ(done.result.bytes, content.size() - 108 * kKiB);
  EXPECT_EQ(done.result.bytes_resumed, 108 * kKiB);
}

// A file of one part resumes too: its hash takes the prefix back from disk.
TEST(RangedDownloadTest, AResumedSinglePartFileAsksForTheRestOnly) {
  std::string content = random_bytes(50 << 10, 4);
  RangeServer server(content);
  Resume resume;
  resume.prefill = {{0, content.substr(0, 20000)}};
  resume.on_disk = {{0, 19999}};
  Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(done.result.ok) << done.result.error;
  EXPECT_TRUE(done.content == content);
  EXPECT_EQ(server.ranges(), std::vector<std::string>{range_header(20000, content.size() - 1)});
  EXPECT_EQ(server.sent(), content.size() - 20000);
  EXPECT_EQ(done.result.bytes_resumed, 20000u);
}

// Bytes are written in whole pages, a page's first bytes held until its end arrives: an answer
// cut mid-page resumes from the last byte received (the held ones are written, not asked again).
TEST(RangedDownloadTest, AnAnswerCutMidPageResumesFromTheLastByteReceived) {
  for (uint64_t size : {uint64_t{(1 << 20) + 123}, uint64_t{(5 << 20) + 7}}) {
    std::string content = random_bytes(size, 12);
    RangeServer server(content);
    server.cut_after = 300001;
    Resume resume;
    resume.part_size = 64 << 20;
    Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
    ASSERT_TRUE(done.result.ok) << done.result.error;
    EXPECT_TRUE(done.content == content) << size;
    EXPECT_EQ(server.ranges(),
              (std::vector<std::string>{"", range_header(300001, content.size() - 1)}))
        << size;
  }
}

// Files of 4 MiB and more are hashed on the HashWorker: whole, in parts, resumed from a prefix or
// a span that lies, and mismatching, they give what the small files hashed inline give.
TEST(RangedDownloadTest, LargeFilesHashedOffTheTransferThreadAreVerifiedAlike) {
  std::string content = random_bytes((13 << 20) + 5, 11);
  const std::string digest = sha256_hex(content);
  RangeServer server(content);
  for (uint64_t part_size : {64ull << 20, 3ull << 20}) {
    Resume resume;
    resume.part_size = part_size;
    Downloaded done = download(server.url(), content.size(), digest, resume);
    ASSERT_TRUE(done.result.ok) << part_size << ": " << done.result.error;
    EXPECT_TRUE(done.content == content) << part_size;
  }

  Resume prefix;
  prefix.part_size = 64ull << 20;
  prefix.prefill = {{0, content.substr(0, 5 << 20)}};
  prefix.on_disk = {{0, (5u << 20) - 1}};
  Downloaded resumed = download(server.url(), content.size(), digest, prefix);
  ASSERT_TRUE(resumed.result.ok) << resumed.result.error;
  EXPECT_TRUE(resumed.content == content);
  EXPECT_EQ(resumed.result.bytes_resumed, 5u << 20);

  Resume lying = prefix;
  lying.prefill = {{0, std::string(5 << 20, 'x')}};
  Downloaded refetched = download(server.url(), content.size(), digest, lying);
  ASSERT_TRUE(refetched.result.ok) << refetched.result.error;
  EXPECT_TRUE(refetched.content == content);
  EXPECT_EQ(refetched.result.bytes_resumed, 0u);

  WholeBodyServer whole(content);
  Resume parts;
  parts.part_size = 4ull << 20;
  Downloaded corrupt = download(whole.url(), content.size(), std::string(64, '0'), parts);
  EXPECT_FALSE(corrupt.result.ok);
  EXPECT_EQ(corrupt.result.error, "corrupt: " + digest);
  EXPECT_EQ(whole.requests.load(), 4 + 2) << "four parts, then two whole-file refetches";
}

// A caller may hand a write-only descriptor for a file of one part (hub-transfer does): a large
// one is then hashed as it arrives, not read back.
TEST(RangedDownloadTest, AWriteOnlyDestinationOfOnePartIsHashedAsItArrives) {
  std::string content = random_bytes((6 << 20) + 3, 12);
  RangeServer server(content);
  char path[] = "/tmp/ranged-write-only-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  fd = ::open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  HttpOptions http_options;
  http_options.endpoint = server.url();
  HttpEngine http(http_options);
  std::vector<RangedFile> files;
  files.push_back({"file",
                   fd,
                   content.size(),
                   {HashAlgorithm::Sha256, "", sha256_hex(content)},
                   std::make_unique<PlainSource>(server.url())});
  RangedResult result = download_ranged(http, files, RangedOptions{})[0];
  close(fd);
  std::ifstream in(path, std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_TRUE(written == content);
}

// Spans that claim bytes the disk does not hold: the digest catches it, the whole file is fetched
// again as one stream, and nothing counts as resumed.
TEST(RangedDownloadTest, SpansThatLieEndInAWholeFileRefetch) {
  std::string content = random_bytes(200 << 10, 5);
  for (uint64_t part_size : {64ull << 10, 1ull << 20}) {
    RangeServer server(content);
    Resume resume;
    resume.part_size = part_size;
    resume.prefill = {{0, std::string(100 << 10, 'x')}};
    resume.on_disk = {{0, (100 << 10) - 1}};
    std::vector<std::vector<ByteRange>> told;
    resume.on_progress = [&](int, const std::vector<ByteRange>& spans) { told.push_back(spans); };
    Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
    ASSERT_TRUE(done.result.ok) << part_size << ": " << done.result.error;
    EXPECT_TRUE(done.content == content) << part_size;
    EXPECT_EQ(done.result.bytes_resumed, 0u) << part_size;
    std::vector<std::string> ranges = server.ranges();
    EXPECT_TRUE(std::find(ranges.begin(), ranges.end(), "") != ranges.end())
        << part_size << ": a whole-file refetch";
    ASSERT_FALSE(told.empty()) << part_size;
    EXPECT_TRUE(told.front().empty()) << part_size << ": the restart drops the claimed bytes first";
  }
}

// A server that ignores Range: resumed parts skip to their range, a resumed single-part file
// starts again from byte 0; both verify.
TEST(RangedDownloadTest, AResumeAnsweredWithTheWholeFileStillGivesAVerifiedFile) {
  std::string content = random_bytes((300 << 10) + 17, 6);
  WholeBodyServer server(content);
  Resume resume;
  resume.prefill = {{0, content.substr(0, 100 << 10)}};
  resume.on_disk = {{0, (100 << 10) - 1}};
  Downloaded parts = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(parts.result.ok) << parts.result.error;
  EXPECT_TRUE(parts.content == content);
  EXPECT_EQ(server.requests.load(), 4) << "parts 1 to 4; part 0 is on disk";
  EXPECT_EQ(parts.result.bytes_resumed, 100u << 10) << "kept, and confirmed by the digest";

  resume.part_size = 1 << 20;
  Downloaded whole = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(whole.result.ok) << whole.result.error;
  EXPECT_TRUE(whole.content == content);
  EXPECT_EQ(whole.result.bytes_resumed, 0u) << "written again from byte 0";
}

// Spans out of order, overlapping, empty or past the end are not what RangedFile asks for: all
// of them are ignored and the file is downloaded whole.
TEST(RangedDownloadTest, MalformedSpansAreIgnored) {
  std::string content = random_bytes(200 << 10, 7);
  RangeServer server(content);
  std::vector<std::vector<ByteRange>> malformed{
      {{0, 1000}, {500, 2000}},   // overlapping
      {{5000, 6000}, {0, 1000}},  // out of order
      {{10, 5}},                  // last before first
      {{0, content.size()}},      // past the end
  };
  for (const auto& spans : malformed) {
    Resume resume;
    resume.prefill = {{0, content.substr(0, 7000)}};
    resume.on_disk = spans;
    Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
    ASSERT_TRUE(done.result.ok) << done.result.error;
    EXPECT_TRUE(done.content == content);
    EXPECT_EQ(done.result.bytes_resumed, 0u);
    EXPECT_EQ(done.result.bytes, content.size());
  }
}

// Every byte on disk already: the digest decides without a request; wrong bytes are fetched.
TEST(RangedDownloadTest, AFileWhollyOnDiskIsVerifiedWithoutARequest) {
  std::string content = random_bytes(200 << 10, 8);
  RangeServer server(content);
  Resume resume;
  resume.prefill = {{0, content}};
  resume.on_disk = {{0, content.size() - 1}};
  Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(done.result.ok) << done.result.error;
  EXPECT_TRUE(server.ranges().empty());
  EXPECT_EQ(done.result.bytes_resumed, content.size());

  resume.prefill = {{0, std::string(content.size(), 'y')}};
  Downloaded wrong = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(wrong.result.ok) << wrong.result.error;
  EXPECT_TRUE(wrong.content == content);
  EXPECT_EQ(wrong.result.bytes_resumed, 0u);
  EXPECT_EQ(wrong.result.bytes, content.size());
}

// What a journal is told: spans that are on disk when told (read back at that moment), sorted
// and disjoint, no more often than every kProgressStep of new bytes.
TEST(RangedDownloadTest, ProgressNamesOnlyBytesOnDiskEveryStep) {
  std::string content = random_bytes(40 << 20, 9);
  RangeServer server(content);
  Resume resume;
  resume.part_size = 8 << 20;
  resume.prefill = {{0, content.substr(0, 3 << 20)}};
  resume.on_disk = {{0, (3 << 20) - 1}};
  size_t calls = 0;
  bool faithful = true;
  uint64_t last_total = 0;
  resume.on_progress = [&](int fd, const std::vector<ByteRange>& spans) {
    ++calls;
    uint64_t next = 0, total = 0;
    for (const ByteRange& span : spans) {
      faithful = faithful && span.first >= next && span.last >= span.first;
      next = span.last + 1;
      total += span.last + 1 - span.first;
      std::string bytes(span.last + 1 - span.first, '\0');
      faithful = faithful &&
                 pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(span.first)) ==
                     static_cast<ssize_t>(bytes.size()) &&
                 bytes == content.substr(span.first, bytes.size());
    }
    EXPECT_GE(total, last_total + kProgressStep) << "told after each step of progress";
    last_total = total;
  };
  Downloaded done = download(server.url(), content.size(), sha256_hex(content), resume);
  ASSERT_TRUE(done.result.ok) << done.result.error;
  EXPECT_TRUE(faithful) << "a span told holds the file's bytes";
  EXPECT_GE(calls, 2u);
  EXPECT_LE(calls, (40u << 20) / kProgressStep);
  EXPECT_EQ(done.result.bytes_resumed, 3u << 20);
}

}  // namespace
}  // namespace neuron_cache::net
