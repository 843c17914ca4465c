// S3Store under faults, through s3-proxy (tests/s3_proxy) in front of s3rver: dropped
// connections, 500, 503 SlowDown, short and corrupted bodies during downloads and commits, and a
// conditional index write that loses the race (the proxy enforces If-None-Match / If-Match,
// which s3rver ignores) must throw CommitConflict.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <map>

#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/maintenance/gc.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "s3_server.h"

namespace neuron_cache::storage {
namespace {

using nlohmann::json;
using testing::S3Server;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

#define NEED_S3RVER()                                                                    \
  if (testing::s3rver_script().empty()) {                                                \
    GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset: run through ctest (s3_store), which " \
                    "installs s3rver";                                                   \
  }

constexpr const char* kModule = "neuronxcc-2.21.33363.0+82129205/MODULE_1+abcdef01";
constexpr const char* kIndex = "neuron-cache-index/neuronxcc-2.21.33363.0+82129205/org--m.json";

// s3-proxy in front of `upstream`, stopped with the test.
class S3Proxy {
 public:
  explicit S3Proxy(const std::string& upstream) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      execl(S3_PROXY, S3_PROXY, "--upstream", upstream.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    // "s3-proxy: http://127.0.0.1:PORT -> upstream"
    size_t colon = line.find("127.0.0.1:");
    if (colon == std::string::npos) throw std::runtime_error("s3-proxy printed: " + line);
    port_ = std::stoi(line.substr(colon + 10));
  }
  ~S3Proxy() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void faults(const json& rules) {
    auto answer = client().Post("/__proxy/faults", rules.dump(), "application/json");
    if (!answer || answer->status != 200) throw std::runtime_error("bad fault rules");
  }
  json stats() {
    auto answer = client().Get("/__proxy/stats");
    return json::parse(answer->body);
  }
  void clear_stats() { client().Delete("/__proxy/stats"); }
  // How many requests the current rules applied to.
  int faults_applied() {
    int applied = 0;
    for (const auto& rule : json::parse(client().Get("/__proxy/faults")->body)) {
      applied += rule["applied"].get<int>();
    }
    return applied;
  }
  // The (method, status, fault) of the logged requests whose path contains `part`.
  std::vector<std::tuple<std::string, int, std::string>> log_of(const std::string& part) {
    std::vector<std::tuple<std::string, int, std::string>> out;
    json all = stats();  // kept: a range-for over stats()["log"] would outlive the temporary
    for (const auto& entry : all["log"]) {
      if (entry["path"].get<std::string>().find(part) == std::string::npos) continue;
      out.emplace_back(entry["method"], entry["status"],
                       entry["fault"].is_null() ? "" : entry["fault"].get<std::string>());
    }
    return out;
  }

 private:
  httplib::Client client() const { return httplib::Client("127.0.0.1", port_); }
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::string bytes(size, '\0');
  for (auto& byte : bytes) byte = static_cast<char>(generator());
  return bytes;
}

class S3FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::s3rver_script().empty()) return;
    server_ = std::make_unique<S3Server>();
    proxy_ = std::make_unique<S3Proxy>(server_->endpoint());
  }
  // A store that talks to s3rver through the proxy, with short retry waits.
  std::unique_ptr<S3Store> store(uint64_t part_size = S3Options::kMinPartSize) {
    config::AwsAccess access = server_->access();
    access.endpoint = proxy_->url();
    S3Options options;
    options.retry = {4, std::chrono::milliseconds(10), std::chrono::milliseconds(50)};
    options.part_size = part_size;
    options.timeout = std::chrono::milliseconds(5000);
    return std::make_unique<S3Store>(server_->url("cache"), access, options);
  }
  // Commits `content` as MODULE/model.neff; returns its listed entry with its sha256.
  RemoteEntry put_neff(S3Store& s3, const std::string& content) {
    write_file(temp_ / "model.neff", content);
    s3.commit(
        {{CommitOperation::Kind::Add, std::string(kModule) + "/model.neff", temp_ / "model.neff"}},
        "", std::nullopt);
    auto listed = s3.stat({std::string(kModule) + "/model.neff"}, "");
    if (listed.size() != 1) throw std::runtime_error("not stored");
    RemoteEntry entry = listed[0];
    entry.content_sha256 = sha256_hex(content);
    return entry;
  }
  DownloadResult download(S3Store& s3, const RemoteEntry& entry, std::string* bytes) {
    fs::path out = temp_ / "downloaded";
    int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::vector<DownloadRequest> requests{{entry.path, fd, entry}};
    DownloadResult result = s3.download("", requests)[0];
    ::close(fd);
    *bytes = testing::read_file(out);
    return result;
  }

