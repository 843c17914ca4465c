// HTTP on libcurl for every store that speaks it (the Hub, S3): one curl multi handle drives many
// exchanges at once with connection reuse (HTTP/2 where offered). Each engine serves one endpoint
// (HttpOptions::endpoint). Redirects are followed here, not by libcurl, so the bearer token is
// only ever sent to the endpoint's own origin, and only downloads without a body follow a
// redirect to another origin (see HttpRequest::may_leave_origin).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neuron_cache/version.h"

namespace neuron_cache::net {

struct Headers {
  std::vector<std::pair<std::string, std::string>> items;
  // The first value of `name`, compared case-insensitively.
  std::optional<std::string> get(std::string_view name) const;
};

// What one answer held in memory may hold unless its request says otherwise: API answers (a tree
// page, paths-info, an error body) are far smaller. A request for a bigger buffered body (a small
// file of known bound) sets HttpRequest::max_answer_bytes.
inline constexpr uint64_t kMaxAnswerBytes = 16u << 20;

struct HttpRequest {
  HttpRequest() = default;
  HttpRequest(std::string method_, std::string url_, std::vector<std::string> headers_ = {},
              std::string body_ = {})
      : method(std::move(method_)),
        url(std::move(url_)),
        headers(std::move(headers_)),
        body(std::move(body_)) {}

  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // small bodies (JSON, NDJSON)
  // A buffered answer (one not streamed to its exchange) longer than this is cut off as it
  // arrives and marked HttpResponse::too_large.
  uint64_t max_answer_bytes = kMaxAnswerBytes;
  // Large bodies are streamed from a file slice instead of `body`.
  int upload_fd = -1;
  uint64_t upload_offset = 0;
  uint64_t upload_length = 0;
  // Whether a redirect to another origin may be followed: only file downloads, which a store may
  // serve from a CDN (without the token). API calls and requests with a body never leave the
  // origin they were sent to: another host's answer is not the endpoint's.
  bool may_leave_origin = false;
  // Whether the token goes with it (to the endpoint's origin only). Presigned storage URLs
  // (LFS PUTs, multipart parts) carry their own signature and must not get it.
  bool send_token = true;
  // Overrides HttpOptions::answer_timeout: a commit may take longer to answer.
  std::optional<std::chrono::milliseconds> answer_timeout;
  // Whether its failures count toward deciding that the endpoint is unreachable. A commit's slow
  // answer says nothing about the store being down, and the head must still be read after it.
  bool tells_reachability = true;
  // Signs the request with AWS Signature Version 4 (S3 and S3-compatible stores): libcurl's
  // CURLOPT_AWS_SIGV4 with the key id and secret as user and password. The caller adds the
  // x-amz-content-sha256 header (and x-amz-security-token) and sets send_token = false.
  struct AwsSigV4 {
    std::string provider;  // "aws:amz:<region>:s3"
    std::string key_id;
    std::string secret;  // never logged, never in a URL or a message
  };
  std::optional<AwsSigV4> aws_sigv4;
};

struct HttpResponse {
  long status = 0;    // 0: no HTTP answer (connection refused, reset, timeout)
  std::string error;  // libcurl's reason when status is 0 or the transfer broke
  Headers headers;
  std::string body;  // non-streamed bodies and error bodies (capped)
  std::string url;   // the URL that answered, after redirects
  // When a 3xx answer was not followed (another origin): why, and the status stays the 3xx.
  // When the answer came from another origin than the request went to (a redirect to a CDN):
  // the last answer of the request's own origin (Hub: X-Repo-Commit, X-Linked-Etag). Empty when
  // the answer is the origin's own, after any redirects within it: `headers` are then its word.
  Headers origin_headers;
  uint64_t streamed_bytes = 0;
  // The buffered body went over HttpRequest::max_answer_bytes: `body` is empty, never retried.
  bool too_large = false;
  // No connection could be made (refused, unknown host, connect timeout), or none was tried
  // because the endpoint was found unreachable earlier in the run (HttpEngine::unreachable).
  bool unreachable = false;
};

// One logical operation (a download, an API call, a part upload) that may take several HTTP
// attempts: retries, resumes and redirects.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // The request to send now.
  virtual HttpRequest request() = 0;
  // Whether body bytes of a 2xx answer go to on_body() instead of HttpResponse::body.
  virtual bool streams_body() const { return false; }
  // Whether the exchange is over before its next request (another part of its file failed):
  // then that request is never sent.
  virtual bool given_up() const { return false; }
  // A streamed 2xx answer starts: called before its first on_body().
  virtual void on_stream_start(long /*status*/, const Headers& /*headers*/) {}
  // Body bytes of a 2xx answer as they arrive; false aborts the transfer.
  virtual bool on_body(std::string_view) { return true; }
  // The attempt finished (redirects already followed). Return nothing when the exchange is over,
  // or how long to wait before request() is asked again.
  virtual std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) = 0;
};

// libcurl's connect timeout, at most: a server that is up accepts a connection within seconds.
inline constexpr std::chrono::milliseconds kMaxConnectTimeout{10000};
// The shortest wait for an answer's first byte, whatever remains of the unreachable budget.
inline constexpr std::chrono::milliseconds kMinAnswerWait{500};

