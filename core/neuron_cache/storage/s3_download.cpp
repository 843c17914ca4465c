// Verified, resumable, parallel ranged downloads from S3, streamed to the caller's descriptor.
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>

#include <memory>
#include <optional>
#include <string>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/net/ranged_download.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_xml.h"

namespace neuron_cache::storage {
namespace {

// What a download verifies the content with, from what the request carries: no algorithm, the
// size only.
net::Verification verification(const RemoteEntry& entry) {
  if (!entry.listed_sha256.empty()) return {HashAlgorithm::Sha256, "", entry.listed_sha256};
  if (!entry.content_sha256.empty()) return {HashAlgorithm::Sha256, "", entry.content_sha256};
  if (s3xml::is_plain_md5(entry.oid)) return {HashAlgorithm::Md5, "", entry.oid};
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

// One object, each GET signed when it is sent: its size and ETag must be the listed ones.
class S3Source : public net::RangedSource {
 public:
  S3Source(S3Store& store, const DownloadRequest& request) : store_(store), request_(request) {}

  net::HttpRequest request(const std::optional<net::ByteRange>& /*range*/) override {
    return store_.signed_request("GET", store_.address().object_url(request_.path),
                                 s3::kEmptySha256);
  }

  std::optional<std::string> check_start(long status, const net::Headers& headers) override {
    const std::string& path = request_.path;
    uint64_t expected = request_.expected.size;
    auto size = served_size(status, headers);
    if (auto changed = changed_since_listed(headers)) return changed;
    // A whole answer shorter than listed, of the listed object, may be a body cut short on the
    // way: it is resumed with a Range, which an object that really ends there answers with 416.
    if (status == 200 && size && *size < expected) return std::nullopt;
    if (!size || *size != expected) {
      return path + " in the S3 store is " +
             (size ? std::to_string(*size) : std::string("of unknown size")) + " bytes, not the " +
             std::to_string(expected) +
             " expected: it changed since it was listed, or its entry is wrong";
    }
    return std::nullopt;
  }

  std::optional<std::string> changed_since_listed(const net::Headers& headers) const {
    std::string etag = s3xml::unquote_etag(headers.get("ETag").value_or(""));
    const std::string& listed = request_.expected.oid;
    if (listed.empty() || etag.empty() || etag == listed) return std::nullopt;
    return request_.path + " changed in the S3 store since it was listed (ETag " + printable(etag) +
           " instead of " + listed + "): run the command again";
  }

  std::string failure(const net::HttpResponse& response, int attempts) override {
    const std::string& path = request_.path;
    if (response.status == 404) {
      return path + " is no longer in " + store_.location() +
             ": it was removed since it was listed; run the command again";
    }
    if (response.status == 416) {
      return path + " in " + store_.location() + " is shorter than the " +
             std::to_string(request_.expected.size) +
             " bytes expected: it changed since it was listed, or its entry is wrong";
    }
    std::string error = store_.failure(response, "downloading " + path).what();
    if (!net::is_transient(response)) return error;
    return error + " (gave up after " + std::to_string(attempts) + " tries)";
  }

  std::string corrupt(const std::string& actual) override {
    net::Verification verify = verification(request_.expected);
    const char* name = *verify.algorithm == HashAlgorithm::Md5 ? "MD5" : "sha256";
    return "the content of " + request_.path + " does not match its " + name + " (" + actual +
           " instead of " + verify.digest +
           "): it was corrupted in transit, or the entry that names it is wrong";
  }

  std::optional<std::string> too_large() override {
    return request_.path + " in the S3 store is larger than the " +
           std::to_string(request_.expected.size) + " bytes expected";
  }

 private:
  S3Store& store_;
  const DownloadRequest& request_;
};

}  // namespace

std::vector<DownloadResult> S3Store::download(const std::string& /*revision*/,
                                              std::vector<DownloadRequest>& requests) {
  check_online("downloading from " + location());
  std::vector<DownloadResult> results(requests.size());
  std::vector<net::RangedFile> files;
  std::vector<size_t> sent;  // files[k] is requests[sent[k]]
  for (size_t i = 0; i < requests.size(); ++i) {
    DownloadRequest& request = requests[i];
    // Written from offset 0: whatever the descriptor held beyond the new size must go (a
    // descriptor that cannot be truncated, a pipe, keeps what it has: nothing). One resumed
    // keeps its bytes: the caller vouches that it holds no more than the object.
    if (request.on_disk.empty() && ftruncate(request.fd, 0) != 0 && errno != EINVAL) {
      results[i].error = "cannot truncate the destination of " + request.path;
      continue;
    }
    files.push_back({request.path, request.fd, request.expected.size,
                     verification(request.expected), std::make_unique<S3Source>(*this, request),
                     request.on_disk, request.on_progress});
    sent.push_back(i);
  }
  net::RangedOptions ranged{options().part_size, options().parallel, options().retry};
  std::vector<net::RangedResult> done = net::download_ranged(http(), files, ranged);
  for (size_t k = 0; k < done.size(); ++k) {
    DownloadResult& result = results[sent[k]];
    result.ok = done[k].ok;
    result.error = std::move(done[k].error);
    result.bytes = done[k].bytes;
    result.disk_errno = done[k].disk_errno;
    result.bytes_resumed = done[k].bytes_resumed;
  }
  return results;
}

}  // namespace neuron_cache::storage