  TempDir temp_;
  std::unique_ptr<S3Server> server_;
  std::unique_ptr<S3Proxy> proxy_;
};

const json kNeffGet = {{"method", "GET"}, {"path", "model\\.neff$"}};

TEST_F(S3FaultTest, DownloadRecoversFromDrop500And503) {
  NEED_S3RVER();
  auto s3 = store();
  std::string content = random_bytes(3 << 20, 1);
  RemoteEntry entry = put_neff(*s3, content);
  for (const json& fault :
       {json{{"action", "drop"}}, json{{"action", "status"}, {"status", 500}},
        json{{"action", "status"}, {"status", 503}, {"headers", {{"Retry-After", "0"}}}}}) {
    json rule = fault;
    rule["match"] = kNeffGet;
    rule["apply_first"] = 2;
    proxy_->faults(rule);
    proxy_->clear_stats();
    std::string bytes;
    DownloadResult result = download(*s3, entry, &bytes);
    EXPECT_TRUE(result.ok) << fault << ": " << result.error;
    EXPECT_EQ(bytes, content) << fault;
    auto log = proxy_->log_of("model.neff");
    ASSERT_EQ(log.size(), 3u) << fault;  // two faults, then the answer
    EXPECT_EQ(std::get<2>(log[0]), fault["action"]);
    EXPECT_EQ(std::get<1>(log[2]), 200);
  }
}

TEST_F(S3FaultTest, DownloadThatKeepsFailingIsAValueWithoutSecrets) {
  NEED_S3RVER();
  auto s3 = store();
  RemoteEntry entry = put_neff(*s3, random_bytes(100000, 2));
  proxy_->faults({{"match", kNeffGet},
                  {"apply_first", -1},
                  {"action", "status"},
                  {"status", 503},
                  {"headers", {{"Retry-After", "0"}}}});
  proxy_->clear_stats();
  std::string bytes;
  DownloadResult result = download(*s3, entry, &bytes);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("503"), std::string::npos) << result.error;
  EXPECT_EQ(result.error.find(testing::kS3Secret), std::string::npos) << result.error;
  EXPECT_EQ(proxy_->log_of("model.neff").size(), 4u);  // the retry policy's 4 attempts
}

TEST_F(S3FaultTest, AShortBodyIsResumedAndVerified) {
  NEED_S3RVER();
  auto s3 = store(64ull << 20);  // one ranged GET for the whole file
  std::string content = random_bytes(4 << 20, 3);
  RemoteEntry entry = put_neff(*s3, content);
  proxy_->faults({{"match", kNeffGet}, {"action", "short"}, {"bytes", 1000000}});
  proxy_->clear_stats();
  std::string bytes;
  DownloadResult result = download(*s3, entry, &bytes);
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_EQ(bytes, content);
  auto log = proxy_->log_of("model.neff");
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(std::get<2>(log[0]), "short");
}

// A well-framed answer shorter than the listed object (Content-Length says 1 MB; a middlebox cut
// it) is resumed with a Range, as the Hub's are; an object that really is shorter is refused.
TEST_F(S3FaultTest, AWellFramedShortAnswerIsResumedLikeTheHubs) {
  NEED_S3RVER();
  for (uint64_t part_size : {64ull << 20, 1ull << 20}) {  // one GET for the file; ranged parts
    auto s3 = store(part_size);
    std::string content = random_bytes(3 << 20, 5);
    RemoteEntry entry = put_neff(*s3, content);
    proxy_->faults({{"match", kNeffGet}, {"action", "cut"}, {"bytes", 1000000}});
    proxy_->clear_stats();
    std::string bytes;
    DownloadResult result = download(*s3, entry, &bytes);
    EXPECT_TRUE(result.ok) << result.error;
    EXPECT_TRUE(bytes == content) << "other bytes than stored";
    auto log = proxy_->log_of("model.neff");
    ASSERT_GE(log.size(), 2u);
    EXPECT_EQ(std::get<2>(log[0]), "cut");
  }
  auto s3 = store(64ull << 20);
  std::string content = random_bytes(3 << 20, 6);
  RemoteEntry entry = put_neff(*s3, content);
  entry.size += 1000;  // an entry that lists more bytes than the object has
  proxy_->faults(json::array());
  std::string bytes;
  DownloadResult result = download(*s3, entry, &bytes);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(testing::contains(result.error, "bytes")) << result.error;
}

