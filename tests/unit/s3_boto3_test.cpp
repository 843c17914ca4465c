// boto3 against s3rver, then against S3Store both ways, in libneuronxla's layout, byte for byte
// (tests/s3/boto3_crosscheck.py is the boto3 side).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_server.h"

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
  EXPECT_EQ(result.lfs_uploaded, 4u);
  testing::write_file(dir / "expect.json", expect.dump());
  boto3(server, "read-tree " + server.bucket() + " shared/cache " + (dir / "expect.json").string());
}

}  // namespace
}  // namespace neuron_cache::storage
