// How an S3 store is reached: credentials, region and endpoint, resolved once from the
// environment and the AWS CLI's files in the order botocore (boto3, which libneuronxla uses for
// s3:// caches) follows. Only files are read here: the source of the credentials is decided
// without a request, and aws/credentials.h fetches those that need one (STS, SSO, a process, the
// container endpoint, the instance's metadata service).
//   credentials  AWS_NO_SIGN_REQUEST=YES (anonymous reads, an explicit opt-in), else botocore's
//                chain: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) > the
//                profile's role_arn with source_profile or credential_source (AssumeRole) >
//                web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, or the profile's
//                web_identity_token_file + role_arn) > the profile's SSO (sso_session or
//                sso_start_url, sso_account_id, sso_role_name) > keys in the credentials file >
//                the profile's credential_process > keys in the config file > the container
//                endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI) > the instance
//                role (IMDSv2, unless AWS_EC2_METADATA_DISABLED=true). The profile is AWS_PROFILE
//                ("default") in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and
//                AWS_CONFIG_FILE (~/.aws/config, "[profile X]").
//   region       AWS_REGION > AWS_DEFAULT_REGION > the profile's region > the instance's region
//                (its metadata service, unless disabled) > us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL > the profile's endpoint_url >
//                https://s3.<region>.amazonaws.com; STS: AWS_ENDPOINT_URL_STS > AWS_ENDPOINT_URL >
//                https://sts.<region>.amazonaws.com; SSO: AWS_ENDPOINT_URL_SSO > AWS_ENDPOINT_URL
//                > https://portal.sso.<sso_region>.amazonaws.com; the metadata service:
//                AWS_EC2_METADATA_SERVICE_ENDPOINT > http://169.254.169.254
// The secret fields are never printed: describe() says where each value came from, not what it is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "neuron_cache/config/settings.h"

namespace neuron_cache::config {

enum class AwsSourceKind {
  Keys,          // given directly: variables or a profile's keys
  AssumeRole,    // STS AssumeRole signed with another source's credentials
  WebIdentity,   // STS AssumeRoleWithWebIdentity with a token file (EKS IRSA)
  Sso,           // the SSO portal with the token `aws sso login` cached
  Process,       // a profile's credential_process
  Container,     // the ECS / EKS Pod Identity endpoint
  InstanceRole,  // the EC2 instance metadata service (IMDSv2)
  Anonymous,     // AWS_NO_SIGN_REQUEST: unsigned reads of a public bucket
};
std::string_view source_name(AwsSourceKind kind);  // "keys", "assume-role", ...

// What a credential source needs, as configured (no secret of a fetched credential is here).
struct AwsSource {
  AwsSourceKind kind = AwsSourceKind::Keys;
  std::string origin;  // the variables or "<file> [profile]" that configured it
  // AssumeRole, WebIdentity
  std::string role_arn;
  std::string role_session_name;  // given, else generated as botocore does
  std::string external_id;
  std::string web_identity_token_file;
  int64_t duration_seconds = 3600;
  std::shared_ptr<const AwsSource> role_source;  // AssumeRole: whose credentials sign the call
  // Keys (only as an AssumeRole's source: the store's own keys are AwsAccess's)
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  // Sso
  std::string sso_start_url;
  std::string sso_region;
  std::string sso_account_id;
  std::string sso_role_name;
  std::string sso_session;          // the [sso-session NAME], empty for the legacy profile form
  std::filesystem::path sso_cache;  // ~/.aws/sso/cache
  // Process
  std::string process_command;
  // Container
  std::string container_url;
  std::string container_token;  // a secret: AWS_CONTAINER_AUTHORIZATION_TOKEN
  std::string container_token_file;
  // InstanceRole: the metadata service's origin, and how long it may take to answer
  // (AWS_METADATA_SERVICE_TIMEOUT in seconds, as botocore reads it; 0 when unset)
  std::string imds_endpoint;
  int64_t imds_timeout_ms = 0;
};

struct AwsAccess {
  // Secrets: never in output, logs, messages or process arguments.
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty without temporary credentials

  std::string region;
  std::string endpoint;          // scheme://host[:port], no trailing '/'
  bool custom_endpoint = false;  // an S3-compatible store (MinIO, s3rver, R2): path-style

  // Where the credentials come from when they are not the keys above (null: the keys).
  std::shared_ptr<const AwsSource> source;
  std::string sts_endpoint;  // for AssumeRole and WebIdentity
  std::string sso_endpoint;  // for Sso, "" until the SSO region is known
  bool anonymous() const { return source && source->kind == AwsSourceKind::Anonymous; }
  // No region was configured: the instance's metadata service to ask for it, as botocore does
  // (null when AWS_EC2_METADATA_DISABLED); off EC2 the default region stands.
  std::shared_ptr<const AwsSource> region_from;

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
