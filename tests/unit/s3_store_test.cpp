// S3Store against s3rver: paging, a 1 GiB multipart round trip, read_versioned with conditional
// commits, verification failures as values, and no secret in any message.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "aws_stand_in.h"
#include "neuron_cache/config/aws.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_server.h"

namespace neuron_cache::storage {
namespace {

using testing::S3Server;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

#define NEED_S3RVER()                                                                    \
  if (testing::s3rver_script().empty()) {                                                \
    GTEST_SKIP() << "NEURON_CACHE_S3RVER is unset: run through ctest (s3_store), which " \
                    "installs s3rver";                                                   \
  }

// Writes `size` random bytes (seeded) to `path` in 1 MiB blocks; returns their sha256.
std::string write_random(const fs::path& path, uint64_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::ofstream out(path, std::ios::binary);
  Hasher hasher(HashAlgorithm::Sha256);
  std::string block(1 << 20, '\0');
  for (uint64_t done = 0; done < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), size - done));
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint64_t v = generator();
      std::memcpy(&block[i], &v, 8);
    }
    out.write(block.data(), static_cast<std::streamsize>(n));
    hasher.update(std::string_view(block.data(), n));
    done += n;
  }
  return hasher.hex_digest();
}

struct Fd {
  explicit Fd(const fs::path& path) : fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644)) {}
  ~Fd() { ::close(fd); }
  int fd;
};

CommitOperation add(const std::string& path, const fs::path& local) {
  return {CommitOperation::Kind::Add, path, local};
}

TEST(S3Store, ListsEveryPage) {
  NEED_S3RVER();
  S3Server server;
  S3Store store(server.url("cache"), server.access());
  TempDir dir;
  write_file(dir / "small", "x");
  std::vector<CommitOperation> ops;
  // 2,500 objects in 5 folders: ListObjectsV2 answers 1,000 keys a page.
  for (int i = 0; i < 2500; ++i) {
    ops.push_back(add("neuronxcc-2.21.33363.0+82129205/MODULE_" + std::to_string(i % 5) + "/f" +
                          std::to_string(i),
                      dir / "small"));
  }
  CommitResult result = store.commit(ops, "", std::nullopt);
  EXPECT_EQ(result.large_sent, 2500u);
  uint64_t before = store.requests();
  auto entries = store.list("", true, "");
  EXPECT_EQ(entries.size(), 2500u);
  EXPECT_GE(store.requests() - before, 3u);
  std::set<std::string> paths;
  for (const auto& e : entries) {
    paths.insert(e.path);
    EXPECT_EQ(e.size, 1u);
    EXPECT_EQ(e.oid, md5_hex("x"));
  }
  EXPECT_EQ(paths.size(), 2500u);
  EXPECT_TRUE(paths.count("neuronxcc-2.21.33363.0+82129205/MODULE_3/f1003"));
  auto top = store.list("neuronxcc-2.21.33363.0+82129205", false, "");
  ASSERT_EQ(top.size(), 5u);
  for (const auto& e : top) EXPECT_TRUE(e.is_directory) << e.path;
  EXPECT_EQ(top[0].path, "neuronxcc-2.21.33363.0+82129205/MODULE_0");
  EXPECT_TRUE(store.list("nothing-here", true, "").empty());
  // Committing the same files again sends nothing.
  CommitResult again = store.commit(ops, "", std::nullopt);
  EXPECT_EQ(again.large_sent, 0u);
  EXPECT_EQ(again.large_already_stored, 2500u);
  EXPECT_FALSE(again.committed);
}

TEST(S3Store, GigabyteMultipartRoundTrip) {
  NEED_S3RVER();
  S3Server server;
  S3Store store(server.url("big"), server.access());
  TempDir dir;
  const uint64_t size = 1ull << 30;
  std::string sha = write_random(dir / "model.neff", size, 42);
  std::string path = "neuronxcc-2.21.33363.0+82129205/MODULE_abc/model.neff";
  uint64_t before = store.requests();
  CommitResult result = store.commit({add(path, dir / "model.neff")}, "", std::nullopt);
  EXPECT_EQ(result.large_sent, 1u);
  EXPECT_EQ(result.bytes_sent, size);
  // HEAD, initiate, 16 parts of 64 MiB, complete.
  EXPECT_GE(store.requests() - before, 19u);
  auto listed = store.list("neuronxcc-2.21.33363.0+82129205", true, "");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].size, size);
  // s3rver gives a multipart object the MD5 of its content as ETag (S3 gives "<md5>-16").
  EXPECT_FALSE(listed[0].oid.empty());
  auto stated = store.stat({path, "missing/file"}, "");
  ASSERT_EQ(stated.size(), 1u);
  EXPECT_EQ(stated[0].content_sha256, sha);  // x-amz-meta-sha256
  fs::remove(dir / "model.neff");

  Fd out(dir / "back.neff");
  std::vector<DownloadRequest> requests{{path, out.fd, stated[0]}};
  before = store.requests();
  auto results = store.download("", requests);
  ASSERT_TRUE(results[0].ok) << results[0].error;
  EXPECT_GE(store.requests() - before, 16u);  // ranged parts
  EXPECT_EQ(fs::file_size(dir / "back.neff"), size);
  EXPECT_EQ(sha256_of_file(dir / "back.neff"), sha);
}

