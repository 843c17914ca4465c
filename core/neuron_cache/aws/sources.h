// The fetch of each credential source (one file each); credentials.cpp picks one by kind.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "neuron_cache/aws/credentials.h"

namespace neuron_cache::aws {

Credentials fetch_instance_role(const config::AwsSource& source, const FetchOptions& options);
Credentials fetch_container(const config::AwsSource& source, const FetchOptions& options);
// AssumeRole signed with `signer`; AssumeRoleWithWebIdentity with the token file.
Credentials fetch_assume_role(const config::AwsSource& source, const Credentials& signer,
                              const config::AwsAccess& access, const FetchOptions& options);
Credentials fetch_web_identity(const config::AwsSource& source, const config::AwsAccess& access,
                               const FetchOptions& options);
Credentials fetch_sso(const config::AwsSource& source, const config::AwsAccess& access,
                      const FetchOptions& options);
Credentials fetch_process(const config::AwsSource& source, const FetchOptions& options);

// The JSON credential document of the metadata service, the container endpoint and
// credential_process (AccessKeyId, SecretAccessKey, Token or SessionToken, Expiration); `what`
// names the source in messages. Registers the secrets it read.
Credentials credentials_from_json(std::string_view body, const std::string& what);
// Registers a fetched credential's secrets with config::add_secret and checks it is whole.
Credentials checked(Credentials credentials, const std::string& what);
// An ISO 8601 UTC time ("2026-12-03T12:00:00Z") as a time point, or nothing.
std::optional<std::chrono::system_clock::time_point> parse_time(std::string_view text);
// A small file a source names (a web identity token, the SSO token cache), at most `max_bytes`,
// never through a FIFO or device; nothing when it does not exist.
std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes,
                                           const std::string& what);

}  // namespace neuron_cache::aws
