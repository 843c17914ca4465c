// HTTP on libcurl for the Hub client: one curl multi handle drives many exchanges at once with
// connection reuse (HTTP/2 where offered). Redirects are followed here, not by libcurl, so the
// token is only ever sent to the Hub endpoint's own origin, and only downloads without a body
// follow a redirect to another origin (see HttpRequest::may_leave_origin).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "version.h"

namespace neuron_cache::hub {

struct Headers {
  std::vector<std::pair<std::string, std::string>> items;
  // The first value of `name`, compared case-insensitively.
  std::optional<std::string> get(std::string_view name) const;
};

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
  // Large bodies are streamed from a file slice instead of `body`.
  int upload_fd = -1;
  uint64_t upload_offset = 0;
  uint64_t upload_length = 0;
  // Whether a redirect to another origin may be followed: only file downloads, which the Hub
  // serves from a CDN (without the token). API calls and requests with a body never leave the
  // origin they were sent to: another host's answer is not the Hub's.
  bool may_leave_origin = false;
  // Whether the token goes with it (to the Hub endpoint's origin only). Presigned storage URLs
  // (LFS PUTs, multipart parts) carry their own signature and must not get it.
  bool send_token = true;
};

struct HttpResponse {
  long status = 0;    // 0: no HTTP answer (connection refused, reset, timeout)
  std::string error;  // libcurl's reason when status is 0 or the transfer broke
  Headers headers;
  std::string body;  // non-streamed bodies and error bodies (capped)
  std::string url;   // the URL that answered, after redirects
  // When a 3xx answer was not followed (another origin): why, and the status stays the 3xx.
  Headers first_headers;  // the Hub's own answer when it redirected (X-Repo-Commit, X-Linked-*)
  uint64_t streamed_bytes = 0;
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
  // A streamed 2xx answer starts: called before its first on_body().
  virtual void on_stream_start(long /*status*/, const Headers& /*headers*/) {}
  // Body bytes of a 2xx answer as they arrive; false aborts the transfer.
  virtual bool on_body(std::string_view) { return true; }
  // The attempt finished (redirects already followed). Return nothing when the exchange is over,
  // or how long to wait before request() is asked again.
  virtual std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) = 0;
};

struct HttpOptions {
  std::string endpoint;  // e.g. https://huggingface.co: its origin is the only one given the token
  std::string token;
  std::string user_agent = std::string("neuron-cache/") + kVersion;
  std::chrono::seconds connect_timeout{10};
  // A transfer that moves less than 1 byte/s for this long is considered dead.
  std::chrono::seconds stall_timeout{60};
  int max_redirects = 5;
};

// Counts what went over the wire, for tests, reports and benchmarks.
struct HttpStats {
  uint64_t requests = 0;
  uint64_t retries = 0;
  uint64_t bytes_down = 0;
  uint64_t bytes_up = 0;
};

class HttpEngine {
 public:
  explicit HttpEngine(HttpOptions options);
  ~HttpEngine();
  HttpEngine(const HttpEngine&) = delete;
  HttpEngine& operator=(const HttpEngine&) = delete;

  // Runs every exchange to its end, at most `parallel` HTTP transfers at once.
  void run(const std::vector<Exchange*>& exchanges, size_t parallel);
  // One request with a buffered body; redirects followed, no retries.
  HttpResponse perform(const HttpRequest& request);

  const HttpStats& stats() const { return stats_; }
  const HttpOptions& options() const { return options_; }
  // Called with the byte count of every chunk received or sent (for progress display).
  std::function<void(uint64_t down, uint64_t up)> on_progress;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HttpOptions options_;
  HttpStats stats_;
};

// scheme://host[:port] of a URL, lowercased; empty when it has none (a relative URL).
std::string origin_of(std::string_view url);
// The absolute URL of a redirect `location` received from `base`.
std::string resolve_location(std::string_view base, std::string_view location);
// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string url_encode(std::string_view text, bool keep_slash);

}  // namespace neuron_cache::hub