// A destination an interrupted download left half-written: only the rest is asked for, the
// bytes on disk are kept (not truncated away) and verified with the rest.
TEST(S3Store, AResumedDownloadFetchesOnlyTheRest) {
  NEED_S3RVER();
  S3Server server;
  S3Options options;
  options.part_size = S3Options::kMinPartSize;
  S3Store store(server.url("resume"), server.access(), options);
  TempDir dir;
  const uint64_t size = (12ull << 20) + 123;  // three parts of 5 MiB
  const uint64_t on_disk = 7ull << 20;        // part 0 and the start of part 1
  std::string sha = write_random(dir / "model.neff", size, 7);
  std::string path = "neuronxcc-2.21.33363.0+82129205/MODULE_abc/model.neff";
  store.commit({add(path, dir / "model.neff")}, "", std::nullopt);
  auto stated = store.stat({path}, "");
  ASSERT_EQ(stated.size(), 1u);

  fs::copy_file(dir / "model.neff", dir / "back.neff");
  fs::resize_file(dir / "back.neff", on_disk);
  int fd = ::open((dir / "back.neff").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<DownloadRequest> requests{{path, fd, stated[0], {{0, on_disk - 1}}}};
  auto results = store.download("", requests);
  ::close(fd);
  ASSERT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(results[0].bytes, size - on_disk);
  EXPECT_EQ(results[0].bytes_resumed, on_disk);
  EXPECT_EQ(sha256_of_file(dir / "back.neff"), sha);
}

TEST(S3Store, ReadSmallThenConditionalCommit) {
  NEED_S3RVER();
  S3Server server;
  S3Store store(server.url("idx"), server.access());
  TempDir dir;
  std::string index = "neuron-cache-index/neuronxcc-2.21.33363.0+82129205/acme--m.json";
  SmallFile absent = store.read_versioned(index, "", 1 << 20);
  EXPECT_FALSE(absent.content.has_value());
  write_file(dir / "v1", "{\"format\":2}");
  write_file(dir / "neff", "NEFF");
  CommitResult first =
      store.commit({add("n/MODULE_1/model.neff", dir / "neff"),
                    {CommitOperation::Kind::Add, index, dir / "v1", absent.expected()}},
                   "", std::nullopt);
  EXPECT_TRUE(first.committed);
  EXPECT_EQ(first.large_sent, 1u);   // the artifact
  EXPECT_EQ(first.small_files, 1u);  // the index, conditional
  S3Store other(server.url("idx"), server.access());
  SmallFile read = other.read_versioned(index, "", 1 << 20);
  ASSERT_TRUE(read.content.has_value());
  EXPECT_EQ(*read.content, "{\"format\":2}");
  write_file(dir / "v2", "{\"format\":2,\"entries\":{}}");
  CommitResult second = other.commit(
      {{CommitOperation::Kind::Add, index, dir / "v2", read.expected()}}, "", std::nullopt);
  EXPECT_EQ(second.small_files, 1u);
  EXPECT_EQ(*store.read_small(index, "", 1 << 20), "{\"format\":2,\"entries\":{}}");
  EXPECT_THROW(store.read_small(index, "", 4), Error);  // larger than allowed
  auto listed = store.list("n", true, "");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(store.content_matches(listed[0], "NEFF"));
  EXPECT_FALSE(store.content_matches(listed[0], "NEFX"));
  // Delete ops.
  CommitResult removed = store.commit(
      {{CommitOperation::Kind::Delete, "n/MODULE_1/model.neff", {}}}, "", std::nullopt);
  EXPECT_EQ(removed.deleted, 1u);
  EXPECT_TRUE(store.list("n", true, "").empty());
}

TEST(S3Store, WrongExpectationsFailAsValues) {
  NEED_S3RVER();
  S3Server server;
  S3Options options;
  options.part_size = S3Options::kMinPartSize;  // several parts for a 12 MiB file
  options.retry.base = std::chrono::milliseconds(10);
  S3Store store(server.url("v"), server.access(), options);
  TempDir dir;
  std::string sha = write_random(dir / "f", 12u << 20, 7);
  write_file(dir / "s", "small file");
  store.commit({add("a/f", dir / "f"), add("a/s", dir / "s")}, "", std::nullopt);
  auto listed = store.list("a", true, "");
  ASSERT_EQ(listed.size(), 2u);
  RemoteEntry big = listed[0].path == "a/f" ? listed[0] : listed[1];
  RemoteEntry small = listed[0].path == "a/f" ? listed[1] : listed[0];

  RemoteEntry wrong_sha = big;
  wrong_sha.content_sha256 = std::string(64, '0');
  RemoteEntry wrong_size = small;
  wrong_size.size += 1;
  RemoteEntry wrong_md5 = small;
  wrong_md5.oid = md5_hex("other");
  RemoteEntry right = big;
  right.content_sha256 = sha;
  RemoteEntry missing = small;
  missing.path = "a/none";
  Fd f1(dir / "o1"), f2(dir / "o2"), f3(dir / "o3"), f4(dir / "o4"), f5(dir / "o5");
  std::vector<DownloadRequest> requests{{"a/f", f1.fd, wrong_sha},
                                        {"a/s", f2.fd, wrong_size},
                                        {"a/s", f3.fd, wrong_md5},
                                        {"a/f", f4.fd, right},
                                        {"a/none", f5.fd, missing}};
  auto results = store.download("", requests);
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].error.find("sha256"), std::string::npos) << results[0].error;
  EXPECT_FALSE(results[1].ok);
  EXPECT_NE(results[1].error.find("bytes"), std::string::npos) << results[1].error;
  EXPECT_FALSE(results[2].ok);  // the ETag differs: changed since listed
  EXPECT_TRUE(results[3].ok) << results[3].error;
  EXPECT_EQ(sha256_of_file(dir / "o4"), sha);
  EXPECT_FALSE(results[4].ok);
  EXPECT_NE(results[4].error.find("no longer"), std::string::npos) << results[4].error;
}

