#include "proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <thread>

namespace neuron_cache::s3_proxy {
namespace {

using nlohmann::json;

constexpr size_t kPipeBytes = 8 << 20;  // body bytes buffered between upstream and client
constexpr int kUpstreamTimeoutSeconds = 120;
constexpr int kWorkerThreads = 32;  // hanging requests hold one each

// Headers that describe one hop, or that httplib adds itself: never forwarded as they came.
bool hop_header(const std::string& name) {
  static const char* kHop[] = {
      "Connection", "Keep-Alive",  "Proxy-Connection", "Transfer-Encoding", "Content-Length", "TE",
      "Upgrade",    "REMOTE_ADDR", "REMOTE_PORT",      "LOCAL_ADDR",        "LOCAL_PORT"};
  for (const char* hop : kHop) {
    if (strcasecmp(name.c_str(), hop) == 0) return true;
  }
  return false;
}

std::string raw_path(const httplib::Request& request) {
  return request.target.substr(0, request.target.find('?'));
}

std::string raw_query(const httplib::Request& request) {
  size_t mark = request.target.find('?');
  return mark == std::string::npos ? std::string() : request.target.substr(mark + 1);
}

std::unique_ptr<httplib::Client> upstream_client(const std::string& upstream) {
  auto client = std::make_unique<httplib::Client>(upstream);
  client->set_url_encode(false);  // the raw path, as the client signed it
  client->set_decompress(false);
  client->set_keep_alive(false);
  client->set_connection_timeout(5, 0);
  client->set_read_timeout(kUpstreamTimeoutSeconds, 0);
  client->set_write_timeout(kUpstreamTimeoutSeconds, 0);
  return client;
}

httplib::Request upstream_request(const httplib::Request& request,
                                  const std::optional<Fault>& fault) {
  httplib::Request out;
  out.method = request.method;
  out.path = request.target;
  for (const auto& [name, value] : request.headers) {
    if (!hop_header(name)) out.headers.emplace(name, value);
  }
  out.body = request.body;
  if (fault && fault->action == FaultAction::CorruptUpload) {  // changed on its way
    for (uint64_t at = fault->offset; at < fault->offset + fault->length && at < out.body.size();
         ++at)
      out.body[at] = static_cast<char>(out.body[at] ^ 0xFF);
  }
  return out;
}

// The client's connection, found by its ports, shut down: an answer that never comes.
void drop_connection(const httplib::Request& request) {
  for (int fd = 3; fd < 65536; ++fd) {
    sockaddr_in6 local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) continue;
    auto port_of = [](const sockaddr_in6& address) {
      return ntohs(address.sin6_family == AF_INET
                       ? reinterpret_cast<const sockaddr_in&>(address).sin_port
                       : address.sin6_port);
    };
    if (port_of(local) == request.local_port && port_of(peer) == request.remote_port) {
      shutdown(fd, SHUT_RDWR);
      return;
    }
  }
}

std::string strip_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// Body bytes on their way from the upstream thread to the client's worker.
struct Pipe {
  std::mutex mutex;
  std::condition_variable changed;
  bool have_head = false, done = false, cancelled = false, failed = false;
  int status = 0;
  httplib::Headers headers;
  std::deque<std::string> chunks;
  size_t buffered = 0;

  // The next chunk, or nothing at the end (`failed` tells whether the upstream broke off).
  std::optional<std::string> next() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return !chunks.empty() || done; });
    if (chunks.empty()) return std::nullopt;
    std::string chunk = std::move(chunks.front());
    chunks.pop_front();
    buffered -= chunk.size();
    changed.notify_all();
    return chunk;
  }
};

// Applies a body fault to the bytes [sent, sent + chunk.size()) of the answer; false when the
// connection must close after them (short).
bool shape_chunk(std::string& chunk, uint64_t sent, uint64_t total,
                 const std::optional<Fault>& fault) {
  if (!fault) return true;
  if (fault->action == FaultAction::Corrupt) {
    uint64_t first = fault->offset, last = fault->offset + fault->length;
    for (uint64_t at = std::max(first, sent); at < std::min(last, sent + chunk.size()); ++at) {
      chunk[at - sent] = static_cast<char>(chunk[at - sent] ^ 0xFF);
    }
  }
  if (fault->action == FaultAction::Short || fault->action == FaultAction::Cut) {
    uint64_t limit = fault->bytes.value_or(total / 2);
    if (sent + chunk.size() >= limit) {
      chunk.resize(limit > sent ? limit - sent : 0);
      return fault->action == FaultAction::Cut;  // cut: the answer is whole as announced
    }
  }
  return true;
}

