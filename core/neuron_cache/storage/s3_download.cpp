// Verified, resumable, parallel ranged downloads from S3, streamed to the caller's descriptor.
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>

#include <memory>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_xml.h"

namespace neuron_cache::storage {
namespace {

using net::HttpRequest;
using net::HttpResponse;

// Resumes that receive nothing new before a file is given up (besides RetryPolicy's attempts).
constexpr int kMaxStalledResumes = 5;
// Whole-file refetches after a checksum mismatch before the file is given up.
constexpr int kMaxCorruptRetries = 2;

// What a download verifies the content with, from what the request carries.
struct Expected {
  std::optional<HashAlgorithm> algorithm;  // none: the size only
  std::string digest;
};

Expected expected_digest(const RemoteEntry& entry) {
  if (!entry.listed_sha256.empty()) return {HashAlgorithm::Sha256, entry.listed_sha256};
  if (!entry.content_sha256.empty()) return {HashAlgorithm::Sha256, entry.content_sha256};
  if (s3xml::is_plain_md5(entry.oid)) return {HashAlgorithm::Md5, entry.oid};
  return {};
}

std::optional<uint64_t> number(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 19 ||
      text->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(*text);
}

// The size of the whole object an answer serves: Content-Range's total (206), Content-Length
// (200).
std::optional<uint64_t> served_size(long status, const net::Headers& headers) {
  if (status == 200) return number(headers.get("Content-Length"));
  auto range = headers.get("Content-Range");
  if (!range || range->find('/') == std::string::npos) return std::nullopt;
  return number(range->substr(range->find('/') + 1));
}

// One file's download, shared by its parts. The content is hashed in file order while parts
// stream in: bytes at the frontier from memory, bytes a later part wrote ahead of it read back
// from the page cache when the frontier reaches them.
struct FileState {
  DownloadRequest* request = nullptr;
  DownloadResult* result = nullptr;
  Expected expected;
  size_t parts_left = 0;
  bool failed = false;
  std::optional<Hasher> hasher;
  uint64_t hashed = 0;
  uint64_t part_size = 0;
  std::vector<uint64_t> written;  // per part: bytes [part start, written) are on disk

  void fail(const std::string& error) {
    if (!failed) result->error = error;
    failed = true;
  }
  const std::string& path() const { return request->path; }
  uint64_t size() const { return request->expected.size; }

  void advance(size_t part, uint64_t offset, std::string_view bytes) {
    written[part] = offset + bytes.size();
    if (!hasher || offset != hashed) return;
    hasher->update(bytes);
    hashed += bytes.size();
    while (hashed < size()) {
      uint64_t until = written[hashed / part_size];
      if (until <= hashed) return;
      if (!hash_range(request->fd, *hasher, hashed, until)) {
        return fail("cannot read back the downloaded bytes of " + path() + " to verify them");
      }
      hashed = until;
    }
  }
};

class RangeGet : public net::Exchange {
 public:
  RangeGet(S3Store& store, std::shared_ptr<FileState> file, size_t part, uint64_t start,
           uint64_t end, bool whole)
      : store_(store),
        file_(std::move(file)),
        part_(part),
        start_(start),
        end_(end),
        pos_(start),
        whole_(whole) {}

  net::HttpRequest request() override {
    net::HttpRequest r =
        store_.signed_request("GET", store_.object_url(file_->path()), s3::kEmptySha256);
    r.headers.push_back("Accept-Encoding: identity");
    asked_range_ = !whole_ || pos_ > start_;
    if (asked_range_) {
      r.headers.push_back("Range: bytes=" + std::to_string(pos_) + "-" + std::to_string(end_ - 1));
    }
    if (whole_ && pos_ == start_) restart();
    skip_ = 0;
    return r;
  }

  bool streams_body() const override { return true; }

  void on_stream_start(long status, const net::Headers& headers) override {
    auto size = served_size(status, headers);
    if (!size || *size != file_->size()) {
      return file_->fail(file_->path() + " in the S3 store is " +
                         (size ? std::to_string(*size) : std::string("of unknown size")) +
                         " bytes, not the " + std::to_string(file_->size()) +
                         " expected: it changed since it was listed, or its entry is wrong");
    }
    std::string etag = s3xml::unquote_etag(headers.get("ETag").value_or(""));
    const std::string& listed = file_->request->expected.oid;
    if (!listed.empty() && !etag.empty() && etag != listed) {
      return file_->fail(file_->path() + " changed in the S3 store since it was listed (ETag " +
                         etag + " instead of " + listed + "): run the command again");
    }
    if (status == 200 && asked_range_) {  // the store ignored Range: skip to the part's bytes
      if (whole_) {
        pos_ = start_;
        restart();
      } else {
        skip_ = pos_;
      }
    }
  }

  bool on_body(std::string_view bytes) override {
    file_->result->bytes += bytes.size();
    if (file_->failed) return false;
    size_t skip = static_cast<size_t>(std::min<uint64_t>(skip_, bytes.size()));
    bytes.remove_prefix(skip);
    skip_ -= skip;
    if (bytes.size() > end_ - pos_) {
      if (whole_) {
        file_->fail(file_->path() + " in the S3 store is larger than the " +
                    std::to_string(file_->size()) + " bytes expected");
        return false;
      }
      bytes = bytes.substr(0, static_cast<size_t>(end_ - pos_));
    }
    if (!bytes.empty() && !write(bytes)) return false;
    return pos_ < end_ || whole_;
  }