// s3rver does not check the x-amz-checksum-sha256 it is sent: a byte changed on the way (the
// proxy's corrupt_upload) is stored unless the writer checks the store's answer (its plain-MD5
// ETag). A whole PUT, a part of a multipart upload and an index file changed once are sent once
// more and stored intact; changed every time, the push fails and leaves no object behind.
TEST_F(S3FaultTest, BytesChangedOnTheWayToAServerThatChecksNothingAreSentAgain) {
  NEED_S3RVER();
  auto s3 = store();
  auto changed_once = [](json match) {
    return json{{"match", std::move(match)}, {"action", "corrupt_upload"}, {"offset", 777}};
  };
  std::string neff = random_bytes(2 << 20, 7);
  proxy_->faults(changed_once({{"method", "PUT"}, {"path", "model\\.neff$"}}));
  RemoteEntry entry = put_neff(*s3, neff);
  std::string bytes;
  EXPECT_TRUE(download(*s3, entry, &bytes).ok);
  EXPECT_TRUE(bytes == neff) << "the stored bytes differ from those sent";
  EXPECT_EQ(proxy_->faults_applied(), 1);

  auto large = store(S3Options::kMinPartSize);
  std::string big = random_bytes(11 << 20, 8);  // 3 parts
  proxy_->faults(changed_once({{"method", "PUT"}, {"query", "partNumber=2"}}));
  entry = put_neff(*large, big);
  EXPECT_TRUE(download(*large, entry, &bytes).ok);
  EXPECT_TRUE(bytes == big) << "the stored bytes differ from those sent";
  EXPECT_EQ(proxy_->faults_applied(), 1);

  std::string index = "{\"format\": 2, \"entries\": {}}";
  write_file(temp_ / "index.json", index);
  proxy_->faults(changed_once({{"method", "PUT"}, {"path", "org--m\\.json$"}}));
  s3->commit({{CommitOperation::Kind::Add, kIndex, temp_ / "index.json", Expected::absent()}}, "",
             std::nullopt);
  EXPECT_EQ(s3->read_versioned(kIndex, "", 1 << 20).content, index);
  EXPECT_EQ(proxy_->faults_applied(), 1);

  // Changed on every try.
  auto rule = changed_once({{"method", "PUT"}, {"path", "other\\.neff$"}});
  rule["apply_first"] = -1;
  proxy_->faults(rule);
  write_file(temp_ / "other.neff", random_bytes(1 << 20, 9));
  const std::string other = std::string(kModule) + "/other.neff";
  try {
    s3->commit({{CommitOperation::Kind::Add, other, temp_ / "other.neff"}}, "", std::nullopt);
    FAIL() << "bytes changed on every try must fail the push";
  } catch (const Error& error) {
    EXPECT_TRUE(testing::contains(error.what(), "twice")) << error.what();
    EXPECT_TRUE(testing::contains(error.what(), "checksum")) << error.what();
  }
  EXPECT_TRUE(s3->stat({other}, "").empty()) << "the object with the wrong bytes is removed";
}

TEST_F(S3FaultTest, ACorruptedBodyNeverPassesVerification) {
  NEED_S3RVER();
  auto s3 = store();
  std::string content = random_bytes(2 << 20, 4);
  RemoteEntry entry = put_neff(*s3, content);
  // Every answer corrupted: the download must fail, as a value.
  proxy_->faults(
      {{"match", kNeffGet}, {"apply_first", -1}, {"action", "corrupt"}, {"offset", 12345}});
  std::string bytes;
  DownloadResult result = download(*s3, entry, &bytes);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("sha256"), std::string::npos) << result.error;
  // Once: either retried to the right bytes or failed, never a wrong file reported good.
  proxy_->faults({{"match", kNeffGet}, {"action", "corrupt"}, {"offset", 0}});
  result = download(*s3, entry, &bytes);
  if (result.ok) {
    EXPECT_EQ(bytes, content);
  }
  std::cout << "one corrupted answer: " << (result.ok ? "retried, ok" : result.error) << "\n";
}