// The Content-Length an answer of `total` bytes announces under `fault`.
uint64_t announced_length(uint64_t total, const std::optional<Fault>& fault) {
  if (!fault || fault->action != FaultAction::Cut) return total;
  return std::min(total, fault->bytes.value_or(total / 2));
}

bool has_body_fault(const std::optional<Fault>& fault) {
  return fault && (fault->action == FaultAction::Short || fault->action == FaultAction::Cut ||
                   fault->action == FaultAction::Corrupt);
}

// Sends `total` body bytes pulled from `next` through a content provider, shaped by `fault`.
void provide_body(httplib::Response& response, uint64_t total, const std::string& content_type,
                  std::function<std::optional<std::string>()> next,
                  const std::optional<Fault>& fault, std::function<void(bool)> release) {
  auto sent = std::make_shared<uint64_t>(0);
  response.set_content_provider(
      static_cast<size_t>(announced_length(total, fault)), content_type,
      [next, fault, sent, total](size_t, size_t, httplib::DataSink& sink) {
        std::optional<std::string> chunk = next();
        if (!chunk) return false;  // the upstream broke off: so does this answer
        bool go_on = shape_chunk(*chunk, *sent, total, fault);
        if (!chunk->empty() && !sink.write(chunk->data(), chunk->size())) return false;
        *sent += chunk->size();
        return go_on;
      },
      std::move(release));
}

void copy_answer_headers(const httplib::Headers& from, httplib::Response& response, bool bodiless) {
  for (const auto& [name, value] : from) {
    // A body's length and type are set with the body; a bodiless answer (HEAD) keeps them.
    bool length = strcasecmp(name.c_str(), "Content-Length") == 0;
    if (length || strcasecmp(name.c_str(), "Content-Type") == 0) {
      if (bodiless) response.set_header(name, value);
      continue;
    }
    if (!hop_header(name)) response.headers.emplace(name, value);
  }
}

thread_local std::string current_fault;

}  // namespace

void Stats::count(const std::string& method) {
  std::lock_guard lock(mutex_);
  ++methods_[method];
}

void Stats::log(const std::string& method, const std::string& path, const std::string& query,
                int status, const std::string& fault) {
  std::lock_guard lock(mutex_);
  log_.push_back({{"method", method},
                  {"path", path},
                  {"query", query},
                  {"status", status},
                  {"fault", fault.empty() ? json() : json(fault)}});
}

json Stats::describe() const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const auto& [method, count] : methods_) total += count;
  return {{"requests", total}, {"methods", methods_}, {"log", log_}};
}

void Stats::clear() {
  std::lock_guard lock(mutex_);
  methods_.clear();
  log_ = json::array();
}

Proxy::Proxy(Options options) : options_(std::move(options)) {
  if (options_.host != "127.0.0.1") {
    throw std::invalid_argument("s3-proxy listens on 127.0.0.1 only (a test tool)");
  }
  server_.new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  server_.set_read_timeout(kUpstreamTimeoutSeconds, 0);
  server_.set_write_timeout(kUpstreamTimeoutSeconds, 0);
  server_.set_payload_max_length(uint64_t(8) << 30);
  routes();
}

int Proxy::bind() {
  port_ = options_.port == 0
              ? server_.bind_to_any_port(options_.host)
              : (server_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) throw std::runtime_error("cannot listen on " + options_.host);
  return port_;
}

void Proxy::run() {
  server_.listen_after_bind();
}

void Proxy::stop() {
  stopping_ = true;
  server_.stop();
}

void Proxy::routes() {
  auto json_answer = [](httplib::Response& response, const json& body, int status = 200) {
    response.status = status;
    response.set_content(body.dump(), "application/json");
  };
  server_.Get("/__proxy/stats", [this, json_answer](const httplib::Request&, httplib::Response& r) {
    json_answer(r, stats_.describe());
  });
  server_.Delete("/__proxy/stats",
                 [this, json_answer](const httplib::Request&, httplib::Response& r) {
                   stats_.clear();
                   json_answer(r, json::object());
                 });
  server_.Get("/__proxy/faults",
              [this, json_answer](const httplib::Request&, httplib::Response& r) {
                json_answer(r, faults_.describe());
              });
  server_.Delete("/__proxy/faults",
                 [this, json_answer](const httplib::Request&, httplib::Response& r) {
                   faults_.clear();
                   json_answer(r, json::array());
                 });
  server_.Post("/__proxy/faults",
               [this, json_answer](const httplib::Request& request, httplib::Response& r) {
                 try {
                   faults_.set(json::parse(request.body));
                   json_answer(r, faults_.describe());
                 } catch (const std::exception& error) {
                   json_answer(r, {{"error", error.what()}}, 400);
                 }
               });
  auto forward = [this](const httplib::Request& request, httplib::Response& response) {
    handle(request, response);
  };
  server_.Get(".*", forward);  // and HEAD: httplib routes it to the GET handlers
  server_.Put(".*", forward);
  server_.Post(".*", forward);
  server_.Delete(".*", forward);
  server_.Options(".*", forward);
  server_.Patch(".*", forward);
}

