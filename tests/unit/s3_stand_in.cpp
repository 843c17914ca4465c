#include "s3_stand_in.h"

#include <algorithm>
#include <ctime>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/timestamp.h"
#include "s3_server.h"

namespace neuron_cache::testing {
namespace {

constexpr const char* kBucket = "/bucket";

void error_answer(httplib::Response& res, int status, const std::string& code) {
  res.status = status;
  res.set_content("<Error><Code>" + code + "</Code></Error>", "application/xml");
}

// S3's ETag of a multipart object: the MD5 of the parts' binary MD5s, "-<parts>".
std::string multipart_etag(const std::vector<std::string>& parts) {
  std::string digests;
  for (const auto& part : parts) {
    std::string hex = md5_hex(part);
    for (size_t i = 0; i < hex.size(); i += 2)
      digests += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return md5_hex(digests) + "-" + std::to_string(parts.size());
}

std::string key_of(const std::string& path) {
  return path.size() > 8 ? path.substr(8) : "";  // after "/bucket/"
}

}  // namespace

S3StandIn::S3StandIn() {
  server_.Get("/(.*)", [this](const auto& req, auto& res) { get(req, res); });
  server_.Put("/(.*)", [this](const auto& req, auto& res) { put_request(req, res); });
  server_.Post("/(.*)", [this](const auto& req, auto& res) { post(req, res); });
  server_.Delete("/(.*)", [this](const auto& req, auto& res) { remove(req, res); });
  // A fleet of tool processes (fleet-bench, LeaseCliTest) keeps up to 8 connections each alive;
  // with httplib's default of 8 workers a connection beyond them waits 5 s for a keep-alive to
  // end, which would be the stand-in's time, not the tool's (as the test Hub server's 32).
  server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

S3StandIn::~S3StandIn() {
  server_.stop();
  thread_.join();
}

config::AwsAccess S3StandIn::access() const {
  return loopback_access(port_);
}

storage::S3Options S3StandIn::options() const {
  storage::S3Options options;
  options.retry.base = std::chrono::milliseconds(10);
  options.recheck = std::chrono::milliseconds(50);
  // Fewer connections than httplib's worker threads: a kept-alive connection holds one, and a
  // connection beyond them would wait for another's keep-alive to end (5 s).
  options.parallel = 4;
  return options;
}

void S3StandIn::put(const std::string& key, const std::string& body) {
  std::lock_guard lock(mutex_);
  objects_[std::string(kBucket) + "/" + key] = {body, md5_hex(body)};
  modified_[std::string(kBucket) + "/" + key] = std::time(nullptr);
}

std::string S3StandIn::body(const std::string& key) {
  std::lock_guard lock(mutex_);
  return objects_[std::string(kBucket) + "/" + key].first;
}

void S3StandIn::set_modified(const std::string& key, int64_t seconds) {
  std::lock_guard lock(mutex_);
  modified_[std::string(kBucket) + "/" + key] = seconds;
}

bool S3StandIn::has(const std::string& key) {
  std::lock_guard lock(mutex_);
  return objects_.count(std::string(kBucket) + "/" + key) != 0;
}

std::string S3StandIn::add_upload(const std::string& key, const std::string& initiated) {
  std::lock_guard lock(mutex_);
  std::string id = "upload-" + std::to_string(++next_upload_);
  uploads_[id] = {key, initiated, {}};
  return id;
}

std::vector<std::string> S3StandIn::uploads() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, upload] : uploads_) ids.push_back(id);
  return ids;
}

std::vector<std::string> S3StandIn::keys(const std::string& prefix) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  std::string full = std::string(kBucket) + "/" + prefix;
  for (const auto& [path, object] : objects_) {
    if (path.starts_with(full)) out.push_back(path.substr(std::string(kBucket).size() + 1));
  }
  return out;
}

std::vector<std::string> S3StandIn::log() {
  std::lock_guard lock(mutex_);
  return log_;
}

void S3StandIn::clear_log() {
  std::lock_guard lock(mutex_);
  log_.clear();
}

// Atomic: the server answers on several threads (parallel ranged GETs).
bool S3StandIn::slow_down() {
  int left = slow_downs_.load();
  while (left > 0 && !slow_downs_.compare_exchange_weak(left, left - 1)) {
  }
  if (left <= 0) return false;
  return true;
}

