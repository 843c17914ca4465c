// The instance role through the EC2 instance metadata service, version 2: a session token from a
// PUT, then the role's name and its credentials with that token. Instances that still allow
// version 1 answer the GETs without a token when the PUT is refused (403, 404, 405), as botocore
// falls back.
#include "neuron_cache/aws/call.h"
#include "neuron_cache/aws/sources.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"

namespace neuron_cache::aws {
namespace {

constexpr const char* kTokenPath = "/latest/api/token";
constexpr const char* kRolesPath = "/latest/meta-data/iam/security-credentials/";
constexpr const char* kRegionPath = "/latest/meta-data/placement/region";

struct Session {
  std::string endpoint;
  std::string token;  // empty: version 1
  std::chrono::milliseconds timeout;
};

std::string where(const config::AwsSource& source) {
  return "the instance metadata service at " + source.imds_endpoint;
}

// Off EC2 the service does not exist: the run has no credentials at all, which is the user's
// configuration to fix (exit 2), not a store failure.
[[noreturn]] void not_there(const config::AwsSource& source, const net::HttpResponse& answer) {
  throw input_error(
      "no AWS credentials for S3: none are configured (variables, profile, container endpoint) "
      "and " +
      where(source) + " gave " + outcome(answer) +
      " (not an EC2 instance?); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a profile "
      "(AWS_PROFILE), or AWS_NO_SIGN_REQUEST=YES to read a public bucket unsigned");
}

Session open_session(const config::AwsSource& source, FetchOptions options) {
  if (source.imds_timeout_ms > 0)
    options.imds_timeout = std::chrono::milliseconds(source.imds_timeout_ms);
  net::HttpRequest put{
      "PUT", source.imds_endpoint + kTokenPath, {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}};
  put.body = "";
  net::HttpResponse answer = call(put, options.imds_timeout, 1);
  if (answer.status == 200 && !answer.body.empty() && answer.body.size() <= 1024)
    return {source.imds_endpoint, answer.body, options.imds_timeout};
  if (answer.status == 403 || answer.status == 404 || answer.status == 405)
    return {source.imds_endpoint, "", options.imds_timeout};
  if (answer.status == 0) not_there(source, answer);
  throw operational_error(where(source) + " refused a session token: " + outcome(answer) +
                          "; check the instance's metadata options (hop limit in containers)");
}

net::HttpResponse get(const Session& session, const std::string& path) {
  net::HttpRequest request{"GET", session.endpoint + path};
  if (!session.token.empty())
    request.headers.push_back("X-aws-ec2-metadata-token: " + session.token);
  return call(request, session.timeout, 2);
}

}  // namespace

Credentials fetch_instance_role(const config::AwsSource& source, const FetchOptions& options) {
  Session session = open_session(source, options);
  net::HttpResponse roles = get(session, kRolesPath);
  if (roles.status == 0 && session.token.empty()) not_there(source, roles);
  if (roles.status == 404) {
    throw input_error("no AWS credentials for S3: this instance has no IAM role (" + where(source) +
                      " lists none); attach an instance profile, or configure "
                      "credentials another way");
  }
  std::string role = roles.body.substr(0, roles.body.find('\n'));
  bool plain = roles.status == 200 && !role.empty() && role.size() <= 128 &&
               role.find_first_of("/?#%\\ \t\r") == std::string::npos;
  if (!plain) {
    throw operational_error(where(source) + " did not name the instance's role (" + outcome(roles) +
                            "): retry later");
  }
  net::HttpResponse answer = get(session, kRolesPath + role);
  if (answer.status != 200) {
    throw operational_error(where(source) + " gave no credentials for role " + printable(role) +
                            " (" + outcome(answer) + "): retry later");
  }
  return credentials_from_json(answer.body, where(source));
}

std::optional<std::string> instance_region(const config::AwsSource& source,
                                           const FetchOptions& options) {
  try {
    Session session = open_session(source, options);
    net::HttpResponse answer = get(session, kRegionPath);
    if (answer.status != 200 || answer.body.size() > 64) return std::nullopt;
    for (char c : answer.body) {
      if (!(std::islower(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
        return std::nullopt;
    }
    return answer.body.empty() ? std::nullopt : std::optional<std::string>(answer.body);
  } catch (const Error& error) {
    // No metadata service at all (off EC2): the credentials cannot come from it either, so the
    // run is told now rather than after a second wait.
    if (error.kind() == ErrorKind::Input) throw;
    return std::nullopt;
  }
}

}  // namespace neuron_cache::aws
