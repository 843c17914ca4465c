#include "neuron_cache/net/retry.h"
#include "neuron_cache/sys/random.h"

#include <algorithm>
#include <random>
#include <string>

namespace neuron_cache::net {
namespace {

constexpr double kBackoffSpread = 0.5;

// A whole number, saturated at 12 digits (a hostile t=10000000000000000000000 must not throw:
// it is bounded like any long wait), or nothing when it is not one.
std::optional<long> whole(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != text.npos) return std::nullopt;
  if (text.size() > 12) return 999'999'999'999L;
  return std::stol(std::string(text));
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::chrono::milliseconds bounded(std::chrono::seconds wait) {
  return std::min<std::chrono::milliseconds>(wait, kMaxServerWait);
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

std::optional<RateLimit> rate_limit(const HttpResponse& response) {
  auto header = response.headers.get("RateLimit");
  if (!header) return std::nullopt;
  RateLimit limit;
  std::optional<long> remaining, reset;
  std::string_view rest = *header;
  for (bool first = true; !rest.empty() || first; first = false) {
    size_t semicolon = rest.find(';');
    std::string_view item = trimmed(rest.substr(0, semicolon));
    rest = semicolon == rest.npos ? std::string_view() : rest.substr(semicolon + 1);
    if (first && item.size() >= 2 && item.front() == '"' && item.back() == '"') {
      limit.bucket = std::string(item.substr(1, item.size() - 2));
    } else if (item.starts_with("r=")) {
      remaining = whole(item.substr(2));
    } else if (item.starts_with("t=")) {
      reset = whole(item.substr(2));
    }
  }
  if (limit.bucket.empty() || !remaining || !reset) return std::nullopt;
  limit.remaining = *remaining;
  limit.reset_seconds = *reset;
  return limit;
}

std::vector<std::string> quota_buckets(const HttpRequest& request) {
  std::string_view path = request.url;
  path = path.substr(0, path.find('?'));
  if (path.find("/resolve/") != path.npos || path.find("/api/resolve-cache/") != path.npos)
    return {"resolvers"};
  if (request.method == "POST" && path.find("/commit/") != path.npos) return {"api", "commit"};
  return {"api"};
}

std::optional<QuotaPause> quota_pause(const HttpRequest& request, const HttpResponse& response) {
  std::optional<RateLimit> limit = rate_limit(response);
  // As huggingface_hub waits after r=0: t + 1 s, the reset being told in whole seconds.
  if (limit && limit->remaining == 0)
    return QuotaPause{limit->bucket, bounded(std::chrono::seconds(limit->reset_seconds + 1))};
  if (response.status != 429) return std::nullopt;
  std::optional<long> seconds = retry_after(response);
  if (!seconds) return std::nullopt;  // how long is not said: each request backs off alone
  return QuotaPause{quota_buckets(request).back(), bounded(std::chrono::seconds(*seconds))};
}

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

std::chrono::milliseconds jittered(std::chrono::milliseconds wait, double spread) {
  static thread_local std::mt19937_64 generator{sys::random_seed()};
  double factor = std::uniform_real_distribution<double>(1 - spread, 1 + spread)(generator);
  return std::chrono::milliseconds(static_cast<long>(static_cast<double>(wait.count()) * factor));
}

std::chrono::milliseconds backoff(int attempt, const RetryPolicy& policy) {
  double wait = static_cast<double>(policy.base.count());
  for (int i = 1; i < attempt && wait < policy.cap.count(); ++i) wait *= 2;
  auto capped = std::chrono::milliseconds(
      static_cast<long>(std::min(wait, static_cast<double>(policy.cap.count()))));
  return std::min(jittered(capped, kBackoffSpread), policy.cap);
}

std::optional<std::chrono::milliseconds> retry_delay(const HttpResponse& response, int attempt,
                                                     const RetryPolicy& policy) {
  if (!is_transient(response) || attempt >= policy.max_attempts) return std::nullopt;
  if (auto limit = rate_limit(response); limit && limit->remaining == 0)
    return bounded(std::chrono::seconds(limit->reset_seconds + 1));
  if (auto seconds = retry_after(response)) return bounded(std::chrono::seconds(*seconds));
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