namespace {

// "Sun, 06 Nov 1994 08:49:37 GMT"
std::string http_date(int64_t seconds) {
  std::time_t when = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[40];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

}  // namespace

void S3StandIn::get(const httplib::Request& req, httplib::Response& res) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard lock(mutex_);
    log_.push_back(req.method + " " + req.path + (req.has_param("uploads") ? "?uploads" : ""));
    if (slow_down()) {
      res.status = 503;
      res.set_content(
          "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>",
          "application/xml");
      // An error is a whole answer, never a slice of one (httplib would apply the Range).
      const_cast<httplib::Request&>(req).ranges.clear();
      return;
    }
    if (req.has_param("uploads")) return list_uploads(req, res);
    if (req.has_param("list-type")) return list_objects(req, res);
    auto found = objects_.find(req.path);
    if (found == objects_.end()) return error_answer(res, 404, "NoSuchKey");
    std::string etag = found->second.second;
    if (req.method == "HEAD" && replace_before_head_.exchange(false)) {
      etag = md5_hex("another writer");  // someone replaced it after our PUT
    }
    res.set_header("ETag", "\"" + etag + "\"");
    // As S3 does: the object's time and the answer's, both on the server's clock.
    res.set_header("Last-Modified", http_date(modified_[req.path]));
    res.set_header("Date", http_date(std::time(nullptr)));
    res.set_content(found->second.first, "application/octet-stream");
    if (req.method == "HEAD" && after_head_) {
      hook = std::move(after_head_);
      after_head_ = nullptr;
    }
  }
  if (hook) hook(key_of(req.path));
}

bool S3StandIn::refused(const httplib::Request& req, httplib::Response& res) {
  if (!enforce_) return false;
  auto found = objects_.find(req.path);
  bool exists = found != objects_.end();
  std::string match = req.get_header_value("If-Match");
  bool refuse = (req.get_header_value("If-None-Match") == "*" && exists) ||
                (!match.empty() && (!exists || match != "\"" + found->second.second + "\""));
  if (!refuse) return false;
  error_answer(res, conflict_status_,
               conflict_status_ == 409 ? "ConditionalRequestConflict" : "PreconditionFailed");
  return true;
}

void S3StandIn::put_request(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard lock(mutex_);
  log_.push_back("PUT " + req.path + (req.has_header("If-Match") ? " If-Match" : "") +
                 (req.has_header("If-None-Match") ? " If-None-Match" : ""));
  if (slow_down()) return error_answer(res, 503, "SlowDown");
  std::string payload = req.get_header_value("x-amz-content-sha256");
  signed_ = signed_ && req.get_header_value("Authorization").rfind("AWS4-HMAC-SHA256", 0) == 0 &&
            (payload == "UNSIGNED-PAYLOAD" || payload == sha256_hex(req.body));
  if (req.has_header("x-amz-checksum-sha256")) {
    if (req.get_header_value("x-amz-checksum-sha256") != base64_of_hex(sha256_hex(req.body)))
      return error_answer(res, 400, "BadDigest");
    ++checksummed_puts_;
  }
  if (!req.has_param("uploadId") && !encrypted(req, res)) return;
  if (req.has_param("uploadId")) {
    auto upload = uploads_.find(req.get_param_value("uploadId"));
    if (upload == uploads_.end()) return error_answer(res, 404, "NoSuchUpload");
    upload->second.parts[std::stoi(req.get_param_value("partNumber"))] = req.body;
    res.set_header("ETag", "\"" + md5_hex(req.body) + "\"");
    return;
  }
  if (refused(req, res)) return;
  std::string etag = md5_hex(req.body);
  objects_[req.path] = {req.body, etag};
  modified_[req.path] = std::time(nullptr);
  res.set_header("ETag", "\"" + etag + "\"");
}

bool S3StandIn::encrypted(const httplib::Request& req, httplib::Response& res) {
  std::string sse = req.get_header_value("x-amz-server-side-encryption");
  if (sse.empty() && require_sse_) {
    error_answer(res, 403, "AccessDenied");
    return false;
  }
  if (!sse.empty()) {
    std::string key = req.get_header_value("x-amz-server-side-encryption-aws-kms-key-id");
    encryption_.push_back(sse + (key.empty() ? "" : " " + key));
  }
  return true;
}

void S3StandIn::post(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard lock(mutex_);
  log_.push_back("POST " + req.path + (req.has_param("uploads") ? "?uploads" : "?uploadId"));
  if (req.has_param("uploads")) {
    if (!encrypted(req, res)) return;
    std::string id = "upload-" + std::to_string(++next_upload_);
    uploads_[id] = {key_of(req.path), "2024-01-01T00:00:00.000Z", {}};
    res.set_content("<InitiateMultipartUploadResult><UploadId>" + id +
                        "</UploadId></InitiateMultipartUploadResult>",
                    "application/xml");
    return;
  }
  complete(req, res);
}

void S3StandIn::complete(const httplib::Request& req, httplib::Response& res) {
  auto upload = uploads_.find(req.get_param_value("uploadId"));
  if (upload == uploads_.end()) return error_answer(res, 404, "NoSuchUpload");
  std::vector<std::string> parts;
  for (const auto& [number, body] : upload->second.parts) parts.push_back(body);
  std::string whole;
  for (const auto& part : parts) whole += part;
  size_t listed = 0;
  for (size_t at = req.body.find("<ChecksumSHA256>"); at != std::string::npos;
       at = req.body.find("<ChecksumSHA256>", at + 1))
    ++listed;
  if (listed == parts.size() && !parts.empty()) ++checksummed_completions_;
  std::string etag = multipart_etag(parts);
  objects_[req.path] = {whole, etag};
  modified_[req.path] = std::time(nullptr);
  uploads_.erase(upload);
  res.set_content("<CompleteMultipartUploadResult><ETag>\"" + etag +
                      "\"</ETag></CompleteMultipartUploadResult>",
                  "application/xml");
}