TEST_F(S3FaultTest, CommitRecoversFromDrop500And503OnUploads) {
  NEED_S3RVER();
  auto s3 = store();
  int round = 0;
  for (const json& fault :
       {json{{"action", "drop"}}, json{{"action", "status"}, {"status", 500}},
        json{{"action", "status"}, {"status", 503}, {"headers", {{"Retry-After", "0"}}}}}) {
    json rule = fault;
    rule["match"] = {{"method", "PUT"}, {"path", "model\\.neff$"}};
    proxy_->faults(rule);
    std::string content = random_bytes(200000, 10 + round++);
    RemoteEntry entry = put_neff(*s3, content);
    EXPECT_EQ(proxy_->faults_applied(), 1) << fault;
    std::string bytes;
    ASSERT_TRUE(download(*s3, entry, &bytes).ok) << fault;
    EXPECT_EQ(bytes, content) << fault;
  }
}

TEST_F(S3FaultTest, ACommitThatKeepsFailingThrowsAndWritesNoIndex) {
  NEED_S3RVER();
  auto s3 = store();
  SmallFile read = s3->read_versioned(kIndex, "", 1 << 20);
  EXPECT_EQ(read.content, std::nullopt);
  write_file(temp_ / "neff", "NEFF");
  write_file(temp_ / "index", "{}");
  proxy_->faults({{"match", {{"method", "PUT"}, {"path", "model\\.neff$"}}},
                  {"apply_first", -1},
                  {"action", "status"},
                  {"status", 500}});
  try {
    s3->commit({{CommitOperation::Kind::Add, std::string(kModule) + "/model.neff", temp_ / "neff"},
                {CommitOperation::Kind::Add, kIndex, temp_ / "index", read.expected()}},
               "", std::nullopt);
    FAIL() << "the commit succeeded through a store answering 500";
  } catch (const CommitConflict&) {
    FAIL() << "a failing store is not a conflict";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find(testing::kS3Secret), std::string::npos);
  }
  proxy_->faults(json::array());
  auto other = store();
  EXPECT_EQ(other->read_small(kIndex, "", 1 << 20), std::nullopt);  // artifacts first, then index
}

// PUTs run in parallel, but model.done (which libneuronxla reading the bucket takes for a whole
// entry) goes only after every other artifact is stored: a NEFF that cannot be stored leaves no
// mark, whatever order the commit lists them in.
TEST_F(S3FaultTest, AFailedNeffLeavesNoCompletionMark) {
  NEED_S3RVER();
  auto s3 = store();
  write_file(temp_ / "neff", random_bytes(3 << 20, 5));
  write_file(temp_ / "done", "");
  proxy_->faults({{"match", {{"method", "PUT"}, {"path", "model\\.neff$"}}},
                  {"apply_first", -1},
                  {"action", "status"},
                  {"status", 500}});
  EXPECT_THROW(
      s3->commit(
          {{CommitOperation::Kind::Add, std::string(kModule) + "/model.done", temp_ / "done"},
           {CommitOperation::Kind::Add, std::string(kModule) + "/model.neff", temp_ / "neff"}},
          "", std::nullopt),
      Error);
  proxy_->faults(json::array());
  EXPECT_TRUE(store()->stat({std::string(kModule) + "/model.done"}, "").empty());
}

// A pusher killed with kill -9 at random points (single PUTs and multipart NEFFs): no kill
// leaves model.done beside a missing or partial model.neff in the bucket.
TEST_F(S3FaultTest, AKillAtAnyPointNeverLeavesAMarkWithoutItsWholeNeff) {
  NEED_S3RVER();
  const std::string neff = random_bytes(12 << 20, 9);  // multipart: two 5 MiB parts and a tail
  write_file(temp_ / "neff", neff);
  write_file(temp_ / "done", "");
  std::mt19937 random(std::random_device{}());
  size_t marks = 0;
  for (int round = 0; round < 8; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        auto s3 = store();
        for (int i = 0;; ++i) {
          std::string module = "neuronxcc-2.21/MODULE_" + std::to_string(round) + "_" +
                               std::to_string(i) + "+abcdef01";
          s3->commit({{CommitOperation::Kind::Add, module + "/model.done", temp_ / "done"},
                      {CommitOperation::Kind::Add, module + "/model.neff", temp_ / "neff"}},
                     "", std::nullopt);
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "pusher: %s\n", e.what());
      }
      _exit(1);
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 900)(random)));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  auto s3 = store();
  std::map<std::string, RemoteEntry> listed;
  for (auto& entry : s3->list("neuronxcc-2.21", true, "")) listed[entry.path] = entry;
  for (const auto& [path, entry] : listed) {
    if (!path.ends_with("/model.done")) continue;
    ++marks;
    std::string neff_path = path.substr(0, path.size() - 4) + "neff";
    auto found = listed.find(neff_path);
    ASSERT_NE(found, listed.end()) << path << " without its NEFF";
    EXPECT_EQ(found->second.size, neff.size()) << neff_path;
    std::string bytes;
    RemoteEntry whole = found->second;
    whole.content_sha256 = sha256_hex(neff);
    EXPECT_TRUE(download(*s3, whole, &bytes).ok) << neff_path;
  }
  EXPECT_GT(marks, 0u) << "no push ever completed: the kills proved nothing";
}

