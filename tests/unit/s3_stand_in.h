// An in-process S3 stand-in (cpp-httplib on 127.0.0.1) for the S3 tests that need what s3rver
// cannot give: conditional writes enforced or ignored at will, a hook that lets another writer
// land at a chosen moment, 503 SlowDown on demand, and multipart uploads with their listing
// (ListMultipartUploads, with Initiated dates a test may set in the past), and ListObjectsV2
// (keys and sizes, with or without a delimiter; no XML escaping of keys). Objects live in
// memory, served path-style at http://127.0.0.1:PORT/<bucket>/<key>.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "neuron_cache/config/aws.h"
#include "neuron_cache/storage/s3_store.h"

namespace neuron_cache::testing {

class S3StandIn {
 public:
  S3StandIn();
  ~S3StandIn();
  S3StandIn(const S3StandIn&) = delete;
  S3StandIn& operator=(const S3StandIn&) = delete;

  config::AwsAccess access() const;
  // Short retry waits, no recheck wait beyond 50 ms.
  storage::S3Options options() const;

  // Objects by key ("c/x" is /bucket/c/x).
  void put(const std::string& key, const std::string& body);
  std::string body(const std::string& key);
  bool has(const std::string& key);
  // Makes `key`'s LastModified `seconds` since 1970 (every write sets it to the clock's now).
  void set_modified(const std::string& key, int64_t seconds);
  // A multipart upload of `key` begun at `initiated` (S3's form: 2024-01-01T00:00:00.000Z),
  // as a killed writer leaves it; returns its id.
  std::string add_upload(const std::string& key, const std::string& initiated);
  // The ids of the multipart uploads in progress.
  std::vector<std::string> uploads();
  // The keys of the objects under `prefix` ("c/" is /bucket/c/...).
  std::vector<std::string> keys(const std::string& prefix);
  std::vector<std::string> log();
  void clear_log();

  // Settings a test changes between requests (under the stand-in's mutex, or atomic).
  std::atomic<int> slow_downs_{0};                // the next requests answered 503 SlowDown
  std::atomic<bool> enforce_{true};               // If-Match / If-None-Match refused when they fail
  std::atomic<bool> replace_before_head_{false};  // the next HEAD shows another writer's ETag
  std::atomic<int> conflict_status_{412};
  std::atomic<bool> signed_{true};  // every PUT so far had the SigV4 form and payload sha256
  std::atomic<size_t> uploads_per_page_{1000};    // ListMultipartUploads page size
  std::atomic<bool> fail_upload_listing_{false};  // ListMultipartUploads answers 500
  // As some S3-compatible servers (s3rver): ListMultipartUploads answers 501 NotImplemented.
  std::atomic<bool> lacks_upload_listing_{false};
  // As S3: a PUT (object or part) whose x-amz-checksum-sha256 differs from its bytes is refused
  // (400 BadDigest); these count the PUTs that carried one, and the completions that listed a
  // ChecksumSHA256 for every part.
  std::atomic<int> checksummed_puts_{0};
  std::atomic<int> checksummed_completions_{0};
  // A bucket policy that denies object writes without x-amz-server-side-encryption (403
  // AccessDenied); the encryption each accepted write asked for is kept in encryption_.
  std::atomic<bool> require_sse_{false};
  std::vector<std::string> encryption_;  // under the stand-in's mutex
  // Called once, outside the lock, after the next HEAD of an existing object has been answered
  // (then cleared): another writer landing just after this one read its write back.
  std::function<void(const std::string& key)> after_head_;

 private:
  struct Upload {
    std::string key;
    std::string initiated;
    std::map<int, std::string> parts;
  };
  void get(const httplib::Request& req, httplib::Response& res);
  void put_request(const httplib::Request& req, httplib::Response& res);
  void post(const httplib::Request& req, httplib::Response& res);
  void remove(const httplib::Request& req, httplib::Response& res);
  void list_uploads(const httplib::Request& req, httplib::Response& res);
  void list_objects(const httplib::Request& req, httplib::Response& res);
  void complete(const httplib::Request& req, httplib::Response& res);
  bool slow_down();
  bool refused(const httplib::Request& req, httplib::Response& res);
  // Whether the write may go on under require_sse_ (else answers 403); records its encryption.
  bool encrypted(const httplib::Request& req, httplib::Response& res);

  std::mutex mutex_;
  std::vector<std::string> log_;
  std::map<std::string, std::pair<std::string, std::string>> objects_;  // path: body, ETag
  std::map<std::string, Upload> uploads_;                               // by id
  std::map<std::string, int64_t> modified_;  // path: LastModified, seconds since 1970
  int next_upload_ = 0;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace neuron_cache::testing