void S3StandIn::remove(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard lock(mutex_);
  log_.push_back("DELETE " + req.path + (req.has_param("uploadId") ? "?uploadId" : ""));
  if (req.has_param("uploadId")) {
    if (uploads_.erase(req.get_param_value("uploadId")) == 0) {
      return error_answer(res, 404, "NoSuchUpload");
    }
  } else {
    objects_.erase(req.path);
    modified_.erase(req.path);
  }
  res.status = 204;
}

// ListObjectsV2 of the bucket: keys in order from after the continuation token (the last key or
// folder of the page before), under the prefix; with a delimiter, the folders below it as common
// prefixes.
void S3StandIn::list_objects(const httplib::Request& req, httplib::Response& res) {
  std::string prefix = req.get_param_value("prefix");
  std::string after = req.get_param_value("continuation-token");
  bool one_level = req.get_param_value("delimiter") == "/";
  size_t max_keys = req.has_param("max-keys") ? std::stoul(req.get_param_value("max-keys")) : 1000;
  std::string bucket = std::string(kBucket) + "/";
  std::string contents, prefixes, last, last_prefix;
  size_t listed = 0;
  bool truncated = false;
  for (const auto& [path, object] : objects_) {
    std::string key = path.substr(bucket.size());
    if (!path.starts_with(bucket) || !key.starts_with(prefix) || key <= after) continue;
    if (after.ends_with('/') && key.starts_with(after)) continue;  // a folder listed already
    size_t slash = key.find('/', prefix.size());
    if (one_level && slash != std::string::npos) {
      std::string folder = key.substr(0, slash + 1);
      if (folder == last_prefix) continue;
      if (listed == max_keys) {
        truncated = true;
        break;
      }
      prefixes += "<CommonPrefixes><Prefix>" + folder + "</Prefix></CommonPrefixes>";
      last_prefix = folder;
      last = folder;
      ++listed;
      continue;
    }
    if (listed == max_keys) {
      truncated = true;
      break;
    }
    contents += "<Contents><Key>" + key + "</Key><Size>" + std::to_string(object.first.size()) +
                "</Size><ETag>\"" + object.second + "\"</ETag><LastModified>" +
                utc_text(modified_[path]).insert(19, ".000") + "</LastModified></Contents>";
    last = key;
    ++listed;
  }
  std::string body =
      "<ListBucketResult><IsTruncated>" + std::string(truncated ? "true" : "false") +
      "</IsTruncated>" +
      (truncated ? "<NextContinuationToken>" + last + "</NextContinuationToken>" : "") + contents +
      prefixes + "</ListBucketResult>";
  res.set_content(body, "application/xml");
}

// ListMultipartUploads: in key then id order, from after the markers, under the prefix.
void S3StandIn::list_uploads(const httplib::Request& req, httplib::Response& res) {
  if (fail_upload_listing_) return error_answer(res, 500, "InternalError");
  if (lacks_upload_listing_) return error_answer(res, 501, "NotImplemented");
  std::string prefix = req.get_param_value("prefix");
  std::string key_marker = req.get_param_value("key-marker");
  std::string id_marker = req.get_param_value("upload-id-marker");
  std::vector<std::pair<std::string, std::string>> order;  // key, id
  for (const auto& [id, upload] : uploads_) {
    if (upload.key.rfind(prefix, 0) != 0) continue;
    if (!key_marker.empty() &&
        std::make_pair(upload.key, id) <= std::make_pair(key_marker, id_marker))
      continue;
    order.emplace_back(upload.key, id);
  }
  std::sort(order.begin(), order.end());
  bool truncated = order.size() > uploads_per_page_;
  if (truncated) order.resize(uploads_per_page_);
  std::string xml = "<ListMultipartUploadsResult><Bucket>bucket</Bucket><IsTruncated>" +
                    std::string(truncated ? "true" : "false") + "</IsTruncated>";
  if (truncated) {
    xml += "<NextKeyMarker>" + order.back().first + "</NextKeyMarker><NextUploadIdMarker>" +
           order.back().second + "</NextUploadIdMarker>";
  }
  for (const auto& [key, id] : order) {
    xml += "<Upload><Key>" + key + "</Key><UploadId>" + id + "</UploadId><Initiated>" +
           uploads_[id].initiated + "</Initiated></Upload>";
  }
  res.set_content(xml + "</ListMultipartUploadsResult>", "application/xml");
}

}  // namespace neuron_cache::testing
