#include "server.h"

#include <sys/stat.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "hash.h"
#include "text.h"

namespace neuron_cache::hub_server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Per-request counters, kept per thread: httplib serves a request (handler, body writes, logger
// call) on one worker thread.
struct RequestStats {
  bool active = false;    // counted in active_requests_
  uint64_t sequence = 0;  // arrival order, which the access log keeps
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::string fault;
};
thread_local RequestStats t_stats;

constexpr size_t kChunk = 64 * 1024;

const char* listener_name(Listener listener) {
  return listener == Listener::Hub ? "hub" : "cdn";
}

std::string random_secret() {
  std::random_device device;
  std::string seed;
  for (int i = 0; i < 8; ++i) seed += std::to_string(device());
  return sha256_hex(seed);
}

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return text;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct BodySource {
  std::shared_ptr<const std::string> text;
  std::shared_ptr<FILE> file;
  uint64_t file_offset = 0;
};

// Streams the body in chunks, applying a response fault on the way: drop_after stops (httplib
// then closes the connection), corrupt flips one byte, trickle paces the writes.
httplib::ContentProvider make_provider(BodySource source, std::optional<Fault> fault) {
  return [source, fault](size_t offset, size_t length, httplib::DataSink& sink) {
    uint64_t chunk = std::min<uint64_t>(length, kChunk);
    if (fault && fault->action == FaultAction::DropAfter) {
      if (offset >= fault->bytes) return false;
      chunk = std::min<uint64_t>(chunk, fault->bytes - offset);
    }
    if (fault && fault->action == FaultAction::Trickle) {
      chunk = std::min<uint64_t>(chunk, std::max<uint64_t>(1, fault->bytes_per_second / 20));
    }
    std::string buffer(chunk, '\0');
    if (source.text) {
      buffer.assign(*source.text, offset, chunk);
    } else {
      FILE* file = source.file.get();
      if (fseeko(file, static_cast<off_t>(source.file_offset + offset), SEEK_SET) != 0 ||
          fread(buffer.data(), 1, chunk, file) != chunk) {
        return false;
      }
    }
    if (fault && fault->action == FaultAction::Corrupt && fault->offset >= offset &&
        fault->offset < offset + chunk) {
      buffer[fault->offset - offset] = static_cast<char>(buffer[fault->offset - offset] ^ 0xFF);
    }
    if (fault && fault->action == FaultAction::Trickle) {  // the time these bytes are worth
      std::this_thread::sleep_for(
          std::chrono::microseconds(buffer.size() * 1000000 / fault->bytes_per_second));
    }
    if (!sink.write(buffer.data(), buffer.size())) return false;
    t_stats.bytes_out += buffer.size();
    return true;
  };
}

}  // namespace

std::optional<std::string> Call::param(const std::string& name) const {
  if (!req.has_param(name)) return std::nullopt;
  return req.get_param_value(name);
}

std::vector<std::string> Call::params(const std::string& name) const {
  std::vector<std::string> values;
  for (size_t i = 0; i < req.get_param_value_count(name); ++i)
    values.push_back(req.get_param_value(name, i));
  return values;
}

bool valid_repo_id(const std::string& id) {
  auto parts = split(id, '/');
  if (parts.size() != 2) return false;
  for (const auto& part : parts) {
    auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    if (part.empty() || part.size() > 96 || !alnum(part.front()) || !alnum(part.back())) {
      return false;
    }
    for (char c : part) {
      if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
    }
    if (part.find("--") != std::string::npos || part.find("..") != std::string::npos) return false;
  }
  return true;
}

Server::Server(Options options, Config config)
    : options_(std::move(options)),
      config_(std::move(config)),
      blobs_(options_.data_dir / "blobs"),
      secret_(random_secret()),
      quotas_(options_.quotas) {
  fs::create_directories(options_.data_dir / "repos");
  load_repos();
  // Repos listed in the config exist from the start (an existing state is kept).
  for (const auto& seed : config_.repos) {
    if (repos_.contains(seed.type + "/" + seed.id)) continue;
    create_repo_locked(seed.type, seed.id, seed.is_private, seed.id.substr(0, seed.id.find('/')),
                       seed.files);
  }
  install_routes(hub_, Listener::Hub);
  install_routes(cdn_, Listener::Cdn);
}

Server::~Server() = default;

