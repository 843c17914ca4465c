#include "neuron_cache/net/http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <exception>
#include <list>

#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/net/tls_trust.h"
#include "neuron_cache/sys/duration.h"

namespace neuron_cache::net {
namespace {

using Clock = std::chrono::steady_clock;

// libcurl's receive buffer for a streamed body (its limit is 512 KiB).
constexpr long kStreamBuffer = 256L << 10;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool has_body(const HttpRequest& r) {
  return r.upload_fd >= 0 || !r.body.empty() || (r.method != "GET" && r.method != "HEAD");
}

// Why a redirect from `r` to `target` is not followed, or nothing when it may be.
std::optional<std::string> refused_redirect(const HttpRequest& r, const std::string& target) {
  if (url::origin_of(target) == url::origin_of(r.url)) return std::nullopt;
  std::string where =
      "redirected to another host (" + printable(url::origin_of(target)) + "), not followed: ";
  if (has_body(r)) return where + "a request with a body is never re-sent to another host";
  if (!r.may_leave_origin) return where + "only file downloads may leave the endpoint's origin";
  return std::nullopt;
}

void ensure_curl_global() {
  static const CURLcode initialised = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (initialised != CURLE_OK) throw operational_error("libcurl could not be initialised");
}

// One HTTP attempt in flight: the exchange it serves and its libcurl state.
struct Transfer {
  Exchange* exchange = nullptr;
  HttpRequest request;
  HttpResponse response;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  int redirects = 0;
  std::string chain_origin;  // where the first request of its redirect chain went
  int status_checked = 0;    // 1: streaming to the exchange, 2: buffering
  uint64_t uploaded = 0;
  bool aborted = false;
  HttpEngine* engine = nullptr;
  std::function<void(uint64_t, uint64_t)>* progress = nullptr;
  HttpStats* stats = nullptr;
  // What a callback threw: libcurl is C and must never see an exception, so the callback stores
  // it, aborts the transfer, and run() rethrows it once curl has returned.
  std::exception_ptr failure;
  Clock::time_point started = Clock::now();
  Clock::time_point last_sent = started;     // when request body bytes last went out
  std::chrono::milliseconds answer_wait{0};  // HttpEngine::answer_wait, decided when it started
  bool answered = false;                     // a header line of the answer arrived
  bool timed_out = false;                    // no answer within the answer timeout
  bool overdue = false;                      // a buffered answer not whole by its deadline