// s3rver has no ListMultipartUploads (501), so no push's sweep finds what a pusher killed
// mid-upload left: its upload record does, and gc aborts the upload a day later and deletes the
// record, against the real server.
TEST_F(S3FaultTest, APusherKilledMidUploadLeavesARecordGcActsOn) {
  NEED_S3RVER();
  write_file(temp_ / "neff", random_bytes(12 << 20, 11));  // three parts
  proxy_->faults({{"match", {{"method", "PUT"}, {"query", "partNumber=2"}}}, {"action", "hang"}});
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      store()->commit(
          {{CommitOperation::Kind::Add, std::string(kModule) + "/model.neff", temp_ / "neff"}}, "",
          std::nullopt);
    } catch (const std::exception& e) {
      fprintf(stderr, "pusher: %s\n", e.what());
    }
    _exit(1);
  }
  S3Store direct(server_->url("cache"), server_->access());
  std::vector<RemoteEntry> records;
  for (int i = 0; i < 200 && records.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    records = direct.list(std::string(kUploadRecordDir), true, "");
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(records.size(), 1u) << "the pusher wrote no upload record";

  maintenance::GcOptions young;
  young.now = records[0].modified + 3600;
  EXPECT_TRUE(maintenance::plan_gc(direct, young).leftovers.empty()) << "a live upload is kept";
  maintenance::GcOptions later;
  later.now = records[0].modified + 2 * 86400;
  maintenance::GcPlan plan = maintenance::plan_gc(direct, later);
  ASSERT_EQ(plan.leftovers.size(), 1u);
  EXPECT_EQ(plan.leftovers[0].target, std::string(kModule) + "/model.neff");
  ASSERT_FALSE(plan.leftovers[0].upload_id.empty());
  // s3rver cannot abort an upload either (DELETE ?uploadId answers 405): gc says so, and deletes
  // the record all the same (no later gc could do more).
  maintenance::apply_gc(direct, plan, later,
                        {4, std::chrono::milliseconds(10), std::chrono::milliseconds(50)});
  EXPECT_EQ(plan.leftovers_removed, 0u);
  ASSERT_EQ(plan.problems.size(), 1u);
  EXPECT_NE(plan.problems[0].find("this server cannot abort uploads"), std::string::npos)
      << plan.problems[0];
  EXPECT_TRUE(direct.list(std::string(kUploadRecordDir), true, "").empty());
  EXPECT_TRUE(direct.stat({std::string(kModule) + "/model.neff"}, "").empty());
}