void Server::install_routes(httplib::Server& server, Listener listener) {
  // Clients keep several connections open (the JS client uploads 5 parts at once); each open
  // connection holds a worker, so the default of 8 is too few.
  server.new_task_queue = [] { return new httplib::ThreadPool(32); };
  server.set_keep_alive_max_count(100);
  // Headers and body go out in separate writes: without this, Nagle and delayed ACKs stall every
  // small request by ~40 ms, and the benchmarks would measure the test server.
  server.set_tcp_nodelay(true);
  auto plain = [this, listener](const httplib::Request& req, httplib::Response& res) {
    handle(listener, req, res, nullptr);
  };
  auto with_body = [this, listener](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
    handle(listener, req, res, &reader);
  };
  server.Get(".*", plain);
  server.Options(".*", plain);
  server.Post(".*", with_body);
  server.Put(".*", with_body);
  server.Patch(".*", with_body);
  server.Delete(".*", with_body);
  server.set_logger([this, listener](const httplib::Request& req, const httplib::Response& res) {
    log_request(listener, req, res);
  });
}

void Server::bind() {
  if (options_.host != "127.0.0.1") {
    throw std::runtime_error("--host must be 127.0.0.1: the test Hub only listens on loopback");
  }
  auto bind_one = [&](httplib::Server& server, int port, const char* what) {
    int bound = port == 0 ? server.bind_to_any_port(options_.host)
                          : (server.bind_to_port(options_.host, port) ? port : -1);
    if (bound <= 0) {
      throw std::runtime_error(std::string("cannot listen on ") + options_.host + ":" +
                               std::to_string(port) + " for the " + what +
                               " listener: is the port in use? (use 0 for a free port)");
    }
    return bound;
  };
  port_ = bind_one(hub_, options_.port, "hub");
  cdn_port_ = bind_one(cdn_, options_.cdn_port, "cdn");
}

void Server::run() {
  std::thread cdn_thread([this] { cdn_.listen_after_bind(); });
  hub_.listen_after_bind();
  cdn_thread.join();
}

void Server::stop() {
  {
    std::lock_guard lock(wait_mutex_);
    stopping_ = true;
  }
  wait_cv_.notify_all();
  hub_.stop();
  cdn_.stop();
}

void Server::handle(Listener listener, const httplib::Request& req, httplib::Response& res,
                    const httplib::ContentReader* reader) {
  if (t_stats.active) --active_requests_;  // a response that never reached the logger
  t_stats = {};
  // httplib slices bodies by itself when a Range header was parsed; ranges are answered here
  // (with 416 when unsatisfiable), so its copy must not apply them a second time.
  const_cast<httplib::Request&>(req).ranges.clear();
  Call call{req, res, reader, listener, {}, {}, {}, std::nullopt, false, std::nullopt};
  size_t question = req.target.find('?');
  call.raw_path = req.target.substr(0, question);
  if (question != std::string::npos) call.raw_query = req.target.substr(question + 1);
  auto parts = split(call.raw_path, '/');
  for (size_t i = 1; i < parts.size(); ++i) call.segments.push_back(percent_decode(parts[i]));
  try {
    bool admin =
        listener == Listener::Hub && !call.segments.empty() && call.segments[0] == "_admin";
    if (admin) return route_admin(call);
    t_stats.active = true;
    t_stats.sequence = ++sequence_;
    ++active_requests_;
    // Storage (the cdn, or its upload URLs on the hub with --storage-on-hub) has no quota.
    bool storage = options_.storage_on_hub && call.segments.size() >= 2 &&
                   call.segments[0] == "lfs" && call.segments[1] == "upload";
    if (listener == Listener::Hub && !storage) count_quota(call);
    if (auto fault = faults_.take(req.method, call.raw_path, req.path, listener_name(listener))) {
      t_stats.fault = fault->name();
      if (fault->action == FaultAction::Status || fault->action == FaultAction::Redirect) {
        drain_body(call);
        return send_fault_status(call, *fault);
      }
      if (fault->action == FaultAction::Hang) return wait_fault(std::nullopt);
      bool wait_first = fault->action == FaultAction::Delay && !fault->apply_first;
      if (wait_first) wait_fault(fault->ms);
      call.response_fault = fault;
    }
    if (listener == Listener::Hub) {
      route_hub(call);
    } else {
      route_cdn(call);
    }
    // The request is applied; its answer leaves only after the wait.
    if (call.response_fault && call.response_fault->action == FaultAction::Delay &&
        call.response_fault->apply_first) {
      wait_fault(call.response_fault->ms);
    }
  } catch (const HttpError& error) {
    drain_body(call);
    send_error(call, error);
  } catch (const std::exception& error) {
    drain_body(call);
    send_error(call, {500, std::string("test Hub server error: ") + error.what()});
  }
}

void Server::leave_body_fault(Call& call) {
  if (!call.response_fault || !call.response_fault->acts_on_body()) return;
  faults_.give_back(*call.response_fault);
  call.response_fault.reset();
  t_stats.fault.clear();
}

