// Issue 23, S3's own integrity checks and encryption: every upload carries x-amz-checksum-sha256
// (single PUTs and each multipart part, with the parts' checksums in the completion), which the
// stand-in verifies as S3 does; a bucket policy that refuses unencrypted writes is met with
// NEURON_CACHE_S3_SSE, and its refusal names that setting.
#include <gtest/gtest.h>

#include <random>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_stand_in.h"
#include "test_support.h"

namespace neuron_cache::storage {
namespace {

using testing::TempDir;
using testing::write_file;

CommitOperation add(const std::string& path, const std::filesystem::path& local) {
  return {CommitOperation::Kind::Add, path, local};
}

std::string random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(generator());
  return out;
}

TEST(S3Integrity, EveryUploadCarriesTheChecksumS3Verifies) {
  testing::S3StandIn s3;
  TempDir dir;
  std::string small = random_bytes(1000, 1);
  std::string large = random_bytes(12u << 20, 2);
  write_file(dir / "small", small);
  write_file(dir / "large", large);
  S3Options options = s3.options();
  options.part_size = 5u << 20;
  S3Store store("s3://bucket/c", s3.access(), options);
  CommitResult result =
      store.commit({add("m/compile_flags.json", dir / "small"), add("m/model.neff", dir / "large")},
                   "", std::nullopt);
  EXPECT_EQ(result.large_sent, 2u);  // artifacts, whatever their size
  EXPECT_EQ(s3.body("c/m/compile_flags.json"), small);
  EXPECT_EQ(s3.body("c/m/model.neff"), large);
  EXPECT_EQ(s3.checksummed_puts_.load(), 1 + 3) << "one PUT and three parts";
  EXPECT_EQ(s3.checksummed_completions_.load(), 1);
}

TEST(S3Integrity, ABucketThatRequiresEncryptionGetsIt) {
  testing::S3StandIn s3;
  s3.require_sse_ = true;
  TempDir dir;
  write_file(dir / "small", "NEFF");
  write_file(dir / "large", random_bytes(6u << 20, 3));
  S3Options options = s3.options();
  options.part_size = 5u << 20;
  std::string message;
  try {
    S3Store plain("s3://bucket/c", s3.access(), options);
    plain.commit({add("m/model.neff", dir / "small")}, "", std::nullopt);
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("AccessDenied"), std::string::npos) << message;
  EXPECT_NE(message.find("set NEURON_CACHE_S3_SSE to AES256 or aws:kms"), std::string::npos)
      << message;
  options.sse = "aws:kms";
  options.sse_kms_key_id = "arn:aws:kms:eu-west-1:123456789012:key/neuron-cache";
  S3Store encrypted("s3://bucket/c", s3.access(), options);
  encrypted.commit({add("m/model.neff", dir / "small"), add("m/big.neff", dir / "large")}, "",
                   std::nullopt);
  EXPECT_EQ(s3.body("c/m/model.neff"), "NEFF");
  EXPECT_TRUE(s3.has("c/m/big.neff"));
  EXPECT_EQ(s3.encryption_.size(), 3u) << "the PUT, the multipart upload and its record";
  for (const auto& sse : s3.encryption_) {
    EXPECT_EQ(sse, "aws:kms arn:aws:kms:eu-west-1:123456789012:key/neuron-cache");
  }
}

}  // namespace
}  // namespace neuron_cache::storage
