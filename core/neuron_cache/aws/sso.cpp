// IAM Identity Center (SSO): the access token `aws sso login` cached under ~/.aws/sso/cache, named
// by the SHA-1 of the sso-session's name (or, for a legacy profile, of the start URL), traded at
// the portal for the role's credentials.
#include "neuron_cache/aws/call.h"
#include "neuron_cache/aws/sources.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/url.h"

namespace neuron_cache::aws {
namespace {

using Clock = std::chrono::system_clock;

std::string login_hint(const config::AwsSource& source) {
  return "run `aws sso login" +
         (source.sso_session.empty() ? std::string() : " --sso-session " + source.sso_session) +
         "` and retry";
}

std::string cached_token(const config::AwsSource& source) {
  if (source.sso_cache.empty()) {
    throw input_error("the SSO token cache ~/.aws/sso/cache cannot be found: HOME is unset");
  }
  std::string name = source.sso_session.empty() ? source.sso_start_url : source.sso_session;
  std::string path = (source.sso_cache / (hash_hex(HashAlgorithm::Sha1, name) + ".json")).string();
  std::optional<std::string> text = read_small_file(path, 64u << 10, "the SSO token cache");
  if (!text) throw input_error("no SSO session (" + path + " is missing): " + login_hint(source));
  std::optional<pyjson::Json> document =
      pyjson::parse_or_nothing(*text, pyjson::Limits{64u << 10, 8, 1000});
  auto field = [&](const char* key) {
    if (!document || !document->is_object()) return std::string();
    auto found = document->find(key);
    return found != document->end() && found->is_string() ? found->get<std::string>() : "";
  };
  std::string token = field("accessToken");
  std::optional<Clock::time_point> expires = parse_time(field("expiresAt"));
  if (token.empty() || !expires) {
    throw input_error("the SSO token cache " + path +
                      " is not one `aws sso login` wrote: " + login_hint(source));
  }
  config::add_secret(token, config::kSsoTokenLabel);
  if (*expires <= Clock::now())
    throw input_error("the SSO session has expired: " + login_hint(source));
  return token;
}

}  // namespace

Credentials fetch_sso(const config::AwsSource& source, const config::AwsAccess& access,
                      const FetchOptions& options) {
  std::string token = cached_token(source);
  if (token.find_first_of("\r\n") != std::string::npos)
    throw input_error("the cached SSO token holds a line break: " + login_hint(source));
  net::HttpRequest request{"GET",
                           access.sso_endpoint + "/federation/credentials?account_id=" +
                               url::url_encode(source.sso_account_id, false) +
                               "&role_name=" + url::url_encode(source.sso_role_name, false),
                           {"x-amz-sso_bearer_token: " + token}};
  const std::string what = "the SSO portal at " + access.sso_endpoint;
  net::HttpResponse answer = call(request, options.timeout, 3);
  if (answer.status == 401 || answer.status == 403) {
    throw input_error(what + " refused the cached SSO token (" + outcome(answer) +
                      ", expired or revoked): " + login_hint(source));
  }
  if (answer.status != 200) {
    throw operational_error(what + " gave " + outcome(answer) + " for account " +
                            source.sso_account_id + " and role " + source.sso_role_name +
                            ": check them in " + source.origin + ", or retry later");
  }
  std::optional<pyjson::Json> document =
      pyjson::parse_or_nothing(answer.body, pyjson::Limits{64u << 10, 8, 1000});
  const pyjson::Json* role = nullptr;
  if (document && document->is_object()) {
    auto found = document->find("roleCredentials");
    if (found != document->end() && found->is_object()) role = &*found;
  }
  if (!role) throw operational_error(what + " answered without roleCredentials");
  auto text = [&](const char* key) {
    auto found = role->find(key);
    return found != role->end() && found->is_string() ? found->get<std::string>() : "";
  };
  Credentials credentials{text("accessKeyId"), text("secretAccessKey"), text("sessionToken"), {}};
  auto expiration = role->find("expiration");
  if (expiration != role->end() && expiration->is_number_integer()) {
    credentials.expiration =
        Clock::time_point(std::chrono::milliseconds(expiration->get<int64_t>()));
  }
  return checked(std::move(credentials), what);
}

}  // namespace neuron_cache::aws