  std::optional<std::chrono::milliseconds> on_complete(const net::HttpResponse& response) override {
    if (file_->failed) return std::nullopt;
    bool success = response.status >= 200 && response.status < 300;
    if (success && pos_ >= end_) return finish_part();
    if (pos_ > last_pos_) attempts_ = 0;  // progress: a dropped connection resumes at once
    last_pos_ = pos_;
    if (success || response.streamed_bytes > 0 || net::is_transient(response)) {
      if (++attempts_ >= store_.options().retry.max_attempts ||
          (response.unreachable && !success)) {
        file_->fail(store_.failure(response, "downloading " + file_->path()).what() +
                    std::string(" (gave up after ") + std::to_string(attempts_) + " tries)");
        return std::nullopt;
      }
      if (attempts_ == 1 && response.streamed_bytes > 0) return std::chrono::milliseconds(0);
      auto delay = net::retry_delay(response, attempts_, store_.options().retry);
      return delay ? *delay : net::backoff(attempts_, store_.options().retry);
    }
    if (response.status == 404) {
      file_->fail(file_->path() + " is no longer in " + store_.location() +
                  ": it was removed since it was listed; run the command again");
    } else {
      file_->fail(store_.failure(response, "downloading " + file_->path()).what());
    }
    return std::nullopt;
  }

 private:
  void restart() {
    if (whole_ && file_->expected.algorithm) hasher_.emplace(*file_->expected.algorithm);
  }

  bool write(std::string_view bytes) {
    ssize_t n = pwrite(file_->request->fd, bytes.data(), bytes.size(), static_cast<off_t>(pos_));
    if (n != static_cast<ssize_t>(bytes.size())) {
      file_->fail("cannot write the downloaded bytes of " + file_->path() +
                  " to disk: is the disk full?");
      return false;
    }
    if (whole_) {
      if (hasher_) hasher_->update(bytes);
    } else {
      file_->advance(part_, pos_, bytes);
    }
    pos_ += bytes.size();
    return !file_->failed;
  }

  std::optional<std::chrono::milliseconds> finish_part() {
    if (--file_->parts_left > 0) return std::nullopt;
    const Expected& expected = file_->expected;
    if (!expected.algorithm) {
      file_->result->ok = true;
      return std::nullopt;
    }
    std::string actual = whole_ ? hasher_->hex_digest() : file_->hasher->hex_digest();
    if (actual == expected.digest) {
      file_->result->ok = true;
      return std::nullopt;
    }
    if (++corrupt_retries_ <= kMaxCorruptRetries) return fetch_whole_again();
    const char* name = *expected.algorithm == HashAlgorithm::Md5 ? "MD5" : "sha256";
    file_->fail("the content of " + file_->path() + " does not match its " + name + " (" + actual +
                " instead of " + expected.digest +
                "): it was corrupted in transit, or the entry that names it is wrong");
    return std::nullopt;
  }

  // A checksum says some byte is wrong, not which part holds it: the last part to finish
  // fetches the whole file again as one verified stream.
  std::chrono::milliseconds fetch_whole_again() {
    file_->parts_left = 1;
    whole_ = true;
    start_ = pos_ = last_pos_ = 0;
    end_ = file_->size();
    attempts_ = 0;
    return std::chrono::milliseconds(0);
  }

  S3Store& store_;
  std::shared_ptr<FileState> file_;
  size_t part_;
  uint64_t start_, end_, pos_;
  bool whole_;
  std::optional<Hasher> hasher_;
  bool asked_range_ = false;
  uint64_t skip_ = 0;
  uint64_t last_pos_ = 0;
  int attempts_ = 0;
  int corrupt_retries_ = 0;
};

}  // namespace

std::vector<DownloadResult> S3Store::download(const std::string& /*revision*/,
                                              std::vector<DownloadRequest>& requests) {
  check_online("downloading from " + location());
  std::vector<DownloadResult> results(requests.size());
  std::vector<std::unique_ptr<RangeGet>> exchanges;
  uint64_t part_size = options().part_size;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto file = std::make_shared<FileState>();
    file->request = &requests[i];
    file->result = &results[i];
    file->expected = expected_digest(requests[i].expected);
    uint64_t size = requests[i].expected.size;
    size_t parts = size > part_size ? static_cast<size_t>((size + part_size - 1) / part_size) : 1;
    file->parts_left = parts;
    // Written from offset 0: whatever the descriptor held beyond the new size must go (a
    // descriptor that cannot be truncated, a pipe, keeps what it has: nothing).
    if (ftruncate(requests[i].fd, 0) != 0 && errno != EINVAL) {
      results[i].error = "cannot truncate the destination of " + requests[i].path;
      continue;
    }
    if (parts > 1) {
      if (file->expected.algorithm) file->hasher.emplace(*file->expected.algorithm);
      file->part_size = part_size;
      for (size_t p = 0; p < parts; ++p) file->written.push_back(p * part_size);
    }
    for (size_t p = 0; p < parts; ++p) {
      uint64_t start = p * part_size;
      uint64_t end = parts == 1 ? size : std::min<uint64_t>(size, start + part_size);
      exchanges.push_back(std::make_unique<RangeGet>(*this, file, p, start, end, parts == 1));
    }
  }
  std::vector<net::Exchange*> pointers;
  for (auto& e : exchanges) pointers.push_back(e.get());
  http().run(pointers, options().parallel);
  return results;
}

}  // namespace neuron_cache::storage