void Server::log_request(Listener listener, const httplib::Request& req,
                         const httplib::Response& res) {
  RequestStats stats = std::exchange(t_stats, RequestStats{});
  size_t question = req.target.find('?');
  std::string raw_path = req.target.substr(0, question);
  if (listener == Listener::Hub && (raw_path == "/_admin" || raw_path.starts_with("/_admin/"))) {
    if (stats.active) --active_requests_;
    return;
  }
  json entry = {
      {"method", req.method},
      {"path", raw_path},
      {"query", question == std::string::npos ? "" : req.target.substr(question + 1)},
      {"status", res.status},
      {"authorization", req.has_header("Authorization")},
      {"listener", listener_name(listener)},
      {"bytes_in", stats.bytes_in},
      {"bytes_out", stats.bytes_out},
      {"range", req.has_header("Range") ? json(req.get_header_value("Range")) : json(nullptr)},
      {"fault", stats.fault.empty() ? json(nullptr) : json(stats.fault)},
  };
  log_.add(stats.sequence != 0 ? stats.sequence : ++sequence_, std::move(entry));
  // Only once its entry is in the log: GET /_admin/log waits for no request in flight, then reads.
  if (stats.active) --active_requests_;
}

// --- routing -----------------------------------------------------------------------------------

void Server::route_hub(Call& call) {
  const auto& s = call.segments;
  if (options_.storage_on_hub && s.size() >= 3 && s[0] == "lfs" && s[1] == "upload") {
    return route_cdn(call);
  }
  if (!s.empty() && s[0] == "api") return route_api(call);
  route_web(call);
}

namespace {

HttpError not_implemented(const Call& call) {
  return {404,
          "the test Hub server has no route for " + call.req.method + " " + call.raw_path +
              " (see tests/README.md for what it implements)",
          ""};
}

void expect_method(const Call& call, std::initializer_list<const char*> methods) {
  for (const char* method : methods) {
    if (call.req.method == method) return;
  }
  throw HttpError{405, call.req.method + " is not allowed on " + call.raw_path, ""};
}

// Revisions normally arrive as one %2F-encoded segment; clients that send refs/pr/N raw split
// it over three segments.
std::string take_revision(const std::vector<std::string>& s, size_t& index) {
  if (index + 2 < s.size() && s[index] == "refs" &&
      (s[index + 1] == "pr" || s[index + 1] == "convert")) {
    std::string revision = s[index] + "/" + s[index + 1] + "/" + s[index + 2];
    index += 3;
    return revision;
  }
  return s[index++];
}

std::string join_from(const std::vector<std::string>& s, size_t index) {
  std::string out;
  for (size_t i = index; i < s.size(); ++i) {
    if (!out.empty() || i > index) out += "/";
    out += s[i];
  }
  return out;
}

std::string repo_type_from_plural(const std::string& plural) {
  if (plural == "models") return "model";
  if (plural == "datasets") return "dataset";
  if (plural == "spaces" || plural == "kernels") {
    throw HttpError{400, "the test Hub server only stores model and dataset repos, not " + plural,
                    ""};
  }
  return "";
}

}  // namespace

void Server::route_api(Call& call) {
  const auto& s = call.segments;
  if (s.size() == 2 && s[1] == "whoami-v2") {
    expect_method(call, {"GET", "HEAD"});
    return whoami(call);
  }
  if (s.size() == 3 && s[1] == "repos" && s[2] == "create") {
    expect_method(call, {"POST"});
    return create_repo(call);
  }
  if (s.size() == 3 && s[1] == "repos" && s[2] == "delete") {
    expect_method(call, {"DELETE"});
    return delete_repo(call);
  }
  if (s.size() == 2 && s[1] == "validate-yaml") {
    expect_method(call, {"POST"});
    read_body(call);
    return send_json(call, 200, json::object());
  }
  if (s.size() == 2 && s[1] == "complete_multipart") {
    expect_method(call, {"POST"});
    return complete_multipart(call);
  }
  // resolve-cache/{models,datasets}/{id}/{commit}/{path}: where resolve sends regular files
  if (s.size() >= 7 && s[1] == "resolve-cache") {
    expect_method(call, {"GET", "HEAD"});
    std::string type = repo_type_from_plural(s[2]);
    if (type.empty()) throw not_implemented(call);
    return resolve_cache(call, type, s[3] + "/" + s[4], s[5], join_from(s, 6));
  }
  if (s.size() >= 4) {
    std::string type = repo_type_from_plural(s[1]);
    if (!type.empty()) {
      return route_repo_api(call, type, s[2] + "/" + s[3],
                            std::vector<std::string>(s.begin() + 4, s.end()));
    }
  }
  throw not_implemented(call);
}

