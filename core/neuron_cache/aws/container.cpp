// The ECS task role and EKS Pod Identity: a GET to the container endpoint, with the
// authorization token of a file (EKS, rotated) or a variable.
#include "neuron_cache/aws/call.h"
#include "neuron_cache/aws/sources.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/url.h"

namespace neuron_cache::aws {
namespace {

// Where credentials may come from over plain HTTP: the container agent's link-local addresses
// (ECS, EKS Pod Identity) and this machine, as botocore allows; anything else must be HTTPS.
bool may_use_http(const std::string& url) {
  std::string origin = url::origin_of(url);
  for (const char* allowed :
       {"http://169.254.170.2", "http://169.254.170.23", "http://[fd00:ec2::23]",
        "http://127.0.0.1", "http://localhost", "http://[::1]"}) {
    if (origin == allowed || origin.starts_with(std::string(allowed) + ":")) return true;
  }
  return false;
}

std::string token_of(const config::AwsSource& source) {
  if (!source.container_token_file.empty()) {
    auto token = read_small_file(source.container_token_file, 16384,
                                 "the container authorization token file");
    if (!token) {
      throw input_error("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names " +
                        source.container_token_file + ", which does not exist");
    }
    while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
    config::add_secret(*token, config::kContainerTokenLabel);
    return *token;
  }
  return source.container_token;
}

}  // namespace

Credentials fetch_container(const config::AwsSource& source, const FetchOptions& options) {
  const std::string what = "the container credentials endpoint (" + source.origin + ")";
  if (!source.container_url.starts_with("https://") && !may_use_http(source.container_url)) {
    throw input_error(source.origin +
                      " must be an https:// URL, or http:// to the container agent or this "
                      "machine: credentials never travel unencrypted to another host");
  }
  net::HttpRequest request{"GET", source.container_url};
  std::string token = token_of(source);
  if (token.find_first_of("\r\n") != std::string::npos)
    throw input_error("the container authorization token holds a line break: fix its source");
  if (!token.empty()) request.headers.push_back("Authorization: " + token);
  net::HttpResponse answer = call(request, options.timeout, 3);
  if (answer.status != 200) {
    throw operational_error(what + " gave " + outcome(answer) +
                            ": check the task or pod role, or retry later");
  }
  return credentials_from_json(answer.body, what);
}

}  // namespace neuron_cache::aws