TEST_F(S3FaultTest, MultipartCommitWithDamagedAnswersNeverStoresWrongBytes) {
  NEED_S3RVER();
  auto s3 = store(S3Options::kMinPartSize);
  std::string content = random_bytes(12 << 20, 5);  // 3 parts
  write_file(temp_ / "big.neff", content);
  int round = 0;
  // A dropped part upload, a 503 on completion, then a short and a corrupted completion answer.
  for (const json& rule :
       {json{{"match", {{"method", "PUT"}, {"query", "partNumber=2"}}}, {"action", "drop"}},
        json{{"match", {{"method", "POST"}, {"query", "uploadId"}}},
             {"action", "status"},
             {"status", 503}},
        json{{"match", {{"method", "POST"}, {"query", "uploadId"}}}, {"action", "short"}},
        json{{"match", {{"method", "POST"}, {"query", "uploadId"}}},
             {"action", "corrupt"},
             {"offset", 60},
             {"length", 20}}}) {
    proxy_->faults(rule);
    // A new name each round: a file already stored is not sent again.
    const std::string path = std::string(kModule) + "/big" + std::to_string(round++) + ".neff";
    std::string outcome = "committed";
    try {
      s3->commit({{CommitOperation::Kind::Add, path, temp_ / "big.neff"}}, "", std::nullopt);
    } catch (const Error& e) {
      outcome = e.what();
      EXPECT_EQ(outcome.find(testing::kS3Secret), std::string::npos);
    }
    std::cout << rule["action"] << " " << rule["match"] << ": " << outcome << "\n";
    EXPECT_EQ(proxy_->faults_applied(), 1) << rule;
    // Whatever the client concluded, the store holds the right bytes or nothing.
    auto listed = s3->stat({path}, "");
    if (listed.empty()) continue;
    RemoteEntry entry = listed[0];
    entry.content_sha256 = sha256_hex(content);
    std::string bytes;
    EXPECT_TRUE(download(*s3, entry, &bytes).ok) << rule;
    EXPECT_EQ(bytes.size(), content.size()) << rule;
    EXPECT_TRUE(bytes == content) << rule;
  }
}

TEST_F(S3FaultTest, AConditionalIndexWriteThatLosesTheRaceThrowsCommitConflict) {
  NEED_S3RVER();
  auto first = store();
  auto second = store();
  write_file(temp_ / "a", "[\"a\"]");
  write_file(temp_ / "b", "[\"b\"]");
  write_file(temp_ / "ab", "[\"a\",\"b\"]");
  // Each writes on the version it read last.
  std::map<S3Store*, Expected> read;
  auto get = [&](S3Store& s3) {
    SmallFile file = s3.read_versioned(kIndex, "", 1 << 20);
    read[&s3] = file.expected();
    return file.content;
  };
  auto put = [&](S3Store& s3, const char* local) {
    s3.commit({{CommitOperation::Kind::Add, kIndex, temp_ / local, read[&s3]}}, "", std::nullopt);
  };
  // Both read "no index"; the first creates it, the second's If-None-Match: * gets 412.
  EXPECT_EQ(get(*first), std::nullopt);
  EXPECT_EQ(get(*second), std::nullopt);
  put(*first, "a");
  proxy_->clear_stats();
  EXPECT_THROW(put(*second, "b"), CommitConflict);
  auto log = proxy_->log_of("org--m.json");
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back(), std::make_tuple(std::string("PUT"), 412, std::string()));
  // Both read version a; the first replaces it, the second's If-Match on a gets 412.
  EXPECT_EQ(get(*first), "[\"a\"]");
  EXPECT_EQ(get(*second), "[\"a\"]");
  put(*first, "ab");
  proxy_->clear_stats();
  EXPECT_THROW(put(*second, "b"), CommitConflict);
  log = proxy_->log_of("org--m.json");
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back(), std::make_tuple(std::string("PUT"), 412, std::string()));
  EXPECT_EQ(second->read_small(kIndex, "", 1 << 20), "[\"a\",\"b\"]");  // nothing was lost
}

// An injected error is a whole S3 error answer, whatever Range the request asked for: a 500 or
// 503 on one ranged part of a download is retried, and the file ends verified.
TEST_F(S3FaultTest, ARangedPartMeeting500Or503IsRetriedAndVerified) {
  NEED_S3RVER();
  auto s3 = store(S3Options::kMinPartSize);
  std::string content = random_bytes(12 << 20, 6);  // 3 ranged parts
  RemoteEntry entry = put_neff(*s3, content);
  for (int status : {500, 503}) {
    proxy_->faults({{"match", kNeffGet}, {"skip", 1}, {"action", "status"}, {"status", status}});
    // What a ranged request gets: the whole error, not a 416 nor a slice of the XML.
    httplib::Client client("127.0.0.1", std::stoi(proxy_->url().substr(17)));
    auto answer = client.Get("/" + server_->bucket() + "/cache/" + kModule + "/model.neff",
                             {{"Range", "bytes=5242880-10485759"}});
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 206) << "the first request passes (skip 1)";
    answer = client.Get("/" + server_->bucket() + "/cache/" + kModule + "/model.neff",
                        {{"Range", "bytes=5242880-10485759"}});
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, status);
    EXPECT_NE(answer->body.find("</Error>"), std::string::npos) << answer->body;
    // A part of the download meets it.
    proxy_->faults({{"match", kNeffGet}, {"skip", 1}, {"action", "status"}, {"status", status}});
    proxy_->clear_stats();
    std::string bytes;
    DownloadResult result = download(*s3, entry, &bytes);
    EXPECT_TRUE(result.ok) << status << ": " << result.error;
    EXPECT_TRUE(bytes == content) << status;
    EXPECT_EQ(proxy_->faults_applied(), 1) << status;
    EXPECT_EQ(proxy_->log_of("model.neff").size(), 4u) << status;  // 3 parts, one retried
  }
}