void Server::route_repo_api(Call& call, const std::string& type, const std::string& id,
                            const std::vector<std::string>& rest) {
  if (rest.empty()) {
    expect_method(call, {"GET", "HEAD"});
    return repo_info(call, type, id, "main");
  }
  const std::string& what = rest[0];
  size_t index = 1;
  if (rest.size() < 2 && what != "refs") throw not_implemented(call);
  if (what == "refs" && rest.size() == 1) {
    expect_method(call, {"GET", "HEAD"});
    return list_refs(call, type, id);
  }
  std::string revision = take_revision(rest, index);
  if (what == "revision" && index == rest.size()) {
    expect_method(call, {"GET", "HEAD"});
    return repo_info(call, type, id, revision);
  }
  if (what == "tree") {
    expect_method(call, {"GET", "HEAD"});
    return list_tree(call, type, id, revision, join_from(rest, index));
  }
  if (index != rest.size()) throw not_implemented(call);
  if (what == "paths-info") {
    expect_method(call, {"POST"});
    return paths_info(call, type, id, revision);
  }
  if (what == "preupload") {
    expect_method(call, {"POST"});
    return preupload(call, type, id, revision);
  }
  if (what == "commit") {
    expect_method(call, {"POST"});
    return commit(call, type, id, revision);
  }
  if (what == "super-squash") {
    expect_method(call, {"POST"});
    return super_squash(call, type, id, revision);
  }
  if (what == "commits") {
    expect_method(call, {"GET", "HEAD"});
    return list_commits(call, type, id, revision);
  }
  throw not_implemented(call);
}

void Server::route_web(Call& call) {
  std::vector<std::string> s = call.segments;
  std::string type = "model";
  if (!s.empty() && (s[0] == "datasets" || s[0] == "spaces" || s[0] == "kernels")) {
    type = repo_type_from_plural(s[0]);
    s.erase(s.begin());
  }
  // {id}.git/info/lfs/objects/{batch,verify}
  if (s.size() == 6 && s[1].ends_with(".git") && s[2] == "info" && s[3] == "lfs" &&
      s[4] == "objects") {
    std::string id = s[0] + "/" + s[1].substr(0, s[1].size() - 4);
    if (s[5] == "batch") {
      expect_method(call, {"POST"});
      return lfs_batch(call, type, id);
    }
    if (s[5] == "verify") {
      expect_method(call, {"POST"});
      return lfs_verify(call, type, id);
    }
  }
  // {id}/{resolve,raw}/{revision}/{path}
  if (s.size() >= 5 && (s[2] == "resolve" || s[2] == "raw")) {
    expect_method(call, {"GET", "HEAD"});
    size_t index = 3;
    std::string revision = take_revision(s, index);
    if (index >= s.size()) throw not_implemented(call);
    return resolve(call, type, s[0] + "/" + s[1], revision, join_from(s, index), s[2] == "raw");
  }
  throw not_implemented(call);
}

void Server::route_cdn(Call& call) {
  const auto& s = call.segments;
  // lfs/objects/{sha256}: download; lfs/upload/{sha256}[/part/{n}]: uploads
  if (s.size() == 3 && s[0] == "lfs" && s[1] == "objects") {
    expect_method(call, {"GET", "HEAD"});
    return cdn_download(call, s[2]);
  }
  if (s.size() == 3 && s[0] == "lfs" && s[1] == "upload") {
    expect_method(call, {"PUT"});
    return cdn_upload(call, s[2]);
  }
  if (s.size() == 5 && s[0] == "lfs" && s[1] == "upload" && s[3] == "part") {
    expect_method(call, {"PUT"});
    return cdn_upload_part(call, s[2], s[4]);
  }
  throw HttpError{404, "no such key: " + call.raw_path, "NoSuchKey", ErrorStyle::S3};
}

