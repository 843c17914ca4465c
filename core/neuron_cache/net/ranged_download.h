// Verified, resumable, parallel ranged downloads streamed to the caller's descriptors: one engine
// for every store that serves files over HTTP (the Hub, S3). A store says how to ask for a byte
// range and what its answers must say; the engine does the parts, the hashing, the retries.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/net/byte_range.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::net {

// What the content must hash to. No algorithm: the size alone is checked.
struct Verification {
  std::optional<HashAlgorithm> algorithm;
  std::string prefix;  // hashed before the content (a git blob id's "blob <size>\0")
  std::string digest;  // lowercase hex
};

// The store's side of one file's download. Called from the engine's thread only.
class RangedSource {
 public:
  virtual ~RangedSource() = default;
  // The GET for `range`, or for the whole file when there is none; the engine adds the Range
  // and Accept-Encoding headers.
  virtual HttpRequest request(const std::optional<ByteRange>& range) = 0;
  // A streamed answer starts: an error text stops the file before its bytes are kept.
  virtual std::optional<std::string> check_start(long /*status*/, const Headers& /*headers*/) {
    return std::nullopt;
  }
  // An attempt finished (any status): an error text stops the file.
  virtual std::optional<std::string> check_answer(const HttpResponse& /*response*/) {
    return std::nullopt;
  }
  // The revision that served an answer, when the store says.
  virtual std::optional<std::string> revision(const HttpResponse& /*response*/) {
    return std::nullopt;
  }
  // Why the file failed on an answer that is not retried (any more) after `attempts` tries.
  virtual std::string failure(const HttpResponse& response, int attempts) = 0;
  // The content hashed to `actual`: an error text when fetching it again cannot help.
  virtual std::optional<std::string> explain_mismatch(const std::string& /*actual*/) {
    return std::nullopt;
  }
  // The content still hashed to `actual` after the whole-file refetches.
  virtual std::string corrupt(const std::string& actual) = 0;
  // A whole-file answer longer than expected: an error text, or nothing to ignore the excess.
  virtual std::optional<std::string> too_large() { return std::nullopt; }
};

struct RangedFile {
  std::string name;  // in messages
  int fd = -1;       // written from offset 0 with pwrite; the caller owns it
  uint64_t size = 0;
  Verification verify;
  std::unique_ptr<RangedSource> source;
  // Spans of `fd` an interrupted download already wrote (sorted, disjoint, inside the file): a
  // part whose first byte one covers starts where that span ends, and the hash takes them back
  // from disk. Trusted only until the digest: a mismatch fetches the whole file again. Spans that
  // break these rules are ignored whole.
  std::vector<ByteRange> on_disk = {};
  // Told the spans of `fd` on disk now (sorted, disjoint), on the engine's thread, after every
  // kProgressStep of new bytes and whenever a restart drops some: what a journal keeps so that
  // the run after a kill can pass them back as `on_disk`.
  std::function<void(const std::vector<ByteRange>&)> on_progress = {};
};

// Bytes of a file between two calls of RangedFile::on_progress that only add bytes: a killed
// run loses at most this much of a file, and a journal is not rewritten for every chunk.
inline constexpr uint64_t kProgressStep = 16ull << 20;

struct RangedResult {
  bool ok = false;
  std::string error;
  // The errno of a failed write to the destination when sys::is_disk_refusal names it (a full
  // disk, a file size limit): the local disk failed, not the server.
  int disk_errno = 0;
  uint64_t bytes = 0;          // what came over the wire, kept or not
  uint64_t bytes_resumed = 0;  // of RangedFile::on_disk, part of the verified file (0 unless ok)
  std::string revision;        // RangedSource::revision of the last answer that had one
};

struct RangedOptions {
  uint64_t part_size = 64ull << 20;  // files larger than this come in parallel parts
  size_t parallel = 8;               // HTTP transfers at once
  RetryPolicy retry;
};

// Downloads every file, each verified against its size and digest; failures are values.
std::vector<RangedResult> download_ranged(HttpEngine& http, std::vector<RangedFile>& files,
                                          const RangedOptions& options);

// A hasher for `verify`, its prefix already in; none without an algorithm.
std::optional<Hasher> new_hasher(const Verification& verify);

}  // namespace neuron_cache::net
