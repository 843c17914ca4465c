#include "neuron_cache/net/retry.h"
#include "neuron_cache/sys/random.h"

#include <algorithm>
#include <random>
#include <string>

namespace neuron_cache::net {
namespace {

double jitter() {
  static thread_local std::mt19937_64 generator{sys::random_seed()};
  return std::uniform_real_distribution<double>(0.5, 1.5)(generator);
}

// The seconds in `RateLimit: "api";r=0;t=42` when no request is left in the window.
std::optional<long> rate_limit_reset(const HttpResponse& response) {
  auto header = response.headers.get("RateLimit");
  if (!header || header->find("r=0") == std::string::npos) return std::nullopt;
  size_t t = header->find("t=");
  if (t == std::string::npos) return std::nullopt;
  try {
    return std::stol(header->substr(t + 2));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<long> retry_after(const HttpResponse& response) {
  auto header = response.headers.get("Retry-After");
  if (!header || header->empty() || header->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;  // the HTTP-date form is not used by the Hub or S3
  }
  // More than a day is no answer to wait for (and more digits than a long holds is none at all).
  if (header->size() > 5) return std::nullopt;
  return std::stol(*header);
}

}  // namespace

RetryPolicy retry_policy(const config::Settings& settings, int max_attempts) {
  RetryPolicy policy;
  policy.max_attempts = max_attempts;
  if (auto base = settings.retry_base()) {
    policy.base = *base;
    policy.cap = policy.base * 30;
  }
  return policy;
}

bool is_transient(const HttpResponse& response) {
  // An endpoint that could not be reached at all is not asked again in this run
  // (HttpEngine::unreachable).
  if (response.unreachable || response.too_large) return false;
  long s = response.status;
  return s == 0 || s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

std::chrono::milliseconds backoff(int attempt, const RetryPolicy& policy) {
  double wait = static_cast<double>(policy.base.count());
  for (int i = 1; i < attempt && wait < policy.cap.count(); ++i) wait *= 2;
  wait = std::min(wait, static_cast<double>(policy.cap.count())) * jitter();
  return std::chrono::milliseconds(
      static_cast<long>(std::min(wait, static_cast<double>(policy.cap.count()))));
}

std::optional<std::chrono::milliseconds> retry_delay(const HttpResponse& response, int attempt,
                                                     const RetryPolicy& policy) {
  if (!is_transient(response) || attempt >= policy.max_attempts) return std::nullopt;
  if (auto reset = rate_limit_reset(response)) return std::chrono::seconds(*reset + 1);
  if (auto seconds = retry_after(response)) return std::chrono::seconds(*seconds);
  return backoff(attempt, policy);
}

HttpRequest RetryingExchange::request() {
  body_.clear();
  too_large_ = false;
  return request_;
}

bool RetryingExchange::on_body(std::string_view bytes) {
  if (body_.size() + bytes.size() > *max_body_) {
    too_large_ = true;
    return false;
  }
  body_.append(bytes);
  return true;
}

std::optional<std::chrono::milliseconds> RetryingExchange::on_complete(
    const HttpResponse& response) {
  response_ = response;
  if (max_body_ && response.status >= 200 && response.status < 300) response_.body = body_;
  if (too_large_) return std::nullopt;
  return retry_delay(response, ++attempts_, policy_);
}

}  // namespace neuron_cache::net
