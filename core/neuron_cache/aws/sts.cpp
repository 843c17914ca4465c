// STS's query API: AssumeRole (signed with the source profile's credentials) and
// AssumeRoleWithWebIdentity (unsigned: the web identity token is the proof, as on EKS with IRSA).
#include <chrono>

#include "neuron_cache/aws/call.h"
#include "neuron_cache/aws/sources.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/format/xml.h"

namespace neuron_cache::aws {
namespace {

// Web identity tokens (JWTs) are a few KiB; a file far larger is not one.
constexpr size_t kMaxWebIdentityToken = 64u << 10;

const xml::Element* find(const xml::Element& element, std::string_view name) {
  for (const xml::Element& child : element.children) {
    if (child.name == name) return &child;
  }
  return nullptr;
}

std::string session_name(const config::AwsSource& source) {
  if (!source.role_session_name.empty()) return source.role_session_name;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return "neuron-cache-" +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count());
}

std::string form(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string body;
  for (const auto& [name, value] : fields) {
    if (!body.empty()) body += '&';
    body += name + "=" + url::url_encode(value, false);
  }
  return body;
}

// STS's <ErrorResponse><Error><Code>...</Code><Message>...</Message></Error>, or the status.
std::string error_of(const net::HttpResponse& answer) {
  try {
    xml::Element root = xml::parse(answer.body);
    const xml::Element* error = find(root, "Error");
    if (error) {
      return printable(error->child("Code").value_or("")) + ": " +
             printable(error->child("Message").value_or(""), kPrintableMessage);
    }
  } catch (const Error&) {
  }
  return outcome(answer);
}

Credentials read_result(const net::HttpResponse& answer, const std::string& action,
                        const std::string& what) {
  xml::Element root = [&] {
    try {
      return xml::parse(answer.body, 8192);
    } catch (const Error& error) {
      throw operational_error(what + "'s answer to " + action + " is " + error.what() +
                              ": check AWS_ENDPOINT_URL_STS");
    }
  }();
  const xml::Element* result = find(root, action + "Result");
  const xml::Element* credentials = result ? find(*result, "Credentials") : nullptr;
  if (!credentials) {
    throw operational_error(what + "'s answer to " + action +
                            " holds no Credentials: check AWS_ENDPOINT_URL_STS");
  }
  Credentials out;
  out.access_key_id = credentials->child("AccessKeyId").value_or("");
  out.secret_access_key = credentials->child("SecretAccessKey").value_or("");
  out.session_token = credentials->child("SessionToken").value_or("");
  out.expiration = parse_time(credentials->child("Expiration").value_or(""));
  if (!out.expiration) throw operational_error(what + " gave credentials without an Expiration");
  return checked(std::move(out), what);
}

net::HttpRequest sts_request(const config::AwsAccess& access, std::string body) {
  net::HttpRequest request{"POST",
                           access.sts_endpoint + "/",
                           {"Content-Type: application/x-www-form-urlencoded; charset=utf-8"}};
  request.body = std::move(body);
  return request;
}

}  // namespace

Credentials fetch_assume_role(const config::AwsSource& source, const Credentials& signer,
                              const config::AwsAccess& access, const FetchOptions& options) {
  std::vector<std::pair<std::string, std::string>> fields{
      {"Action", "AssumeRole"},
      {"Version", "2011-06-15"},
      {"RoleArn", source.role_arn},
      {"RoleSessionName", session_name(source)},
      {"DurationSeconds", std::to_string(source.duration_seconds)}};
  if (!source.external_id.empty()) fields.emplace_back("ExternalId", source.external_id);
  net::HttpRequest request = sts_request(access, form(fields));
  request.aws_sigv4 = net::HttpRequest::AwsSigV4{"aws:amz:" + access.region + ":sts",
                                                 signer.access_key_id, signer.secret_access_key};
  if (!signer.session_token.empty())
    request.headers.push_back("x-amz-security-token: " + signer.session_token);
  const std::string what = "STS at " + access.sts_endpoint;
  net::HttpResponse answer = call(request, options.timeout, 3);
  if (answer.status != 200) {
    throw operational_error("AssumeRole of " + source.role_arn + " (" + source.origin +
                            ") failed at " + what + ": " + error_of(answer) +
                            "; check the role's trust policy and the source credentials");
  }
  return read_result(answer, "AssumeRole", what);
}

Credentials fetch_web_identity(const config::AwsSource& source, const config::AwsAccess& access,
                               const FetchOptions& options) {
  auto token = read_small_file(source.web_identity_token_file, kMaxWebIdentityToken,
                               "the web identity token file");
  if (!token || token->empty()) {
    throw input_error("the web identity token file " + source.web_identity_token_file + " (" +
                      source.origin +
                      ") is missing or empty: check the pod's service account (IRSA) mount");
  }
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  config::add_secret(*token, config::kWebIdentityLabel);
  net::HttpRequest request = sts_request(access, form({{"Action", "AssumeRoleWithWebIdentity"},
                                                       {"Version", "2011-06-15"},
                                                       {"RoleArn", source.role_arn},
                                                       {"RoleSessionName", session_name(source)},
                                                       {"WebIdentityToken", *token}}));
  const std::string what = "STS at " + access.sts_endpoint;
  net::HttpResponse answer = call(request, options.timeout, 3);
  if (answer.status != 200) {
    throw operational_error("AssumeRoleWithWebIdentity of " + source.role_arn + " (" +
                            source.origin + ") failed at " + what + ": " + error_of(answer) +
                            "; check the role's trust policy for the service account");
  }
  return read_result(answer, "AssumeRoleWithWebIdentity", what);
}

}  // namespace neuron_cache::aws
