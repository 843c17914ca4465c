// When a request that failed is sent again: transient failures (429, 5xx, 503 SlowDown, no
// answer) after the delay the server asks for or an exponential backoff with jitter. The same
// rule for every store's requests (the Hub, S3) and for the commit-conflict loops above them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/net/http.h"

namespace neuron_cache::net {

// The longest a server's word (RateLimit t, Retry-After) makes a request or a quota pause wait:
// a hostile or broken t=1e12 must neither overflow a clock nor hold a run for days.
inline constexpr std::chrono::minutes kMaxServerWait{10};

// The Hub's `RateLimit: "api";r=<remaining>;t=<seconds until the window resets>`
// (hub-http-api.md §7.2), or nothing when the answer has none that reads so.
struct RateLimit {
  std::string bucket;  // "api", "resolvers", "pages"
  long remaining = 0;
  long reset_seconds = 0;
};
std::optional<RateLimit> rate_limit(const HttpResponse& response);

// The Hub's quota buckets a request counts in: a file URL (/resolve/) in "resolvers", any other in
// "api", and a commit also in "commit" (the Hub's hourly commit quota per repo).
std::vector<std::string> quota_buckets(const HttpRequest& request);

// What an answer says about the quota of the requests like it: the bucket that is used up and
// how long to wait (at most kMaxServerWait). From `RateLimit` with r=0 on any answer (the next
// request would be refused), else from a 429's integer `Retry-After` for the request's own
// bucket (the commit quota's 429). Nothing otherwise.
struct QuotaPause {
  std::string bucket;
  std::chrono::milliseconds wait{0};
};
std::optional<QuotaPause> quota_pause(const HttpRequest& request, const HttpResponse& response);

struct RetryPolicy {
  int max_attempts = 6;  // the first try included
  std::chrono::milliseconds base{1000};
  std::chrono::milliseconds cap{30000};
};

// Waits between tries: NEURON_CACHE_RETRY_BASE_MS (Settings::retry_base) shortens them.
RetryPolicy retry_policy(const config::Settings& settings, int max_attempts);

// 408, 429, 500, 502, 503, 504 and answers that never came (status 0), unless the endpoint was
// found unreachable (HttpResponse::unreachable).
bool is_transient(const HttpResponse& response);

// The delay before attempt number `attempt` + 1 (attempt counts from 1), or nothing when the
// failure is not transient or the attempts are used up. Honours `RateLimit: ...;r=0;t=N` and an
// integer `Retry-After` (both at most kMaxServerWait) before falling back to
// base * 2^(attempt-1) * U(0.5, 1.5), capped.
std::optional<std::chrono::milliseconds> retry_delay(const HttpResponse& response, int attempt,
                                                     const RetryPolicy& policy);

// One request retried on transient failures (429, 5xx, 503 SlowDown, no answer) after
// retry_delay; the last answer is kept. What the Hub client and the S3 store send. With
// `max_body_bytes`, a 2xx body longer than that ends the exchange (too_large()) instead of being
// held in memory.
class RetryingExchange : public Exchange {
 public:
  RetryingExchange(HttpRequest request, const RetryPolicy& policy,
                   std::optional<uint64_t> max_body_bytes = std::nullopt)
      : request_(std::move(request)), policy_(policy), max_body_(max_body_bytes) {}
  HttpRequest request() override;
  bool streams_body() const override { return max_body_.has_value(); }
  bool on_body(std::string_view bytes) override;
  std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) override;
  // Whether the last answer's body went over max_body_bytes (it is then not kept).
  bool too_large() const { return too_large_; }
  HttpResponse response_;

 private:
  HttpRequest request_;
  RetryPolicy policy_;
  std::optional<uint64_t> max_body_;
  std::string body_;  // a bounded 2xx body as it streams in
  bool too_large_ = false;
  int attempts_ = 0;
};

// The backoff alone, as optimum-neuron waits between commit conflicts: min(cap, w * U(0.5,1.5)).
std::chrono::milliseconds backoff(int attempt, const RetryPolicy& policy);
// `wait` scattered by up to `spread` of itself either way (0.5: between half and one and a half
// times), so that the clients of one store do not act in step.
std::chrono::milliseconds jittered(std::chrono::milliseconds wait, double spread);

}  // namespace neuron_cache::net
