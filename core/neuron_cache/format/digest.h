// Hashes used by the formats (MD5 flags keys, SHA-512 entry hashes, SHA-256 digests and LFS
// oids), computed with OpenSSL's libcrypto. Streaming so that large NEFFs never sit in memory.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace neuron_cache {

enum class HashAlgorithm { Md5, Sha1, Sha256, Sha512 };

class Hasher {
 public:
  explicit Hasher(HashAlgorithm algorithm);
  ~Hasher();
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;

  void update(std::string_view bytes);
  // Lowercase hex of the digest; the hasher cannot be updated afterwards.
  std::string hex_digest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string hash_hex(HashAlgorithm algorithm, std::string_view bytes);
std::string md5_hex(std::string_view bytes);
// Feeds bytes [from, to) of the file open as `fd` to `hasher` (pread: no shared offset, so
// parts being written meanwhile are safe); false when they cannot be read.
bool hash_range(int fd, Hasher& hasher, uint64_t from, uint64_t to);
std::string sha256_hex(std::string_view bytes);
// The sha256 of a file's content, streamed; throws an operational Error when it cannot be read.
std::string sha256_of_file(const std::filesystem::path& file);
std::string sha512_hex(std::string_view bytes);
// A hex digest as the base64 of its bytes (S3's x-amz-checksum-sha256, Content-MD5); "" when
// `hex` is not an even number of hex digits.
std::string base64_of_hex(std::string_view hex);
// What a git blob id hashes before the content: "blob <size>\0" (for callers that hash the
// content together with other digests in one read).
std::string git_blob_header(uint64_t size);
// The git blob id of some content (sha1 of "blob <size>\0" and the content): the Hub's oid of a
// file that is not in LFS.
std::string git_blob_id(std::string_view content);
// The same of a file's content, streamed; throws an operational Error when it cannot be read.
std::string git_blob_id_of_file(const std::filesystem::path& file);

}  // namespace neuron_cache
