#include "neuron_cache/aws/call.h"

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::aws {

net::HttpResponse call(net::HttpRequest request, std::chrono::milliseconds timeout, int attempts) {
  net::HttpOptions options = net::timed_options(url::origin_of(request.url), timeout);
  options.answer_deadline = timeout * 3;
  net::HttpEngine http(options);
  request.send_token = false;
  request.max_answer_bytes = kMaxCredentialAnswer;
  net::RetryPolicy policy;
  policy.max_attempts = attempts;
  policy.base = std::chrono::milliseconds(200);
  policy.cap = std::chrono::milliseconds(2000);
  std::string name = request.method + " " + url::loggable(request.url);
  net::RetryingExchange exchange(std::move(request), policy);
  http.run({&exchange}, 1);
  if (exchange.response_.too_large) {
    throw operational_error(name +
                            " answered more than 64 KiB, which no credential answer is: "
                            "check the endpoint it was sent to");
  }
  return exchange.response_;
}

std::string outcome(const net::HttpResponse& response) {
  if (response.status != 0) return "HTTP " + std::to_string(response.status);
  return "no answer (" + printable(response.error, kPrintableMessage) + ")";
}

}  // namespace neuron_cache::aws