struct HttpOptions {
  std::string endpoint;  // e.g. https://huggingface.co: its origin is the only one given the token
  std::string token;
  std::string user_agent = std::string("neuron-cache/") + kVersion;
  std::chrono::milliseconds connect_timeout{10000};
  // The first byte of the answer must come within this after the request was sent; afterwards
  // only stall_timeout applies, so a large transfer that progresses is never cut.
  std::chrono::milliseconds answer_timeout{15000};
  // A transfer whose average rate over this window falls below min_transfer_rate is dead: a
  // server that drips a few bytes a second never holds a transfer (or a run) forever.
  std::chrono::seconds stall_timeout{60};
  uint64_t min_transfer_rate = 1024;  // bytes per second
  // A buffered answer (an API call's) must be whole within this after it was sent, however it
  // trickles in; streamed file transfers have the rate rule instead.
  std::chrono::milliseconds answer_deadline{120000};
  // How long requests to the endpoint's origin may keep failing (no answer, 5xx) before the
  // endpoint is taken as unreachable for the rest of the run. A refused connection, an
  // unknown host or a connect timeout decides it at once.
  std::chrono::milliseconds unreachable_budget{15000};
  int max_redirects = 5;
};

// THE deadline rule, from the one timeout a user sets (NEURON_CACHE_TIMEOUT_MS): a connection
// within it (at most kMaxConnectTimeout), an answer's first byte within it, an endpoint failing
// for that long is unreachable, and a buffered answer must be whole within 8 times it.
HttpOptions timed_options(std::string endpoint, std::chrono::milliseconds timeout);

// Counts what went over the wire, for tests, reports and benchmarks.
struct HttpStats {
  std::atomic<uint64_t> requests = 0;
  std::atomic<uint64_t> retries = 0;
  std::atomic<uint64_t> bytes_down = 0;
  std::atomic<uint64_t> bytes_up = 0;
  std::atomic<uint64_t> rate_limited = 0;  // 429 answers
  // Requests held back because their quota bucket was used up (HttpEngine: quota pauses).
  std::atomic<uint64_t> quota_waits = 0;
};

class HttpEngine {
 public:
  explicit HttpEngine(HttpOptions options);
  ~HttpEngine();
  HttpEngine(const HttpEngine&) = delete;
  HttpEngine& operator=(const HttpEngine&) = delete;

  // Runs every exchange to its end, at most `parallel` HTTP transfers at once. Safe to call from
  // several threads at once (a lease's renewal beside a download): each call drives its own curl
  // multi handle, taken from a pool so connections are reused.
  void run(const std::vector<Exchange*>& exchanges, size_t parallel);
  // One request with a buffered body; redirects followed, no retries.
  HttpResponse perform(const HttpRequest& request);

  const HttpStats& stats() const { return stats_; }
  // Why the endpoint was found unreachable in this run, or empty. Once set it stays set: requests
  // to its origin are no longer sent and fail at once (HttpResponse::unreachable) with it.
  std::string unreachable() const;
  // For a machine that waits on the endpoint (a compile lease's waiter, a holder ending its
  // lease): requests are sent again after it was found unreachable. The failure clock is kept,
  // so a request that fails again marks it unreachable at once: one attempt per call.
  void look_again();
  const HttpOptions& options() const { return options_; }
  // Called with the byte count of every chunk received or sent (for progress display), on the
  // thread that runs the transfer.
  std::function<void(uint64_t down, uint64_t up)> on_progress;

 private:
  struct Impl;
  class Run;  // one call of run(): its waiting exchanges and its transfers (http.cpp)
  std::unique_ptr<Impl> impl_;
  // Records how an attempt at the endpoint went; decides unreachable_.
  void note_reachability(const HttpRequest& request, const HttpResponse& response,
                         std::chrono::steady_clock::time_point sent);
  // How long an attempt of `request` waits for the first byte of its answer.
  std::chrono::milliseconds answer_wait(const HttpRequest& request) const;
  // Whether a retry of a request to the endpoint `delay` from now would still fit the budget; if
  // not, the endpoint is taken as unreachable now instead of waiting.
  bool retry_fits(const HttpRequest& request, std::chrono::milliseconds delay);
  // Whether `request` goes to the endpoint's origin (what reachability and the token are about).
  bool to_endpoint(const HttpRequest& request) const;
  // Quota pauses: an answer that says a quota bucket is used up (RateLimit r=0, a 429 with
  // Retry-After, net::quota_pause) holds back every request of the process in that bucket until
  // the reset, so one request meets the wall and the others wait instead of each meeting it.
  void note_quota(const HttpRequest& request, const HttpResponse& response);
  // Until when `request` must wait for its buckets' reset, or nothing when it may go now.
  std::optional<std::chrono::steady_clock::time_point> paused(const HttpRequest& request);

  // Marks the endpoint unreachable for the rest of the run (the first reason stays).
  void set_unreachable(std::string why);

  HttpOptions options_;
  HttpStats stats_;
  std::atomic<bool> gone_ = false;  // unreachable_ is set: checked without the lock
  mutable std::mutex state_mutex_;  // the fields below
  std::string unreachable_;
  // Since when requests to the endpoint have failed without a good answer in between.
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  // By quota bucket: until when its requests to the endpoint wait (note_quota).
  std::map<std::string, std::chrono::steady_clock::time_point> paused_until_;
};
}  // namespace neuron_cache::net