void Proxy::apply_status(const httplib::Request& request, httplib::Response& response,
                         const Fault& fault) {
  response.status = fault.status;
  for (const auto& [name, value] : fault.headers.items()) {
    response.set_header(name, value.is_string() ? value.get<std::string>() : value.dump());
  }
  if (request.method == "HEAD") return;
  response.set_content(
      fault.body.value_or(s3_error_xml(fault.code, fault.message, raw_path(request))),
      "application/xml");
}

void Proxy::handle(const httplib::Request& request, httplib::Response& response) {
  stats_.count(request.method);
  // The answer is the upstream's (which already applied the Range) or a whole injected error:
  // httplib must not cut it again by the request's Range (a 416, or a truncated 503).
  const_cast<httplib::Request&>(request).ranges.clear();
  std::optional<Fault> fault = faults_.take(request.method, request.path, raw_query(request));
  std::string fault_name = fault ? fault->name() : "";
  auto log = [&](int status) {
    stats_.log(request.method, raw_path(request), raw_query(request), status, fault_name);
  };
  if (fault && fault->action == FaultAction::Delay) {
    std::this_thread::sleep_for(std::chrono::milliseconds(fault->ms));
  }
  if (fault && fault->action == FaultAction::Hang) {
    log(0);
    while (!stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return;
  }
  if (fault && fault->action == FaultAction::Drop) {
    log(0);
    drop_connection(request);
    return;
  }
  if (fault && fault->action == FaultAction::Lose) {
    // The request takes effect upstream; its answer never reaches the client.
    forward_buffered(request, response, std::nullopt);
    log(0);
    drop_connection(request);
    return;
  }
  if (fault && fault->action == FaultAction::Status) {
    apply_status(request, response, *fault);
    log(response.status);
    return;
  }
  bool ok = request.method == "GET" ? forward_streamed(request, response, fault)
                                    : forward_buffered(request, response, fault);
  if (!ok) {
    response.status = 502;
    response.set_content(
        s3_error_xml("BadGateway", "the upstream S3 server did not answer", raw_path(request)),
        "application/xml");
  }
  log(response.status);
}

bool Proxy::refuse_conditional_write(const httplib::Request& request, httplib::Response& response) {
  bool none_match = request.has_header("If-None-Match");
  bool match = request.has_header("If-Match");
  if (!none_match && !match) return false;
  // s3rver allows anonymous reads, so the check needs no signature of its own.
  auto client = upstream_client(options_.upstream);
  auto head = client->Head(raw_path(request).c_str());
  if (!head) {
    response.status = 503;
    response.set_content(
        s3_error_xml("SlowDown", "s3-proxy could not check the condition", raw_path(request)),
        "application/xml");
    return true;
  }
  bool exists = head->status == 200;
  std::string etag = strip_etag(head->get_header_value("ETag"));
  auto refuse = [&](int status, const std::string& code, const std::string& message) {
    response.status = status;
    response.set_content(s3_error_xml(code, message, raw_path(request)), "application/xml");
    return true;
  };
  if (none_match && request.get_header_value("If-None-Match") == "*" && exists) {
    return refuse(412, "PreconditionFailed",
                  "At least one of the pre-conditions you specified did not hold");
  }
  if (match) {
    if (!exists) return refuse(404, "NoSuchKey", "The specified key does not exist.");
    if (strip_etag(request.get_header_value("If-Match")) != etag) {
      return refuse(412, "PreconditionFailed",
                    "At least one of the pre-conditions you specified did not hold");
    }
  }
  return false;
}

bool Proxy::forward_buffered(const httplib::Request& request, httplib::Response& response,
                             const std::optional<Fault>& fault) {
  // Writes that replace an object (PUT without uploadId: PutObject, CopyObject; POST with
  // uploadId: CompleteMultipartUpload) and deletes are serialized, conditional or not.
  bool upload_part = request.method == "PUT" && request.has_param("uploadId");
  bool object_write = (request.method == "PUT" && !upload_part) ||
                      (request.method == "POST" && request.has_param("uploadId"));
  std::unique_lock lock(write_mutex_, std::defer_lock);
  if (object_write || request.method == "DELETE") lock.lock();
  if (object_write && refuse_conditional_write(request, response)) return true;

  auto client = upstream_client(options_.upstream);
  httplib::Request out = upstream_request(request, fault);
  httplib::Response answer;
  httplib::Error error = httplib::Error::Success;
  if (!client->send(out, answer, error)) return false;
  response.status = answer.status;
  bool bodiless = request.method == "HEAD" || answer.status == 204 || answer.status == 304;
  copy_answer_headers(answer.headers, response, bodiless);
  if (bodiless) return true;
  std::string content_type = answer.get_header_value("Content-Type");
  if (has_body_fault(fault) && !answer.body.empty()) {
    auto body = std::make_shared<std::optional<std::string>>(std::move(answer.body));
    uint64_t total = (*body)->size();
    provide_body(
        response, total, content_type,
        [body] {
          std::optional<std::string> chunk = std::move(*body);
          body->reset();
          return chunk;
        },
        fault, nullptr);
    return true;
  }
  if (content_type.empty()) {
    response.body = std::move(answer.body);
  } else {
    response.set_content(std::move(answer.body), content_type);
  }
  return true;
}

bool Proxy::forward_streamed(const httplib::Request& request, httplib::Response& response,
                             const std::optional<Fault>& fault) {
  auto pipe = std::make_shared<Pipe>();
  auto out = std::make_shared<httplib::Request>(upstream_request(request, fault));
  out->response_handler = [pipe](const httplib::Response& head) {
    std::lock_guard lock(pipe->mutex);
    pipe->status = head.status;
    pipe->headers = head.headers;
    pipe->have_head = true;
    pipe->changed.notify_all();
    return true;
  };
  out->content_receiver = [pipe](const char* data, size_t size, uint64_t, uint64_t) {
    std::unique_lock lock(pipe->mutex);
    pipe->changed.wait(lock, [&] { return pipe->buffered < kPipeBytes || pipe->cancelled; });
    if (pipe->cancelled) return false;
    pipe->chunks.emplace_back(data, size);
    pipe->buffered += size;
    pipe->changed.notify_all();
    return true;
  };
  std::string upstream = options_.upstream;
  std::thread([pipe, out, upstream] {
    auto client = upstream_client(upstream);
    httplib::Response answer;
    httplib::Error error = httplib::Error::Success;
    bool ok = client->send(*out, answer, error);
    std::lock_guard lock(pipe->mutex);
    pipe->failed = !ok;
    pipe->done = true;
    pipe->changed.notify_all();
  }).detach();

  {
    std::unique_lock lock(pipe->mutex);
    pipe->changed.wait(lock, [&] { return pipe->have_head || pipe->done; });
    if (!pipe->have_head) return false;
  }
  response.status = pipe->status;
  auto length_header = pipe->headers.find("Content-Length");
  copy_answer_headers(pipe->headers, response, false);
  auto cancel = [pipe](bool) {
    std::lock_guard lock(pipe->mutex);
    pipe->cancelled = true;
    pipe->changed.notify_all();
  };
  std::string content_type;
  if (auto type = pipe->headers.find("Content-Type"); type != pipe->headers.end()) {
    content_type = type->second;
  }
  auto next = [pipe] { return pipe->next(); };
  if (length_header != pipe->headers.end()) {
    uint64_t total = std::stoull(length_header->second);
    if (total == 0) {
      response.set_content("", content_type);
      cancel(true);
      return true;
    }
    provide_body(response, total, content_type, next, fault, cancel);
    return true;
  }
  // No length from the upstream: chunked, faults apply the same way.
  auto sent = std::make_shared<uint64_t>(0);
  response.set_chunked_content_provider(
      content_type,
      [next, fault, sent](size_t, httplib::DataSink& sink) {
        std::optional<std::string> chunk = next();
        if (!chunk) {
          sink.done();
          return true;
        }
        bool go_on = shape_chunk(*chunk, *sent, 0, fault);
        if (!chunk->empty() && !sink.write(chunk->data(), chunk->size())) return false;
        *sent += chunk->size();
        return go_on;
      },
      cancel);
  return true;
}

}  // namespace neuron_cache::s3_proxy
