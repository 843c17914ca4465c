// The S3 backend of the storage seam: `s3://bucket/prefix` on AWS S3 or an S3-compatible store
// (MinIO, R2, s3rver), in libneuronxla's layout, so a training job writing the bucket directly
// and neuron-cache share it. Requests go through libcurl (net::HttpEngine: curl multi, retries,
// timeouts) signed with SigV4 (CURLOPT_AWS_SIGV4); the credentials (config/aws.h) never appear
// in a URL, a message or a log line.
//
// What it relies on, and what it guarantees:
// - Reads see the latest state (S3 is strongly consistent since 2020): head() is "".
// - Downloads are ranged parallel GETs streamed to the descriptor and verified: the size always,
//   the sha256 the request carries (content_sha256 / lfs_sha256), else the MD5 when the listed
//   ETag is a plain MD5; an object whose ETag changed since it was listed fails.
// - read_versioned() gives the object's ETag as its version.
// - commit() writes the artifacts first (single PUT up to part_size, multipart above it), each
//   with x-amz-meta-sha256, skipping those already stored with the same size and content; then
//   the operations that expect a version (index files, leases), LAST, each conditional
//   (s3_conditional.h): If-Match on the ETag read, or If-None-Match: * when it was absent. A 412
//   (or 409) throws CommitConflict; the caller reads again, merges and commits again. Deletes
//   come after them, so no index written here names a file that is already gone.
// - Stores that ignore the conditions (s3rver, older S3-compatible servers) cannot refuse a lost
//   update. Whether a store enforces them is probed once per run (checks_conditional_writes()).
//   After each conditional write the object's ETag is read back: a different one means another
//   writer replaced it meanwhile, and CommitConflict is thrown. On a store that ignores conditions
//   the tool also checks the version read just before writing (a writer that published since the
//   merge is a conflict, not overwritten), and reads every written file again after
//   S3Options::recheck: a writer that replaced it meanwhile is a conflict too. What remains is a
//   writer whose check preceded our write and whose PUT lands more than `recheck` after our
//   read-back (a PUT stalled that long): its index then lacks our entries.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "neuron_cache/aws/credentials.h"
#include "neuron_cache/config/aws.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/s3_conditional.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "neuron_cache/storage/s3_xml.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

struct S3Options {
  net::RetryPolicy retry;
  size_t parallel = 8;               // simultaneous transfers
  uint64_t part_size = 64ull << 20;  // ranged download parts and multipart upload parts
  bool offline = false;
  std::chrono::milliseconds timeout{15000};  // connect / first byte / unreachable budget
  // How long after writing index files to a store that ignores conditional writes they are read
  // again (NEURON_CACHE_S3_RECHECK_MS, Settings::s3_recheck).
  std::chrono::milliseconds recheck{config::kDefaultS3RecheckMs};
  // Server-side encryption asked of every PUT and multipart upload: "", "AES256" or "aws:kms"
  // (with the KMS key id, or the account's default key).
  std::string sse;
  std::string sse_kms_key_id;

  // S3 allows 10,000 parts of at least 5 MiB (the last excepted).
  static constexpr uint64_t kMinPartSize = 5ull << 20;
  static constexpr uint64_t kMaxParts = 10000;
};

// "s3://bucket/prefix" split; throws an input Error when it is not a valid S3 URL.
struct S3Location {
  std::string bucket;
  std::string prefix;  // without leading or trailing '/', may be empty
};
S3Location parse_s3_url(const std::string& url);

// Where the store's objects are: their keys below the prefix, and the URLs requests go to
// (virtual-hosted style https://bucket.host, or path style https://host/bucket).
class S3Address {
 public:
  S3Address(S3Location where, std::string base_url, bool path_style);

  // "s3://bucket/prefix": how messages and reports name the store.
  std::string location() const;
  std::string key_of(const std::string& path) const;
  // What every key of this store starts with: "prefix/", or "" without a prefix.
  std::string key_root() const;
  std::string object_url(const std::string& path, const std::string& query = "") const;
  // The URL of a request to the bucket itself (a listing), with its query.
  std::string bucket_url(const std::string& query) const;
  const std::string& base_url() const { return base_url_; }

 private:
  S3Location where_;
  std::string base_url_;
  bool path_style_ = false;
};

class S3Store : public Store {
 public:
  // The name of the object enforces_conditions() writes, below the prefix, with random digits.
  static constexpr const char* kProbePrefix = ".neuron-cache-probe-";

  S3Store(const std::string& url, config::AwsAccess access, S3Options options = {});
  // The access of settings.environment (and HOME), offline mode, retries and timeout.
  static std::unique_ptr<S3Store> open(const std::string& url, const config::Settings& settings);

  Kind kind() const override { return Kind::S3; }
  std::string location() const override;
  std::string head() override { return ""; }
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  SmallFile read_versioned(const std::string& path, const std::string& revision,
                           uint64_t max_bytes) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  // Multipart uploads whose record (s3_sweep.h, kUploadRecordDir) is older than ages.upload: a
  // writer killed mid-upload, found without ListMultipartUploads.
  std::vector<Leftover> leftovers(const LeftoverAges& ages) override;
  LeftoverRemoval remove_leftovers(const std::vector<Leftover>& found,
                                   const LeftoverAges& ages) override;
  // Anonymous access (AWS_NO_SIGN_REQUEST) reads only.
  std::string why_not_writable() override;
  bool checks_conditional_writes() override { return conditional_.enforced(); }
  Url download_url(const std::string&, const std::string&) const override { return {}; }
  uint64_t requests() const override { return http_.stats().requests; }
  std::string unreachable() const override { return http_.unreachable(); }
  void look_again() override { http_.look_again(); }
  bool offline() const override { return options_.offline; }

  const S3Options& options() const { return options_; }
  // Where the credentials came from, their expiry once fetched, the region and the endpoint:
  // never a value.
  std::string describe_access();
  net::HttpEngine& http() { return http_; }

  // Used by the store's own parts (s3_*.cpp), not by callers.
  const S3Address& address() const { return address_; }
  net::HttpRequest signed_request(const std::string& method, const std::string& url,
                                  const std::string& payload_sha256) const;
  // Signs `request` again with the credentials of now (refreshed if they were about to expire):
  // for a request made long before it is sent (the parts of a large upload).
  void sign_again(net::HttpRequest& request) const;
  // Adds the server-side encryption headers of S3Options::sse to a request that creates an object.
  void add_encryption(net::HttpRequest& request) const;
  // Whether the plain ETags of this store's objects are the MD5s of their bytes: not under
  // SSE-KMS, whose ETags are opaque.
  bool etags_are_md5() const { return options_.sse.rfind("aws:kms", 0) != 0; }
  // One request, retried on transient failures (5xx, 503 SlowDown, no answer).
  net::HttpResponse call(net::HttpRequest request);
  Error failure(const net::HttpResponse& response, const std::string& what) const;
  void check_online(const std::string& what) const;

 private:
  config::AwsAccess access_;
  S3Address address_;
  std::unique_ptr<aws::CredentialProvider> credentials_;  // refreshed before they expire
  S3Options options_;
  net::HttpEngine http_;
  S3ConditionalWrites conditional_{*this};  // the probe's answer, once per store
  S3UploadSweep sweep_{*this};              // once per store
};

}  // namespace neuron_cache::storage
