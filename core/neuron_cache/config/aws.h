// How an S3 store is reached: credentials, region and endpoint, resolved once from the
// environment and the AWS CLI's files in the order the AWS SDKs (and so boto3, which libneuronxla
// uses for s3:// caches) follow:
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
//                profile AWS_PROFILE ("default") in AWS_SHARED_CREDENTIALS_FILE
//                (~/.aws/credentials), then in AWS_CONFIG_FILE (~/.aws/config, "[profile X]")
//   region       AWS_REGION > AWS_DEFAULT_REGION > the profile's region > us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL > the profile's endpoint_url >
//                https://s3.<region>.amazonaws.com
// The secret fields are never printed: describe() says where each value came from, not what it is.
#pragma once

#include <filesystem>
#include <string>

#include "neuron_cache/config/settings.h"

namespace neuron_cache::config {

struct AwsAccess {
  // Secrets: never in output, logs, messages or process arguments.
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty without temporary credentials

  std::string region;
  std::string endpoint;          // scheme://host[:port], no trailing '/'
  bool custom_endpoint = false;  // an S3-compatible store (MinIO, s3rver, R2): path-style

  // Where each value came from: a variable name, "<file> [profile]" or "default".
  std::string credentials_origin;
  std::string region_origin;
  std::string endpoint_origin;

  // One line per value, without the values of secrets ("credentials: AWS_ACCESS_KEY_ID ...").
  std::string describe() const;
};

// Resolves from `env` and the files under `home` (empty: the HOME variable of `env`). Throws an
// input Error naming every variable and file that was looked at when no credentials are found,
// or when a profile file cannot be read or has a malformed value.
AwsAccess resolve_aws_access(const Environment& env, const std::filesystem::path& home = {});

// Whether requests to `bucket` name it in the path (https://endpoint/bucket/key) instead of the
// host (https://bucket.endpoint/key): custom endpoints have no per-bucket host names, and bucket
// names with dots do not match the wildcard TLS certificate of *.s3.<region>.amazonaws.com.
bool aws_path_style(const AwsAccess& access, const std::string& bucket);

}  // namespace neuron_cache::config
