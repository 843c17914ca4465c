// Runs s3rver 3.7.1 (tests/s3/package.json, installed by tests/s3/run-s3-tests.sh with `npm ci`
// into the build tree) for one test: 127.0.0.1, a free port, a fresh data folder, one bucket,
// stopped in the destructor. Its credentials are S3RVER/S3RVER (it checks the key id, not the
// SigV4 signature). What it does not do: enforce If-Match / If-None-Match.
#pragma once

#include <sys/types.h>

#include <string>

#include "neuron_cache/config/aws.h"
#include "test_support.h"

namespace neuron_cache::testing {

inline constexpr const char* kS3Key = "S3RVER";
inline constexpr const char* kS3Secret = "S3RVER";

// The s3rver script to run (NEURON_CACHE_S3RVER, set by run-s3-tests.sh), or "" when the tests
// run without it (then S3 tests skip).
std::string s3rver_script();

// The access of a client of an S3 stand-in on 127.0.0.1:`port` (path-style, us-east-1): the
// stand-ins check the SigV4 form, not these made-up credentials.
config::AwsAccess loopback_access(int port);

class S3Server {
 public:
  // Starts s3rver with `bucket` created; throws with its output when it is not ready in 20 s.
  explicit S3Server(const std::string& bucket = "neuron-cache-test");
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  std::string endpoint() const;  // http://127.0.0.1:PORT (AWS_ENDPOINT_URL)
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& bucket() const { return bucket_; }
  // s3://bucket/prefix
  std::string url(const std::string& prefix) const;
  // The access a client of this server uses (path-style, region us-east-1).
  config::AwsAccess access() const;
  // Environment variables for boto3 or the tool: AWS_* pointing at this server.
  std::vector<std::pair<std::string, std::string>> env() const;
  std::string output() const;
  const fs::path& data_dir() const { return data_dir_; }

 private:
  TempDir dir_;
  fs::path data_dir_;
  std::string bucket_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace neuron_cache::testing