// The debug log names every S3 request (method, URL, status, bytes, time) and none of the
// credentials: they travel in headers, which are never logged.
TEST(S3Store, DebugLogNamesEveryRequestAndNoCredential) {
  NEED_S3RVER();
  const std::string secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYLOGSECRET";
  const std::string token = "FwoGZXIvYXdzEXAMPLELOGSESSIONTOKEN";
  S3Server server;
  config::AwsAccess access = server.access();
  access.secret_access_key = secret;
  access.session_token = token;
  S3Store store(server.url("logged"), access);
  TempDir dir;
  write_file(dir / "f", "content of f");
  ::testing::internal::CaptureStderr();
  log::enable(true);
  uint64_t before = store.requests();
  store.commit({add("a/f", dir / "f")}, "", std::nullopt);
  store.list("a", true, "");
  Fd out(dir / "back");
  std::vector<DownloadRequest> requests{{"a/f", out.fd, store.stat({"a/f"}, "")[0]}};
  store.download("", requests);
  uint64_t sent = store.requests() - before;
  log::enable(false);
  std::string logged = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t at = logged.find(" http: "); at != std::string::npos;
       at = logged.find(" http: ", at + 1))
    ++lines;
  EXPECT_EQ(lines, sent) << logged;
  EXPECT_NE(logged.find(" http: PUT http://127.0.0.1:"), std::string::npos) << logged;
  EXPECT_NE(logged.find("/logged/a/f -> 200, 0 B down, 12 B up, "), std::string::npos) << logged;
  EXPECT_NE(logged.find("list-type=2"), std::string::npos) << logged;
  EXPECT_EQ(logged.find(secret), std::string::npos) << logged;
  EXPECT_EQ(logged.find(token), std::string::npos) << logged;
  EXPECT_EQ(logged.find(access.access_key_id), std::string::npos) << logged;
}

// Issue 23: temporary credentials that expire during a long transfer are fetched again, and the
// transfer goes on with them (the container endpoint hands out credentials that live 2 s).
TEST(S3Store, CredentialsAreRefreshedDuringALongTransfer) {
  NEED_S3RVER();
  S3Server server;
  nlohmann::json config = testing::AwsStandIn::example_config();
  config["container"]["expires_in_seconds"] = 2;
  config["container"]["credentials"]["AccessKeyId"] = testing::kS3Key;
  config["container"]["credentials"]["SecretAccessKey"] = testing::kS3Secret;
  testing::AwsStandIn aws(config);
  TempDir dir;
  std::map<std::string, std::string> env = aws.env_for("container", dir / "home");
  env["AWS_ENDPOINT_URL_S3"] = server.endpoint();
  config::AwsAccess access = config::resolve_aws_access(config::Environment(env));
  S3Options options;
  options.parallel = 2;
  options.part_size = 16ull << 20;
  S3Store store(server.url("refresh"), access, options);
  const uint64_t size = 384ull << 20;
  std::string sha = write_random(dir / "model.neff", size, 7);
  auto start = std::chrono::steady_clock::now();
  CommitResult result = store.commit({add("m/model.neff", dir / "model.neff")}, "", std::nullopt);
  Fd out(dir / "back.neff");
  auto stated = store.stat({"m/model.neff"}, "");
  ASSERT_EQ(stated.size(), 1u);
  std::vector<DownloadRequest> requests{{"m/model.neff", out.fd, stated[0]}};
  auto results = store.download("", requests);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(results[0].ok) << results[0].error;
  EXPECT_EQ(result.large_sent, 1u);
  EXPECT_EQ(sha256_of_file(dir / "back.neff"), sha);
  size_t fetches = 0;
  for (const auto& request : aws.log()) fetches += request["endpoint"] == "container" ? 1 : 0;
  // One fetch per second of transfer, give or take: never one per request (there were dozens).
  EXPECT_GE(fetches, 2u) << "in " << seconds << " s: " << aws.log().dump();
  EXPECT_LT(fetches, store.requests()) << aws.log().dump();
}

