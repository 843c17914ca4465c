// Pieces the S3 store's files share (s3_store.cpp, s3_download.cpp, s3_commit.cpp,
// s3_conditional.cpp); not part of
// the library's interface.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

#include "neuron_cache/error.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage::s3 {

// sha256 of nothing: the x-amz-content-sha256 of requests without a body.
inline constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// What streamed bodies (multipart parts) sign instead of their sha256.
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";
// The user metadata every upload carries: the content's sha256, which ETags do not give for
// multipart objects.
inline constexpr const char* kShaMetaHeader = "x-amz-meta-sha256";

// A file to upload, open for reading while its requests are sent.
class Fd {
 public:
  explicit Fd(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw operational_error("cannot read " + path.string() + " to upload it");
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

inline uint64_t size_of_file(const std::filesystem::path& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw operational_error("cannot read " + path.string() + " to upload it: " + ec.message());
  return size;
}

// What a store's answer to a PUT says of the bytes it kept. Some S3-compatible servers (s3rver,
// some MinIO setups) do not check x-amz-checksum-sha256, so a byte changed in transit is stored.
enum class Kept {
  Confirmed,  // it echoed our checksum, or its ETag is the MD5 of what was sent
  Different,  // its checksum or plain-MD5 ETag is of other bytes
  Unknown,    // neither: an ETag that is no MD5 (SSE-KMS), no checksum echoed
};
// `checksum`: the base64 sha256 sent; `md5`: computes the hex MD5 of what was sent;
// `etag_is_md5`: whether this store's plain ETags are MD5s (not under SSE-KMS or SSE-C).
Kept kept_bytes(const net::Headers& answer, const std::string& checksum,
                const std::function<std::string()>& md5, bool etag_is_md5);

// The hex MD5 of `length` bytes of `fd` from `offset` (what a plain ETag is of).
std::string md5_of_range(int fd, uint64_t offset, uint64_t length);
// Why a push stops when the store kept other bytes than were sent for `path` twice.
std::string kept_otherwise_twice(const std::string& location, const std::string& path);

// An entry from a HEAD answer: size, ETag, and the sha256 metadata when the object has it.
RemoteEntry entry_of(const std::string& path, const net::Headers& headers);

}  // namespace neuron_cache::storage::s3
