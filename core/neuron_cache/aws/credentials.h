// S3 credentials from wherever config/aws.h found they come from: fetched on first use (STS,
// the SSO portal, a credential_process, the container endpoint, the instance's metadata service),
// and fetched again before they expire, so a compile of an hour never fails its push on an
// expired session. Every answer is bounded (bytes, time) and every secret read is registered
// with config::add_secret at once, so no writer can print it.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "neuron_cache/config/aws.h"

namespace neuron_cache::aws {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::optional<std::chrono::system_clock::time_point> expiration;  // none: they do not expire
};

struct FetchOptions {
  // An answer's first byte (STS, the SSO portal, the container endpoint), and a process's run.
  std::chrono::milliseconds timeout{10000};
  // The metadata service answers in milliseconds on an instance; off one, a connection that is
  // not refused must not hold a run: a machine without credentials is told in under a second
  // (botocore waits 1 s; AWS_METADATA_SERVICE_TIMEOUT sets it, as for botocore).
  std::chrono::milliseconds imds_timeout{500};
};

// Fetches `source` once; throws an Error naming the source and what to do.
Credentials fetch(const config::AwsSource& source, const config::AwsAccess& access,
                  const FetchOptions& options);

// The region of the instance (its metadata service), or nothing when it does not say; throws the
// input Error of fetch_instance_role when there is no metadata service at all.
std::optional<std::string> instance_region(const config::AwsSource& source,
                                           const FetchOptions& options);

// THE credentials of one store, shared by its requests (from any thread).
class CredentialProvider {
 public:
  explicit CredentialProvider(config::AwsAccess access, FetchOptions options = {});
  // Credentials valid for a while yet: fetched on first use, again once they are within the
  // refresh margin of their expiry (a failed refresh keeps the old ones while they last).
  Credentials current();
  // "instance-role (the instance's role (IMDSv2)), expires 2026-12-03T12:00:00Z": never a value.
  std::string describe();

 private:
  config::AwsAccess access_;
  FetchOptions options_;
  std::mutex mutex_;
  std::optional<Credentials> held_;
  std::chrono::system_clock::time_point fetched_;
};

// Refreshed when this close to expiring (or at half the lifetime of shorter-lived credentials):
// botocore's advisory window, long enough for the longest single request.
inline constexpr std::chrono::minutes kRefreshMargin{15};

}  // namespace neuron_cache::aws