// AWS_NO_SIGN_REQUEST: unsigned reads, and no write is ever sent.
TEST(S3Store, AnonymousAccessReadsUnsignedAndNeverWrites) {
  TempDir dir;
  config::Environment env({{"HOME", (dir / "home").string()},
                           {"AWS_NO_SIGN_REQUEST", "YES"},
                           {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1"}});
  config::AwsAccess access = config::resolve_aws_access(env);
  ASSERT_TRUE(access.anonymous());
  S3Store store("s3://public-bucket/cache", access);
  net::HttpRequest get = store.signed_request("GET", store.address().object_url("a"), "x");
  EXPECT_FALSE(get.aws_sigv4.has_value()) << "an anonymous read is not signed";
  EXPECT_FALSE(store.why_not_writable().empty());
  EXPECT_THROW(store.signed_request("PUT", store.address().object_url("a"), "x"), Error);
  write_file(dir / "f", "x");
  EXPECT_THROW(store.commit({add("f", dir / "f")}, "", std::nullopt), Error);
  EXPECT_EQ(store.requests(), 0u) << "nothing was sent";
}

TEST(S3Store, NoSecretInMessages) {
  NEED_S3RVER();
  const std::string secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYSECRET";
  const std::string token = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN";
  S3Server server;
  config::AwsAccess access = server.access();
  access.secret_access_key = secret;  // s3rver checks the key id only
  access.session_token = token;
  S3Options options;
  options.retry.max_attempts = 2;
  options.retry.base = std::chrono::milliseconds(10);
  options.timeout = std::chrono::milliseconds(2000);
  std::vector<std::string> messages;
  auto collect = [&](auto&& action) {
    try {
      action();
      messages.push_back("(no error)");
    } catch (const std::exception& e) {
      messages.push_back(e.what());
    }
  };
  S3Store missing_bucket("s3://no-such-bucket/p", access, options);
  collect([&] { missing_bucket.list("", true, ""); });
  collect([&] { missing_bucket.read_small("x", "", 100); });
  TempDir dir;
  write_file(dir / "f", "content");
  collect([&] { missing_bucket.commit({add("f", dir / "f")}, "", std::nullopt); });
  config::AwsAccess bad_key = access;
  bad_key.access_key_id = "NOT-A-KEY";
  bad_key.credentials_origin = "the profile the test names";
  S3Store refused(server.url("p"), bad_key, options);
  collect([&] { refused.list("", true, ""); });
  config::AwsAccess nowhere = access;
  nowhere.endpoint = "http://127.0.0.1:1";
  S3Store down(server.url("p"), nowhere, options);
  collect([&] { down.stat({"f"}, ""); });
  Fd out(dir / "out");
  std::vector<DownloadRequest> requests{{"f", out.fd, {"f", false, 7, "", "", ""}}};
  auto results = down.download("", requests);
  messages.push_back(results[0].error);
  messages.push_back(access.describe());
  messages.push_back(down.location());
  messages.push_back(down.unreachable());
  for (const auto& message : messages) {
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_EQ(message.find(token), std::string::npos) << message;
    EXPECT_FALSE(message.empty());
  }
  EXPECT_NE(messages[0].find("NoSuchBucket"), std::string::npos) << messages[0];
  EXPECT_NE(messages[3].find("InvalidAccessKeyId"), std::string::npos) << messages[3];
  // A refusal names where the credentials came from.
  EXPECT_NE(messages[3].find("from the profile the test names"), std::string::npos) << messages[3];
  // Nothing of the secret in what s3rver was sent as arguments or logged either.
  EXPECT_EQ(server.output().find(secret), std::string::npos);
}

}  // namespace
}  // namespace neuron_cache::storage