  ~Transfer() {
    if (header_list != nullptr) curl_slist_free_all(header_list);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

size_t read_header(Transfer* t, std::string_view line) {
  t->answered = true;
  if (line.starts_with("HTTP/")) {
    t->response.headers.items.clear();  // a new response (after 100 Continue)
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->response.headers.items.emplace_back(trim(line.substr(0, colon)),
                                           trim(line.substr(colon + 1)));
  }
  return line.size();
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  try {
    return read_header(t, std::string_view(data, size * count));
  } catch (...) {
    t->failure = std::current_exception();
    return 0;  // any other count than the one given aborts the transfer
  }
}

size_t write_body(Transfer* t, char* data, size_t bytes) {
  if (t->status_checked == 0) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    bool stream = status >= 200 && status < 300 && t->exchange->streams_body();
    t->status_checked = stream ? 1 : 2;
    if (stream) t->exchange->on_stream_start(status, t->response.headers);
  }
  t->stats->bytes_down += bytes;
  if (*t->progress) (*t->progress)(bytes, 0);
  if (t->status_checked == 1) {
    t->response.streamed_bytes += bytes;
    meter().add_bytes(bytes);  // file content only: API answers are not what a user waits for
    if (!t->exchange->on_body(std::string_view(data, bytes))) {
      t->aborted = true;
      return 0;
    }
    return bytes;
  }
  if (t->response.body.size() + bytes > t->request.max_answer_bytes) {
    t->response.too_large = true;
    t->response.body.clear();
    return 0;
  }
  t->response.body.append(data, bytes);
  return bytes;
}

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  try {
    return write_body(t, data, size * count);
  } catch (...) {
    t->failure = std::current_exception();
    return 0;
  }
}

size_t read_upload(Transfer* t, char* buffer, size_t room) {
  uint64_t left = t->request.upload_length - t->uploaded;
  size_t want = static_cast<size_t>(std::min<uint64_t>(left, room));
  if (want == 0) return 0;
  ssize_t n = pread(t->request.upload_fd, buffer, want,
                    static_cast<off_t>(t->request.upload_offset + t->uploaded));
  if (n < 0) return CURL_READFUNC_ABORT;
  t->last_sent = Clock::now();
  t->uploaded += static_cast<uint64_t>(n);
  t->stats->bytes_up += static_cast<uint64_t>(n);
  meter().add_bytes(static_cast<uint64_t>(n));
  if (*t->progress) (*t->progress)(0, static_cast<uint64_t>(n));
  return static_cast<size_t>(n);
}

size_t on_read(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  try {
    return read_upload(t, buffer, size * count);
  } catch (...) {
    t->failure = std::current_exception();
    return CURL_READFUNC_ABORT;
  }
}

// The debug log's line for one attempt: what was asked, what came back, how much, how long. No
// header is logged: they carry the token and the signature.
void log_attempt(const Transfer& t, const std::string& outcome) {
  if (!log::enabled()) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started);
  uint64_t down = t.response.streamed_bytes + t.response.body.size();
  uint64_t up = t.request.upload_fd >= 0 ? t.uploaded : t.request.body.size();
  std::string status = t.response.status != 0 ? std::to_string(t.response.status) : "no answer";
  if (!t.response.error.empty()) status += " (" + t.response.error + ")";
  log::debug("http", t.request.method + " " + url::loggable(t.request.url) + " -> " + status +
                         outcome + ", " + format::human_bytes(down) + " down, " +
                         format::human_bytes(up) + " up, " + std::to_string(ms.count()) + " ms");
}

}  // namespace

HttpOptions timed_options(std::string endpoint, std::chrono::milliseconds timeout) {
  HttpOptions http;
  http.endpoint = std::move(endpoint);
  http.connect_timeout = std::min(timeout, kMaxConnectTimeout);
  http.answer_timeout = timeout;
  http.unreachable_budget = timeout;
  http.answer_deadline = timeout * 8;
  return http;
}

std::optional<std::string> Headers::get(std::string_view name) const {
  std::string wanted = lower(name);
  for (const auto& [key, value] : items) {
    if (lower(key) == wanted) return value;
  }
  return std::nullopt;
}

// The multi handles of the engine: one per run() in progress, kept for the next run so its
// connections are reused.
struct HttpEngine::Impl {
  std::mutex mutex;
  std::vector<CURLM*> idle;
  ~Impl() {
    for (CURLM* multi : idle) curl_multi_cleanup(multi);
  }
  CURLM* take() {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        CURLM* multi = idle.back();
        idle.pop_back();
        return multi;
      }
    }
    CURLM* multi = curl_multi_init();
    if (multi == nullptr) throw operational_error("libcurl could not create a multi handle");
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 16L);
    return multi;
  }
  void give_back(CURLM* multi) {
    std::lock_guard lock(mutex);
    idle.push_back(multi);
  }
};

HttpEngine::HttpEngine(HttpOptions options)
    : impl_(std::make_unique<Impl>()), options_(std::move(options)) {
  ensure_curl_global();
  impl_->give_back(impl_->take());  // fails here, not at the first request
}

HttpEngine::~HttpEngine() = default;