// A CompleteMultipartUpload that landed but whose answer was lost (the connection closed after
// the proxy forwarded it) or garbled: the object is recognised by its multipart ETag, the push
// succeeds and says so, and the stored bytes are right.
TEST_F(S3FaultTest, AMultipartCompletionThatLandedWithoutAnswerIsStored) {
  NEED_S3RVER();
  auto s3 = store(S3Options::kMinPartSize);
  std::string content = random_bytes(12 << 20, 7);  // 3 parts
  write_file(temp_ / "big.neff", content);
  int round = 0;
  for (const json& fault :
       {json{{"action", "lose"}}, json{{"action", "corrupt"}, {"offset", 0}, {"length", 400}}}) {
    json rule = fault;
    rule["match"] = {{"method", "POST"}, {"query", "uploadId"}};
    proxy_->faults(rule);
    proxy_->clear_stats();
    const std::string path = std::string(kModule) + "/landed" + std::to_string(round++) + ".neff";
    CommitResult result =
        s3->commit({{CommitOperation::Kind::Add, path, temp_ / "big.neff"}}, "", std::nullopt);
    EXPECT_EQ(result.large_sent, 1u) << fault;
    EXPECT_NE(result.landed_unanswered.find("it is stored"), std::string::npos) << fault;
    EXPECT_EQ(proxy_->faults_applied(), 1) << fault;
    auto listed = s3->stat({path}, "");
    ASSERT_EQ(listed.size(), 1u) << fault;
    RemoteEntry entry = listed[0];
    entry.content_sha256 = sha256_hex(content);
    std::string bytes;
    EXPECT_TRUE(download(*s3, entry, &bytes).ok) << fault;
    EXPECT_TRUE(bytes == content) << fault;
  }
}

// A completion that never reached the store is not taken as landed, even when the key already
// holds another version of the file: the commit fails with the store's words (never the Hub's),
// the upload is aborted, and the old bytes stay.
TEST_F(S3FaultTest, AMultipartCompletionThatDidNotLandIsAFailure) {
  NEED_S3RVER();
  auto s3 = store(S3Options::kMinPartSize);
  const std::string path = std::string(kModule) + "/model.neff";
  std::string old_content = random_bytes(12 << 20, 8);
  RemoteEntry old_entry = put_neff(*s3, old_content);
  write_file(temp_ / "new.neff", random_bytes(12 << 20, 9));
  proxy_->faults({{"match", {{"method", "POST"}, {"query", "uploadId"}}},
                  {"apply_first", -1},
                  {"action", "drop"}});
  proxy_->clear_stats();
  try {
    s3->commit({{CommitOperation::Kind::Add, path, temp_ / "new.neff"}}, "", std::nullopt);
    FAIL() << "a completion that never reached the store was taken as landed";
  } catch (const CommitConflict&) {
    FAIL() << "a lost completion is not a conflict";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("completing the upload of " + path), std::string::npos) << message;
    EXPECT_NE(message.find("s3://"), std::string::npos) << message;
    EXPECT_EQ(message.find("repo "), std::string::npos) << message;
    EXPECT_EQ(message.find("does not exist"), std::string::npos) << message;
  }
  // The upload was aborted (s3rver answers AbortMultipartUpload with 405: it was asked).
  bool aborted = false;
  for (const auto& [method, status, fault] : proxy_->log_of("model.neff")) {
    aborted = aborted || method == "DELETE";
  }
  EXPECT_TRUE(aborted) << proxy_->stats().dump();
  proxy_->faults(json::array());
  std::string bytes;
  EXPECT_TRUE(download(*s3, old_entry, &bytes).ok);
  EXPECT_TRUE(bytes == old_content);
}

}  // namespace
}  // namespace neuron_cache::storage
