// The S3 store's conditional writes: the operations of a commit that expect a version of their
// file (index files, leases), each written with If-Match on the ETag the writer read or
// If-None-Match: * when it read none. A 412 (or 409) is CommitConflict. Stores that ignore the
// conditions (s3rver, older S3-compatible servers) are found by a probe, once per store; there
// the version is checked just before writing and every written file is read back, at once and
// again after S3Options::recheck (see s3_store.h for what remains).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/net/http.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

class S3Store;
namespace s3 {
class Fd;
}

class S3ConditionalWrites {
 public:
  explicit S3ConditionalWrites(S3Store& store) : store_(store) {}

  // Writes every operation (Add, with an expectation), in order; CommitConflict at the first
  // whose file is no longer as expected.
  void write(const std::vector<const CommitOperation*>& ops, CommitResult& result);
  // Deletes `op`'s file if it is still as expected. S3 has no conditional DELETE everywhere: the
  // version is checked just before, which narrows the race without closing it.
  void remove(const CommitOperation& op);
  // Whether the store refuses a conditional write whose condition fails; probed once.
  bool enforced();

 private:
  // Writes one operation; returns the ETag written. `checked`: the store enforces conditions.
  std::string put(const CommitOperation& op, bool checked, CommitResult& result);
  // One PUT of `op`'s file under `condition` ("If-Match: ..."); CommitConflict when refused.
  net::HttpResponse send(const CommitOperation& op, const s3::Fd& fd, uint64_t size,
                         const std::string& sha, const std::string& condition);
  // Whether the answer says the store kept other bytes than were sent (s3::kept_bytes).
  bool changed_in_transit(const net::HttpResponse& response, const s3::Fd& fd, uint64_t size,
                          const std::string& sha) const;
  // CommitConflict unless `path` is now as `expected` (an ETag, or absent).
  void require(const std::string& path, const Expected& expected);
  std::optional<std::string> etag_now(const std::string& path);
  std::string conflict_message(const std::string& path) const;

  S3Store& store_;
  std::mutex mutex_;
  std::optional<bool> enforced_;  // under mutex_; unknown until probed
};

}  // namespace neuron_cache::storage