namespace {

void configure(Transfer& t, const HttpOptions& options) {
  CURL* easy = t.easy;
  const HttpRequest& r = t.request;
  curl_easy_setopt(easy, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // The release runs on distributions that keep certificates elsewhere than its libcurl's Debian
  // default (Amazon Linux: /etc/pki/tls/certs/ca-bundle.crt).
  const TrustPaths& trust = trust_paths();
  if (!trust.file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, trust.file.c_str());
  if (!trust.dir.empty()) curl_easy_setopt(easy, CURLOPT_CAPATH, trust.dir.c_str());
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options.min_transfer_rate));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
  // Waiting to share a connection only pays where HTTP/2 can be negotiated (TLS): on plain
  // HTTP/1.1 it queues every transfer behind one connection.
  curl_easy_setopt(easy, CURLOPT_PIPEWAIT, r.url.starts_with("https://") ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  // A streamed body arrives in calls of up to this much: libcurl's default 16 KiB costs six
  // times the receive calls and file writes of curl's own 100 KiB.
  if (t.exchange != nullptr && t.exchange->streams_body()) {
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, kStreamBuffer);
  }
  if (r.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (r.upload_fd >= 0) {
    curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(easy, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(easy, CURLOPT_READDATA, &t);
    curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.upload_length));
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  } else if (r.method != "GET") {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  }
  for (const auto& header : r.headers)
    t.header_list = curl_slist_append(t.header_list, header.c_str());
  // The token goes to the endpoint's own origin only: never to a CDN, S3 or any redirect target.
  bool same_origin = url::origin_of(r.url) == url::origin_of(options.endpoint);
  std::string auth = "Authorization: Bearer " + options.token;
  if (same_origin && r.send_token && !options.token.empty()) {
    t.header_list = curl_slist_append(t.header_list, auth.c_str());
  }
  if (r.aws_sigv4) {
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, r.aws_sigv4->provider.c_str());
    curl_easy_setopt(easy, CURLOPT_USERNAME, r.aws_sigv4->key_id.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, r.aws_sigv4->secret.c_str());
  } else {
    // No 100-continue round trip. Not for SigV4: libcurl 7.88 puts a header removed this way
    // into the canonical request, and S3 refuses the signature (tests/s3/sigv4_proxy.py).
    t.header_list = curl_slist_append(t.header_list, "Expect:");
  }
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t.header_list);
}

// Whether libcurl never got a connection: nothing of the endpoint answered at all.
bool connect_failed(CURL* easy, CURLcode code, bool timed_out) {
  if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
      code == CURLE_COULDNT_RESOLVE_PROXY) {
    return true;
  }
  curl_off_t connected = 0;
  curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connected);
  // A reused connection has no connect time: an answer that started (a body that stalled after a
  // redirect within the endpoint) proves it was connected.
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return code == CURLE_OPERATION_TIMEDOUT && !timed_out && connected == 0 && status == 0;
}

// When a transfer that has had no answer yet gives up. A request body that is still going out
// keeps it alive (low-speed limit only), and its answer gets at least the stall timeout once sent.
Clock::time_point answer_deadline(const Transfer& t, const HttpOptions& options) {
  std::chrono::milliseconds wait = t.answer_wait;
  if (t.request.upload_fd >= 0) {
    wait = std::max<std::chrono::milliseconds>(wait, options.stall_timeout);
  }
  return t.last_sent + wait;
}

// When a buffered answer must be whole: a slow commit's own answer timeout extends it.
std::chrono::milliseconds buffered_deadline(const HttpRequest& request,
                                            const HttpOptions& options) {
  return std::max(
      options.answer_deadline,
      request.answer_timeout.value_or(std::chrono::milliseconds(0)) + options.answer_timeout);
}

}  // namespace

bool HttpEngine::to_endpoint(const HttpRequest& request) const {
  return !options_.endpoint.empty() &&
         url::origin_of(request.url) == url::origin_of(options_.endpoint);
}

std::string HttpEngine::unreachable() const {
  if (!gone_) return {};
  std::lock_guard lock(state_mutex_);
  return unreachable_;
}

