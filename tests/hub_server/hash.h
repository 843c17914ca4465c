// Hashes the Hub exposes: sha256 (LFS oids), git blob/tree/commit ids (sha1 of a git object),
// md5 (S3-style part ETags). Streaming, so multi-hundred-MiB uploads are never held in memory.
// Deliberately separate from core/neuron_cache/format/digest: the server is the client's oracle, so it must not
// share (and mirror) a bug of the code under test.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace neuron_cache::hub_server {

enum class Algorithm { Md5, Sha1, Sha256 };

class Digest {
 public:
  explicit Digest(Algorithm algorithm);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;

  void update(std::string_view bytes);
  // Lowercase hex; the digest cannot be updated afterwards.
  std::string hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string hex_digest(Algorithm algorithm, std::string_view bytes);
inline std::string sha256_hex(std::string_view bytes) {
  return hex_digest(Algorithm::Sha256, bytes);
}

// sha1("<type> <size>\0" + body): the id git gives an object.
std::string git_object_id(std::string_view type, std::string_view body);
inline std::string git_blob_id(std::string_view content) {
  return git_object_id("blob", content);
}

// The Git LFS pointer text stored in git in place of an LFS file's content.
std::string lfs_pointer(std::string_view sha256, unsigned long long size);

bool is_hex(std::string_view text, size_t length);
// 40 hex digits -> 20 raw bytes (git trees store ids in binary).
std::string hex_to_bytes(std::string_view hex);

}  // namespace neuron_cache::hub_server
