// boto3 against s3rver, then against S3Store both ways, in libneuronxla's layout, byte for byte
// (tests/s3/boto3_crosscheck.py is the boto3 side).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_server.h"

extern char** environ;

namespace neuron_cache::storage {
namespace {

using testing::S3Server;
using testing::TempDir;
namespace fs = std::filesystem;

// Runs the boto3 script with the server's AWS_* variables in the environment (never on the
// command line); fails the test with its output when it fails.
void boto3(const S3Server& server, const std::string& arguments) {
  for (const auto& [name, value] : server.env()) setenv(name.c_str(), value.c_str(), 1);
  std::string output;
  std::string command = std::string(NEURON_CACHE_PYTHON) + " " + NEURON_CACHE_TESTS_DIR +
                        "/s3/boto3_crosscheck.py " + arguments;
  int code = testing::run_command(command, &output);
  for (const auto& [name, value] : server.env()) unsetenv(name.c_str());
  ASSERT_EQ(code, 0) << command << "\n" << output;
}

TEST(S3Boto3, ServerSanity) {
  if (testing::s3rver_script().empty()) GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset";
  S3Server server;
  boto3(server, "sanity " + server.bucket());
}

TEST(S3Boto3, StoreReadsWhatBoto3Wrote) {
  if (testing::s3rver_script().empty()) GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset";
  S3Server server;
  TempDir dir;
  fs::path expect_file = dir / "expect.json";
  // A 100 MiB NEFF: boto3's default TransferConfig sends it in multipart (8 MiB parts).
  boto3(server, "write-tree " + server.bucket() + " team/cache " + expect_file.string() + " 100");
  ASSERT_FALSE(HasFailure());
  auto expect = nlohmann::json::parse(testing::read_file(expect_file));
  S3Store store(server.url("team/cache"), server.access());
  auto entries = store.list("", true, "");
  ASSERT_EQ(entries.size(), expect.size());
  std::vector<DownloadRequest> requests;
  std::vector<int> fds;
  for (size_t i = 0; i < entries.size(); ++i) {
    ASSERT_TRUE(expect.contains(entries[i].path)) << entries[i].path;
    fs::path local = dir / ("f" + std::to_string(i));
    fds.push_back(::open(local.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
    requests.push_back({entries[i].path, fds.back(), entries[i]});
  }
  auto results = store.download("", requests);
  for (size_t i = 0; i < entries.size(); ++i) {
    ::close(fds[i]);
    EXPECT_TRUE(results[i].ok) << entries[i].path << ": " << results[i].error;
    EXPECT_EQ(sha256_of_file(dir / ("f" + std::to_string(i))),
              expect[entries[i].path].get<std::string>())
        << entries[i].path;
  }
  // The non-recursive listing sees libneuronxla's folders.
  auto folders = store.list("neuronxcc-2.21.33363.0+82129205", false, "");
  ASSERT_EQ(folders.size(), 2u);
  EXPECT_TRUE(folders[0].is_directory);
}

TEST(S3Boto3, Boto3ReadsWhatStoreWrote) {
  if (testing::s3rver_script().empty()) GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset";
  S3Server server;
  TempDir dir;
  const std::string module = "neuronxcc-2.21.33363.0+82129205/MODULE_777+a1b2c3d4/";
  std::map<std::string, std::string> files = {
      {module + "model.done", ""},
      {module + "compile_flags.json", "[\"--target=trn1\"]"},
      {module + "model.hlo_module.pb", std::string(70000, 'h')},
  };
  nlohmann::json expect = nlohmann::json::object();
  std::vector<CommitOperation> ops;
  int n = 0;
  for (const auto& [path, content] : files) {
    fs::path local = dir / ("in" + std::to_string(n++));
    testing::write_file(local, content);
    expect[path] = sha256_hex(content);
    ops.push_back({CommitOperation::Kind::Add, path, local});
  }
  // A 100 MiB NEFF of random bytes: multipart (64 MiB parts) through S3Store.
  fs::path neff = dir / "model.neff";
  {
    std::string block(1 << 20, '\0');
    Hasher hasher(HashAlgorithm::Sha256);
    int fd = ::open(neff.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::mt19937_64 generator(9);
    for (int i = 0; i < 100; ++i) {
      for (size_t j = 0; j < block.size(); j += 8) {
        uint64_t v = generator();
        std::memcpy(&block[j], &v, 8);
      }
      ASSERT_EQ(::write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
      hasher.update(block);
    }
    ::close(fd);
    expect[module + "model.neff"] = hasher.hex_digest();
  }
  ops.push_back({CommitOperation::Kind::Add, module + "model.neff", neff});
  S3Store store(server.url("shared/cache"), server.access());
  CommitResult result = store.commit(ops, "", std::nullopt);
  EXPECT_EQ(result.large_sent, 4u);
  testing::write_file(dir / "expect.json", expect.dump());
  boto3(server, "read-tree " + server.bucket() + " shared/cache " + (dir / "expect.json").string());
}

// tests/s3/sigv4_proxy.py in front of s3rver: every request's SigV4 signature checked with
// botocore's signer, since s3rver checks none.
class SigV4Proxy {
 public:
  explicit SigV4Proxy(const S3Server& server) {
    fs::path ready = dir_ / "port";
    std::string script = std::string(NEURON_CACHE_TESTS_DIR) + "/s3/sigv4_proxy.py";
    std::vector<std::string> args = {NEURON_CACHE_PYTHON, script, std::to_string(server.port()),
                                     ready.string()};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start sigv4_proxy.py");
    }
    for (int i = 0; i < 1000 && !fs::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    port_ = std::stoi(testing::read_file(ready));
  }
  ~SigV4Proxy() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  config::AwsAccess access(const S3Server& server) const {
    config::AwsAccess access = server.access();
    access.endpoint = "http://127.0.0.1:" + std::to_string(port_);
    return access;
  }
  nlohmann::json report() const {
    httplib::Client client("127.0.0.1", port_);
    auto result = client.Get("/_sigv4");
    if (!result) throw std::runtime_error("sigv4 proxy did not answer");
    return nlohmann::json::parse(result->body);
  }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(S3Store, SignaturesVerifiedByBotocore) {
  if (testing::s3rver_script().empty()) GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset";
  S3Server server;
  SigV4Proxy proxy(server);
  TempDir dir;
  // Keys with characters SigV4 encodes (space, '+', '=', '&', '~', UTF-8) and more than one
  // listing page (continuation tokens carry '/', '+', '='), written straight to s3rver.
  const std::string odd = "neuronxcc-2.21.33363.0+82129205/MODULE_1+a b=c&d~e\xC3\xA9/model.neff";
  {
    S3Store direct(server.url("sig/cache"), server.access());
    testing::write_file(dir / "x", "x");
    std::vector<CommitOperation> ops;
    for (int i = 0; i < 1001; ++i) {
      ops.push_back({CommitOperation::Kind::Add, "many/" + std::to_string(i), dir / "x"});
    }
    direct.commit(ops, "", std::nullopt);
  }
  S3Options options;
  options.part_size = S3Options::kMinPartSize;
  S3Store store(server.url("sig/cache"), proxy.access(server), options);
  try {
    EXPECT_EQ(store.list("many", true, "").size(), 1001u);
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n" << proxy.report().dump(2);
  }
  EXPECT_EQ(store.list("", false, "").size(), 1u);
  // 12 MiB: initiate (?uploads=), parts (?partNumber&uploadId), complete (a signed XML body).
  std::string big(12u << 20, '\0');
  std::mt19937_64 generator(5);
  for (size_t i = 0; i + 8 <= big.size(); i += 8) {
    uint64_t v = generator();
    std::memcpy(&big[i], &v, 8);
  }
  testing::write_file(dir / "big", big);
  testing::write_file(dir / "small", "small");
  CommitResult result = store.commit({{CommitOperation::Kind::Add, odd, dir / "big"},
                                      {CommitOperation::Kind::Add, "a+b/c d.json", dir / "small"}},
                                     "", std::nullopt);
  EXPECT_EQ(result.large_sent, 2u);
  SmallFile index = store.read_versioned("index.json", "", 1000);
  EXPECT_FALSE(index.content);
  testing::write_file(dir / "index", "{}");
  EXPECT_EQ(
      store
          .commit({{CommitOperation::Kind::Add, "index.json", dir / "index", index.expected()}}, "",
                  std::nullopt)
          .small_files,
      1u);
  auto stated = store.stat({odd, "a+b/c d.json"}, "");
  ASSERT_EQ(stated.size(), 2u);
  int fd = ::open((dir / "back").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::vector<DownloadRequest> requests{{odd, fd, stated[0]}};
  auto results = store.download("", requests);
  ::close(fd);
  EXPECT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(testing::read_file(dir / "back"), big);
  store.commit({{CommitOperation::Kind::Delete, "a+b/c d.json", {}}}, "", std::nullopt);
  nlohmann::json report = proxy.report();
  EXPECT_TRUE(report["failed"].empty()) << report.dump(2);
  EXPECT_GE(report["checked"].get<int>(), 10);
  // And the check is real: a wrong secret is refused.
  config::AwsAccess wrong = proxy.access(server);
  wrong.secret_access_key = "not-the-secret";
  S3Options once;
  once.retry.max_attempts = 1;
  S3Store refused(server.url("sig/cache"), wrong, once);
  EXPECT_THROW(refused.list("", true, ""), Error);
  EXPECT_EQ(proxy.report()["failed"].size(), 1u);
}

}  // namespace
}  // namespace neuron_cache::storage