void HttpEngine::look_again() {
  std::lock_guard lock(state_mutex_);
  unreachable_.clear();
  gone_ = false;
}

void HttpEngine::set_unreachable(std::string why) {
  if (unreachable_.empty()) unreachable_ = std::move(why);  // under state_mutex_
  gone_ = true;
}

std::chrono::milliseconds HttpEngine::answer_wait(const HttpRequest& request) const {
  std::chrono::milliseconds wait = request.answer_timeout.value_or(options_.answer_timeout);
  if (request.answer_timeout || !request.tells_reachability || !to_endpoint(request)) return wait;
  // A stall and its retry share one unreachable budget: the first attempt waits half of it, a
  // retry what is left since the first failed attempt was sent. A black-holed endpoint costs
  // the budget once; one transient stall is still retried within it.
  std::lock_guard lock(state_mutex_);
  auto budget = options_.unreachable_budget;
  if (!failing_since_) return std::min(wait, std::max(budget / 2, kMinAnswerWait));
  auto spent =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *failing_since_);
  return std::clamp(budget - spent, kMinAnswerWait, wait);
}

void HttpEngine::note_reachability(const HttpRequest& request, const HttpResponse& response,
                                   Clock::time_point sent) {
  if (gone_ || !request.tells_reachability || !to_endpoint(request)) return;
  std::lock_guard lock(state_mutex_);
  if (response.status != 0 && response.status < 500) {
    failing_since_.reset();  // the endpoint answered
    return;
  }
  std::string why =
      response.status == 0 ? response.error : "HTTP " + std::to_string(response.status);
  if (response.unreachable) {
    set_unreachable(url::origin_of(options_.endpoint) + " could not be reached (" + why + ")");
    return;
  }
  // The clock starts when the first failed attempt was sent: its stall is part of the budget
  // (answer_wait leaves a retry the rest of it).
  if (!failing_since_) failing_since_ = sent;
  auto failing =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *failing_since_);
  if (failing >= options_.unreachable_budget) {
    set_unreachable(url::origin_of(options_.endpoint) + " kept failing for " +
                    sys::duration_text(failing) + " (last: " + why + ")");
  }
}

bool HttpEngine::retry_fits(const HttpRequest& request, std::chrono::milliseconds delay) {
  if (gone_) return false;
  std::lock_guard lock(state_mutex_);
  if (!failing_since_ || !request.tells_reachability || !to_endpoint(request)) return true;
  auto failing =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *failing_since_);
  if (failing + delay <= options_.unreachable_budget) return true;
  set_unreachable(url::origin_of(options_.endpoint) + " kept failing for " +
                  sys::duration_text(failing) + ", and the next retry would be past the " +
                  sys::duration_text(options_.unreachable_budget) + " allowed");
  return false;
}

void HttpEngine::note_quota(const HttpRequest& request, const HttpResponse& response) {
  if (response.status == 429) ++stats_.rate_limited;
  if (!to_endpoint(request)) return;
  std::optional<QuotaPause> pause = quota_pause(request, response);
  if (!pause) return;
  auto until = Clock::now() + pause->wait;
  std::lock_guard lock(state_mutex_);
  auto& paused = paused_until_[pause->bucket];
  if (until <= paused) return;
  if (paused < Clock::now()) {  // a new pause, not one pushed further: said once
    log::debug("http", "the " + printable(pause->bucket) + " quota of " +
                           url::origin_of(options_.endpoint) + " is used up (HTTP " +
                           std::to_string(response.status) + "): its requests wait " +
                           sys::duration_text(pause->wait) + " for the reset");
  }
  paused = until;
}

std::optional<Clock::time_point> HttpEngine::paused(const HttpRequest& request) {
  if (!to_endpoint(request)) return std::nullopt;
  std::vector<std::string> buckets = quota_buckets(request);
  auto now = Clock::now();
  std::lock_guard lock(state_mutex_);
  std::optional<Clock::time_point> latest;
  for (const std::string& bucket : buckets) {
    auto found = paused_until_.find(bucket);
    if (found != paused_until_.end() && found->second > now)
      latest = std::max(latest.value_or(now), found->second);
  }
  return latest;
}