void Server::route_admin(Call& call) {
  const auto& s = call.segments;
  const std::string& method = call.req.method;
  std::string what = s.size() == 2 ? s[1] : "";
  if (what == "log") {
    // A request is logged after its body is written, which can be just after its client has
    // read the response: let requests in flight finish, so a test sees what it just did, and a
    // clear does not leave the previous step's last request to be logged in the next one.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (active_requests_ > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (what == "log" && method == "GET") return send_json(call, 200, log_.entries());
  if (what == "log" && method == "DELETE") {
    log_.clear();
    return send_json(call, 200, json::object());
  }
  if (what == "faults" && method == "GET") return send_json(call, 200, faults_.describe());
  if (what == "faults" && method == "DELETE") {
    faults_.clear();
    return send_json(call, 200, json::object());
  }
  if (what == "faults" && (method == "POST" || method == "PUT")) {
    json rules = json::parse(read_body(call), nullptr, false);
    if (rules.is_discarded()) throw HttpError{400, "the fault rules are not valid JSON", ""};
    try {
      faults_.set(rules);
    } catch (const std::invalid_argument& error) {
      throw HttpError{400, std::string("bad fault rules: ") + error.what(), ""};
    }
    return send_json(call, 200, faults_.describe());
  }
  if (what == "repos" && method == "GET") {
    std::lock_guard lock(state_mutex_);
    json repos = json::array();
    for (const auto& [key, repo] : repos_) {
      repos.push_back({{"type", repo.type},
                       {"id", repo.id},
                       {"private", repo.is_private},
                       {"branches", repo.branches},
                       {"commits", repo.commits.size()}});
    }
    return send_json(call, 200, repos);
  }
  throw HttpError{404,
                  "admin routes: GET/DELETE /_admin/log, GET/POST/DELETE /_admin/faults, "
                  "GET /_admin/repos",
                  ""};
}

// --- responses ---------------------------------------------------------------------------------

void Server::count_quota(Call& call) {
  std::string auth = call.req.get_header_value("Authorization");
  // Like the Hub: a token's requests count for it, an anonymous caller's for its address.
  call.quota = quotas_.count(Quotas::bucket_of(call.req.path),
                             auth.empty() ? "ip " + call.req.remote_addr : auth);
  if (!call.quota) return;
  const QuotaState& q = *call.quota;
  call.res.set_header("RateLimit", "\"" + q.bucket + "\";r=" + std::to_string(q.remaining) +
                                       ";t=" + std::to_string(q.reset_seconds));
  call.res.set_header("RateLimit-Policy", "\"fixed window\";\"" + q.bucket +
                                              "\";q=" + std::to_string(q.quota) +
                                              ";w=" + std::to_string(q.window_seconds));
  if (!q.refused) return;
  throw HttpError{429,
                  "We had to rate limit you, you hit the quota of " + std::to_string(q.quota) +
                      " " + q.bucket + " requests per " + window_text(q.window_seconds) +
                      " period (test Hub server: --" + q.bucket +
                      "-quota). Wait for the next period. See "
                      "https://huggingface.co/docs/hub/rate-limits",
                  "",
                  ErrorStyle::Hub,
                  {{"Retry-After", std::to_string(q.reset_seconds)}}};
}

void Server::check_commit_quota(const Repo& repo) {
  std::optional<int64_t> wait = quotas_.commit_wait(repo.key());
  if (!wait) return;
  throw HttpError{429,
                  "You have exceeded our hourly quotas for action: commit. We invite you to "
                  "retry later.",
                  "",
                  ErrorStyle::Hub,
                  {{"Retry-After", std::to_string(*wait)}}};
}

void Server::send_error(Call& call, const HttpError& error) {
  // The quota headers are on every answer of the Hub, errors included.
  std::string rate_limit = call.res.get_header_value("RateLimit");
  std::string policy = call.res.get_header_value("RateLimit-Policy");
  call.res.headers.clear();
  if (!rate_limit.empty()) call.res.set_header("RateLimit", rate_limit);
  if (!policy.empty()) call.res.set_header("RateLimit-Policy", policy);
  for (const auto& [key, value] : error.headers) call.res.set_header(key, value);
  switch (error.style) {
    case ErrorStyle::Hub:
      if (!error.code.empty()) call.res.set_header("X-Error-Code", error.code);
      call.res.set_header("X-Error-Message", one_line(error.message));
      return send_json(call, error.status, {{"error", error.message}});
    case ErrorStyle::Lfs:
      return send_json(
          call, error.status,
          {{"message", error.message},
           {"documentation_url", "https://github.com/git-lfs/git-lfs/blob/main/docs/api/batch.md"}},
          "application/vnd.git-lfs+json");
    case ErrorStyle::S3:
      return send_text(call, error.status,
                       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" +
                           xml_escape(error.code.empty() ? "InvalidRequest" : error.code) +
                           "</Code><Message>" + xml_escape(error.message) + "</Message></Error>",
                       "application/xml");
  }
}

void Server::wait_fault(std::optional<uint64_t> ms) {
  std::unique_lock lock(wait_mutex_);
  if (!ms) {
    wait_cv_.wait(lock, [this] { return stopping_; });
    return;
  }
  wait_cv_.wait_for(lock, std::chrono::milliseconds(*ms), [this] { return stopping_; });
}

void Server::send_fault_status(Call& call, const Fault& fault) {
  if (fault.retry_after) call.res.set_header("Retry-After", std::to_string(*fault.retry_after));
  if (!fault.error_code.empty()) call.res.set_header("X-Error-Code", fault.error_code);
  if (!fault.message.empty()) call.res.set_header("X-Error-Message", one_line(fault.message));
  for (const auto& [key, value] : fault.headers.items()) {
    call.res.set_header(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  if (fault.action == FaultAction::Redirect) {
    std::string base = fault.redirect_to == "cdn" ? cdn_base() : hub_base();
    call.res.set_header("Location", base + call.req.target);
  }
  send_json(call, fault.status, fault.body.is_null() ? json{{"error", fault.message}} : fault.body);
}

void Server::send_json(Call& call, int status, const json& body, const std::string& content_type) {
  send_text(call, status, body.dump(-1, ' ', false, json::error_handler_t::replace), content_type);
}

void Server::send_text(Call& call, int status, std::string body, const std::string& content_type) {
  call.res.status = status;
  if (body.empty()) {
    call.res.set_header("Content-Type", content_type);
    return;
  }
  auto text = std::make_shared<const std::string>(std::move(body));
  size_t length = text->size();
  call.res.set_content_provider(length, content_type,
                                make_provider({text, nullptr, 0}, call.response_fault));
}

void Server::send_file(Call& call, int status, const fs::path& file, uint64_t offset,
                       uint64_t length, const std::string& content_type) {
  call.res.status = status;
  if (length == 0) {
    call.res.set_header("Content-Type", content_type);
    return;
  }
  std::shared_ptr<FILE> handle(fopen(file.c_str(), "rb"), [](FILE* f) {
    if (f != nullptr) fclose(f);
  });
  if (!handle) throw std::runtime_error("cannot open the stored blob " + file.string());
  call.res.set_content_provider(length, content_type,
                                make_provider({nullptr, handle, offset}, call.response_fault));
}

void Server::send_ranged(Call& call, std::optional<fs::path> file, std::string text, uint64_t size,
                         const std::string& content_type) {
  call.res.set_header("Accept-Ranges", "bytes");
  std::optional<ByteRange> range;
  // ignore_range plays a CDN that answers 200 with the whole body to a Range request.
  bool ignore = call.response_fault && call.response_fault->action == FaultAction::IgnoreRange;
  if (call.req.has_header("Range") && !ignore) {
    range = parse_range(call.req.get_header_value("Range"), size);
  }
  uint64_t first = 0;
  uint64_t length = size;
  int status = 200;
  if (range) {
    if (!range->satisfiable) {
      call.res.set_header("Content-Range", "bytes */" + std::to_string(size));
      return send_text(call, 416, "", content_type);
    }
    first = range->first;
    length = range->length;
    status = 206;
    call.res.set_header("Content-Range", "bytes " + std::to_string(first) + "-" +
                                             std::to_string(first + length - 1) + "/" +
                                             std::to_string(size));
  }
  if (file) return send_file(call, status, *file, first, length, content_type);
  send_text(call, status, text.substr(first, length), content_type);
}

// --- bodies ------------------------------------------------------------------------------------

std::string Server::read_body(Call& call, uint64_t limit) {
  std::string body;
  bool too_large = false;
  receive_body(call, [&](std::string_view data) {
    if (body.size() + data.size() > limit) {
      too_large = true;
      return;
    }
    body.append(data);
  });
  if (too_large) {
    throw HttpError{413, "request body larger than " + std::to_string(limit) + " bytes", ""};
  }
  return body;
}

uint64_t Server::receive_body(Call& call, const std::function<void(std::string_view)>& sink) {
  if (call.body_consumed) throw std::logic_error("request body read twice");
  call.body_consumed = true;
  if (call.reader == nullptr) {
    t_stats.bytes_in += call.req.body.size();
    sink(call.req.body);
    return call.req.body.size();
  }
  uint64_t total = 0;
  std::optional<uint64_t> flip;  // a byte changed in transit (fault corrupt_upload)
  if (call.response_fault && call.response_fault->action == FaultAction::CorruptUpload)
    flip = call.response_fault->offset;
  std::string chunk;
  bool ok = (*call.reader)([&](const char* data, size_t length) {
    std::string_view received(data, length);
    if (flip && *flip >= total && *flip - total < length) {
      chunk.assign(data, length);
      chunk[*flip - total] = static_cast<char>(chunk[*flip - total] ^ 0xFF);
      received = chunk;
    }
    total += length;
    t_stats.bytes_in += length;
    sink(received);
    return true;
  });
  if (!ok) throw HttpError{400, "the request body could not be read completely", ""};
  return total;
}

void Server::drain_body(Call& call) {
  if (call.body_consumed || call.reader == nullptr) return;
  call.body_consumed = true;
  (*call.reader)([](const char*, size_t length) {
    t_stats.bytes_in += length;
    return true;
  });
}

// --- auth --------------------------------------------------------------------------------------

Identity Server::identify(const Call& call, ErrorStyle style) const {
  if (!call.req.has_header("Authorization")) return {};
  std::string header = call.req.get_header_value("Authorization");
  std::string token;
  if (header.starts_with("Bearer ")) {
    token = header.substr(7);
  } else if (header.starts_with("Basic ")) {
    // git-lfs style: user:token
    auto decoded = base64_decode(header.substr(6));
    if (decoded && decoded->find(':') != std::string::npos) {
      token = decoded->substr(decoded->find(':') + 1);
    }
  }
  auto it = config_.tokens.find(token);
  if (it == config_.tokens.end()) {
    throw HttpError{401, "Invalid credentials in Authorization header", "", style};
  }
  return {&it->second, &config_.users.at(it->second.user)};
}

std::vector<std::string> Server::namespaces_of(const User& user) const {
  std::vector<std::string> namespaces = user.orgs;
  namespaces.insert(namespaces.begin(), user.name);
  return namespaces;
}

bool Server::can_read(const Identity& who, const Repo& repo) const {
  if (!repo.is_private) return true;
  if (who.user == nullptr) return false;
  auto namespaces = namespaces_of(*who.user);
  return std::find(namespaces.begin(), namespaces.end(), repo.ns()) != namespaces.end();
}

void Server::require_write(const Identity& who, const std::string& ns, ErrorStyle style) const {
  if (who.user == nullptr) {
    throw HttpError{401,
                    "You must be authenticated to write: send Authorization: Bearer hf_... with a "
                    "write token",
                    "", style};
  }
  if (who.token->role != "write") {
    throw HttpError{403,
                    "You don't have the rights to write to " + ns + ": the token \"" +
                        who.token->display_name + "\" is read-only (role read)",
                    "", style};
  }
  auto namespaces = namespaces_of(*who.user);
  bool member = std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
  const auto& allowed = who.token->write_namespaces;
  bool granted = !allowed || std::find(allowed->begin(), allowed->end(), ns) != allowed->end();
  if (!member || !granted) {
    throw HttpError{403,
                    "You don't have the rights to write to the namespace \"" + ns +
                        "\" with the "
                        "token \"" +
                        who.token->display_name + "\" of " + who.user->name,
                    "", style};
  }
}

// Like the Hub, a repo id in another case names the same repo (Meta-Llama/... and meta-llama/...):
// repo ids are unique whatever their case.
std::map<std::string, Repo>::iterator Server::find_in_any_case(const std::string& key) {
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  std::string wanted = lower(key);
  for (auto it = repos_.begin(); it != repos_.end(); ++it) {
    if (lower(it->first) == wanted) return it;
  }
  return repos_.end();
}

Repo& Server::find_repo(const Identity& who, const std::string& type, const std::string& id,
                        ErrorStyle style) {
  auto it = repos_.find(type + "/" + id);
  if (it == repos_.end()) it = find_in_any_case(type + "/" + id);
  bool found = it != repos_.end();
  if (found && can_read(who, it->second)) return it->second;
  // Like the Hub: anonymous callers and private repos get 401, so a caller cannot tell a
  // private repo from a missing one.
  int status = (who.user == nullptr || found) ? 401 : 404;
  throw HttpError{status,
                  "Repository Not Found for " + type + " " + id +
                      ": check the repo id and type, and that your token can read it",
                  "RepoNotFound", style};
}

const Commit& Server::find_revision(const Repo& repo, const std::string& revision) const {
  const Commit* commit = repo.resolve(revision);
  if (commit == nullptr) {
    throw HttpError{
        404, "Invalid rev id: " + revision + " (no such branch or commit in " + repo.id + ")",
        "RevisionNotFound"};
  }
  return *commit;
}

// --- repo state --------------------------------------------------------------------------------

fs::path Server::repo_file(const std::string& type, const std::string& id) const {
  return options_.data_dir / "repos" / type / (id + ".json");
}

void Server::save(const Repo& repo) {
  write_file_atomically(repo_file(repo.type, repo.id), repo_to_json(repo).dump(1));
}

void Server::load_repos() {
  for (const auto& item : fs::recursive_directory_iterator(options_.data_dir / "repos")) {
    if (!item.is_regular_file() || item.path().extension() != ".json") continue;
    std::ifstream in(item.path());
    try {
      Repo repo = repo_from_json(json::parse(in));
      repos_[repo.key()] = std::move(repo);
    } catch (const json::exception& error) {
      throw std::runtime_error("corrupt repo state " + item.path().string() + ": " + error.what() +
                               " (delete it or use a fresh --data folder)");
    }
  }
}

FileEntry Server::store_seed_file(const std::string& gitattributes, const SeedFile& file) {
  FileEntry entry;
  entry.size = file.content.size();
  bool binary = looks_binary(std::string_view(file.content).substr(0, 512));
  entry.lfs = entry.size > 0 &&
              (lfs_tracked(gitattributes, file.path) || entry.size > options_.lfs_threshold ||
               (binary && entry.size > 1000 * 1000));
  if (!entry.lfs) {
    entry.oid = blobs_.put_git(file.content);
    return entry;
  }
  entry.sha256 = sha256_hex(file.content);
  entry.oid = git_blob_id(lfs_pointer(entry.sha256, entry.size));
  if (!blobs_.lfs_size(entry.sha256)) {
    fs::path temp = blobs_.new_temp();
    write_file_atomically(temp, file.content);
    blobs_.install_lfs(temp, entry.sha256);
  }
  return entry;
}

Repo& Server::create_repo_locked(const std::string& type, const std::string& id, bool is_private,
                                 const std::string& author, const std::vector<SeedFile>& files) {
  Repo repo;
  repo.type = type;
  repo.id = id;
  repo.is_private = is_private;
  repo.created = std::time(nullptr);
  FileTree tree;
  SeedFile attributes{".gitattributes", default_gitattributes()};
  tree[attributes.path] = store_seed_file("", attributes);
  for (const auto& file : files) tree[file.path] = store_seed_file(attributes.content, file);
  add_commit(repo, "main", "", std::move(tree), "initial commit", "", author, repo.created);
  save(repo);
  auto [it, inserted] = repos_.insert_or_assign(repo.key(), std::move(repo));
  return it->second;
}

// --- URLs --------------------------------------------------------------------------------------

std::string Server::hub_base() const {
  return "http://" + options_.host + ":" + std::to_string(port_);
}

std::string Server::cdn_base() const {
  return "http://" + options_.host + ":" + std::to_string(cdn_port_);
}

std::string Server::upload_base() const {
  return options_.storage_on_hub ? hub_base() : cdn_base();
}

std::string Server::repo_url(const Repo& repo) const {
  return hub_base() + (repo.type == "dataset" ? "/datasets/" : "/") + repo.id;
}

std::string Server::signed_url(const std::string& base, const std::string& method,
                               const std::string& path, const std::string& query) const {
  std::string full = query + (query.empty() ? "" : "&") +
                     "expires=" + std::to_string(std::time(nullptr) + kUrlLifetimeSeconds);
  std::string signature = sha256_hex(secret_ + "\n" + method + " " + path + "?" + full);
  return base + path + "?" + full + "&signature=" + signature;
}

void Server::check_signature(const Call& call) const {
  ErrorStyle style = call.listener == Listener::Cdn ? ErrorStyle::S3 : ErrorStyle::Hub;
  size_t at = call.raw_query.rfind("&signature=");
  if (at == std::string::npos) {
    throw HttpError{403, "This URL is not signed: use the href the LFS batch API returned",
                    "AccessDenied", style};
  }
  std::string signed_part = call.raw_query.substr(0, at);
  std::string method = call.req.method == "HEAD" ? "GET" : call.req.method;
  std::string expected =
      sha256_hex(secret_ + "\n" + method + " " + call.raw_path + "?" + signed_part);
  if (call.raw_query.substr(at + 11) != expected) {
    throw HttpError{403,
                    "The request signature does not match (URLs are signed per method and path, "
                    "and die with the server process)",
                    "SignatureDoesNotMatch", style};
  }
  auto expires = call.param("expires");
  long long deadline = 0;
  try {
    deadline = expires ? std::stoll(*expires) : 0;
  } catch (const std::exception&) {
  }
  if (deadline < std::time(nullptr)) {
    throw HttpError{403, "Request has expired", "AccessDenied", style};
  }
}

void Server::refuse_hub_auth(const Call& call) const {
  // S3 refuses a presigned URL that also carries an Authorization header; so does this CDN, so
  // that a client leaking the Hub token to storage fails its tests.
  if (call.req.has_header("Authorization")) {
    throw HttpError{400,
                    "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "
                    "Signature query string parameter or the Authorization header should be "
                    "specified (do not send the Hub token to storage URLs)",
                    "InvalidArgument", ErrorStyle::S3};
  }
}

std::string Server::next_link(const Call& call, size_t offset) const {
  std::string query;
  for (const auto& item : split(call.raw_query, '&')) {
    if (item.empty() || item.starts_with("cursor=")) continue;
    query += (query.empty() ? "" : "&") + item;
  }
  std::string cursor = base64_encode("offset:" + std::to_string(offset));
  query += (query.empty() ? "" : "&") + std::string("cursor=") + percent_encode(cursor);
  return "<" + hub_base() + call.raw_path + "?" + query + ">; rel=\"next\"";
}

}  // namespace neuron_cache::hub_server