// One call of HttpEngine::run: the exchanges waiting for a slot (or for their retry time), the
// transfers in the curl multi handle, and the steps that move an exchange from one to the other.
class HttpEngine::Run {
 public:
  Run(HttpEngine& engine, const std::vector<Exchange*>& exchanges, size_t parallel)
      : engine_(engine), multi_(engine.impl_->take()), parallel_(std::max<size_t>(parallel, 1)) {
    for (Exchange* e : exchanges) waiting_.push_back({e, Clock::now(), {}, {}, {}, 0, false});
  }
  // Whatever leaves the run early (an exception from an exchange or a callback) first takes the
  // transfers still running out of the multi handle, before they are freed; the handle goes back
  // to the pool so its connections are reused.
  ~Run() {
    for (auto& t : active_) curl_multi_remove_handle(multi_, t->easy);
    active_.clear();
    engine_.impl_->give_back(multi_);
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  void until_done() {
    while (!waiting_.empty() || !active_.empty()) {
      start_ready();
      int running = 0;
      curl_multi_perform(multi_, &running);
      finish_done();
      end_unanswered();
      wait_for_activity();
    }
  }

 private:
  struct Waiting {
    Exchange* exchange;
    Clock::time_point ready_at;
    // The request to send when `prepared`: a redirect to follow, or one a quota pause held back.
    HttpRequest redirected;
    Headers origin_headers;
    std::string chain_origin;
    int redirects = 0;
    bool prepared = false;
  };

  // Starts the waiting exchanges that are ready, while a slot is free.
  void start_ready() {
    auto now = Clock::now();
    std::vector<Waiting> held;  // by a quota pause: queued again once the loop is over
    for (auto it = waiting_.begin(); it != waiting_.end() && active_.size() < parallel_;) {
      if (it->exchange->given_up()) {
        it = waiting_.erase(it);  // over without a request: nothing it could fetch is wanted
      } else if (it->ready_at <= now || engine_.gone_) {
        Waiting w = std::move(*it);
        it = waiting_.erase(it);
        start(w, held);
      } else {
        ++it;
      }
    }
    for (Waiting& w : held) waiting_.push_back(std::move(w));
  }

  void start(Waiting& w, std::vector<Waiting>& held) {
    HttpRequest request = w.prepared ? std::move(w.redirected) : w.exchange->request();
    if (engine_.gone_ && engine_.to_endpoint(request)) return skip(w.exchange, request);
    if (auto until = engine_.paused(request)) {
      // Sent as it is once the quota resets: the request is kept, not asked for again.
      ++engine_.stats_.quota_waits;
      std::string origin = w.prepared ? w.chain_origin : url::origin_of(request.url);
      held.push_back({w.exchange, *until, std::move(request), std::move(w.origin_headers),
                      std::move(origin), w.redirects, true});
      return;
    }
    auto t = std::make_unique<Transfer>();
    t->exchange = w.exchange;
    t->request = std::move(request);
    t->redirects = w.redirects;
    t->response.origin_headers = std::move(w.origin_headers);
    t->chain_origin = w.prepared ? std::move(w.chain_origin) : url::origin_of(t->request.url);
    t->engine = &engine_;
    t->answer_wait = engine_.answer_wait(t->request);
    t->progress = &engine_.on_progress;
    t->stats = &engine_.stats_;
    t->easy = curl_easy_init();
    if (t->easy == nullptr) throw operational_error("libcurl could not create a transfer");
    configure(*t, engine_.options_);
    curl_multi_add_handle(multi_, t->easy);
    ++engine_.stats_.requests;
    active_.push_back(std::move(t));
  }

  // An exchange whose request goes to an endpoint found unreachable: answered here, without a
  // request.
  void skip(Exchange* exchange, const HttpRequest& request) {
    HttpResponse response;
    response.url = request.url;
    response.unreachable = true;
    response.error =
        "not sent: " + engine_.unreachable() + "; no request to it is made for the rest of the run";
    log::debug("http", request.method + " " + url::loggable(request.url) + " -> " + response.error);
    exchange->on_complete(response);  // not transient: no retry is asked for
  }

  // The transfers curl says are over, each finished.
  void finish_done() {
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      Transfer* raw = nullptr;
      curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &raw);
      CURLcode code = message->data.result;
      curl_multi_remove_handle(multi_, message->easy_handle);
      auto owned = std::find_if(active_.begin(), active_.end(),
                                [&](const auto& t) { return t.get() == raw; });
      std::unique_ptr<Transfer> t = std::move(*owned);
      active_.erase(owned);
      finish(*t, code);
    }
  }

  void finish(Transfer& t, CURLcode code) {
    if (t.failure) std::rethrow_exception(t.failure);
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.response.status);
    t.response.url = t.request.url;
    if (code != CURLE_OK) describe_failure(t, code);
    if (code == CURLE_OK && redirected(t)) return;
    if (url::origin_of(t.request.url) == t.chain_origin) t.response.origin_headers.items.clear();
    if (!t.aborted) engine_.note_reachability(t.request, t.response, t.started);
    engine_.note_quota(t.request, t.response);
    if (engine_.gone_ && engine_.to_endpoint(t.request) && t.request.tells_reachability &&
        !t.response.unreachable && (t.response.status == 0 || t.response.status >= 500)) {
      // The failure that decided it: the exchange must not ask for another try.
      t.response.unreachable = true;
      t.response.error += (t.response.error.empty() ? "" : "; ") + engine_.unreachable();
    }
    std::optional<std::chrono::milliseconds> retry_in = t.exchange->on_complete(t.response);
    log_attempt(t, retry_in ? ", asked again in " + std::to_string(retry_in->count()) + " ms" : "");
    if (!retry_in) return;
    ++engine_.stats_.retries;
    // Past the budget, the retry is not waited for: it is answered at once as unreachable.
    Clock::time_point at =
        engine_.retry_fits(t.request, *retry_in) ? Clock::now() + *retry_in : Clock::now();
    waiting_.push_back({t.exchange, at, {}, {}, {}, 0, false});
  }

  // The response's error for a transfer that ended without a whole answer.
  void describe_failure(Transfer& t, CURLcode code) const {
    const HttpOptions& options = engine_.options_;
    t.response.error = curl_easy_strerror(code);
    if (t.aborted) t.response.error = "aborted by the receiver";
    if (t.timed_out) t.response.error = "no answer within " + sys::duration_text(t.answer_wait);
    if (t.overdue) {
      t.response.error = "the answer was not whole within " +
                         sys::duration_text(buffered_deadline(t.request, options)) +
                         " (it kept trickling in)";
    }
    if (t.response.too_large) {
      t.response.error = "the answer is larger than the " +
                         std::to_string(t.request.max_answer_bytes) +
                         " bytes an answer of its kind may have";
    }
    t.response.unreachable =
        engine_.to_endpoint(t.request) && connect_failed(t.easy, code, t.timed_out);
    // A streamed body that broke mid-way keeps its status so the exchange can resume.
    if (t.response.status != 0 && t.status_checked != 1 && !t.response.too_large)
      t.response.status = 0;
  }

  // True when the answer is a redirect this run follows (queued first); a refused or excessive
  // one leaves its reason in the response, which the exchange then sees.
  bool redirected(Transfer& t) {
    auto location = t.response.headers.get("Location");
    if (!is_redirect(t.response.status) || !location) return false;
    if (t.redirects >= engine_.options_.max_redirects) {
      t.response.error = "too many redirects";
      return false;
    }
    std::string target = url::resolve_location(t.request.url, *location);
    if (auto refused = refused_redirect(t.request, target)) {
      t.response.error = *refused;  // the exchange sees the 3xx itself, not the other host
      return false;
    }
    log_attempt(t, ", redirected to " + url::loggable(target));
    follow(t, std::move(target));
    return true;
  }

  void follow(Transfer& t, std::string target) {
    HttpRequest next = t.request;
    next.url = std::move(target);
    if (t.response.status == 303) {
      next.method = next.method == "HEAD" ? "HEAD" : "GET";
      next.body.clear();  // 303: See Other, fetched without the body
      next.upload_fd = -1;
    }
    // The origin's last word before the chain leaves it: a Hub redirects within itself first
    // (/api/resolve-cache/...) and only then to its CDN.
    bool from_origin = url::origin_of(t.request.url) == t.chain_origin;
    Headers origin = from_origin ? t.response.headers : t.response.origin_headers;
    waiting_.push_front({t.exchange, Clock::now(), std::move(next), std::move(origin),
                         t.chain_origin, t.redirects + 1, true});
  }

  // Transfers still without an answer past their deadline are ended here: libcurl's own limits
  // cannot tell a server that never answers from a large transfer that is progressing slowly.
  void end_unanswered() {
    auto now = Clock::now();
    for (auto it = active_.begin(); it != active_.end();) {
      Transfer& t = **it;
      bool unanswered = !t.answered && now >= answer_deadline(t, engine_.options_);
      bool overdue = t.status_checked != 1 && t.request.upload_fd < 0 &&
                     now >= t.started + buffered_deadline(t.request, engine_.options_);
      if (!unanswered && !overdue) {
        ++it;
        continue;
      }
      t.timed_out = unanswered;
      t.overdue = overdue && !unanswered;
      curl_multi_remove_handle(multi_, t.easy);
      std::unique_ptr<Transfer> owned = std::move(*it);
      it = active_.erase(it);
      finish(*owned, CURLE_OPERATION_TIMEDOUT);
    }
  }

  // A waiting exchange shortens the wait only when it could start: with every slot taken, what
  // comes next is a transfer's socket activity, which ends the poll. (Counting the exchanges
  // queued for a slot, ready since the start, made every poll return at once: a push of 824
  // files spun a core in this loop, a third of its CPU time in clock_gettime.)
  void wait_for_activity() {
    int wait_ms = 100;
    if (active_.size() < parallel_) {
      auto after = Clock::now();
      for (const auto& w : waiting_) {
        auto until = std::chrono::duration_cast<std::chrono::milliseconds>(w.ready_at - after);
        wait_ms = std::clamp(static_cast<int>(until.count()), 0, wait_ms);
      }
    }
    if (!active_.empty()) {
      curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
    } else if (wait_ms > 0 && !waiting_.empty()) {
      usleep(static_cast<useconds_t>(wait_ms) * 1000);
    }
  }

  HttpEngine& engine_;
  CURLM* multi_;
  size_t parallel_;
  std::deque<Waiting> waiting_;
  std::list<std::unique_ptr<Transfer>> active_;
};

void HttpEngine::run(const std::vector<Exchange*>& exchanges, size_t parallel) {
  Run(*this, exchanges, parallel).until_done();
}

namespace {

class BufferedExchange : public Exchange {
 public:
  explicit BufferedExchange(HttpRequest request) : request_(std::move(request)) {}
  HttpRequest request() override { return request_; }
  std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) override {
    response_ = response;
    return std::nullopt;
  }
  HttpResponse response_;

 private:
  HttpRequest request_;
};

}  // namespace

HttpResponse HttpEngine::perform(const HttpRequest& request) {
  BufferedExchange exchange(request);
  run({&exchange}, 1);
  return exchange.response_;
}

}  // namespace neuron_cache::net
