#include "neuron_cache/format/digest.h"

#include <openssl/evp.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <memory>

#include "neuron_cache/error.h"

namespace neuron_cache {

struct Hasher::State {
  EVP_MD_CTX* context = nullptr;
  ~State() { EVP_MD_CTX_free(context); }
};

namespace {

const char* digest_name(HashAlgorithm algorithm) {
  switch (algorithm) {
    case HashAlgorithm::Md5:
      return "MD5";
    case HashAlgorithm::Sha1:
      return "SHA1";
    case HashAlgorithm::Sha256:
      return "SHA256";
    case HashAlgorithm::Sha512:
      return "SHA512";
  }
  return "";
}

constexpr HashAlgorithm kAlgorithms[] = {HashAlgorithm::Md5, HashAlgorithm::Sha1,
                                         HashAlgorithm::Sha256, HashAlgorithm::Sha512};

// Fetched once: EVP_sha256() and friends make OpenSSL 3 look the implementation up again at
// every init, which cost more than hashing a cache key. One that OpenSSL lacks (MD5 under FIPS)
// stays null and fails the init that asks for it.
const EVP_MD* message_digest(HashAlgorithm algorithm) {
  static const std::array<EVP_MD*, std::size(kAlgorithms)> fetched = [] {
    std::array<EVP_MD*, std::size(kAlgorithms)> mds{};
    for (size_t i = 0; i < mds.size(); ++i) {
      mds[i] = EVP_MD_fetch(nullptr, digest_name(kAlgorithms[i]), nullptr);
    }
    return mds;
  }();
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (kAlgorithms[i] == algorithm) return fetched[i];
  }
  return nullptr;
}

}  // namespace

Hasher::Hasher(HashAlgorithm algorithm) : state_(std::make_unique<State>()) {
  state_->context = EVP_MD_CTX_new();
  if (state_->context == nullptr ||
      EVP_DigestInit_ex2(state_->context, message_digest(algorithm), nullptr) != 1) {
    throw operational_error("libcrypto could not initialise a hash: is OpenSSL usable here?");
  }
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(std::string_view bytes) {
  EVP_DigestUpdate(state_->context, bytes.data(), bytes.size());
}

std::string Hasher::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(state_->context, digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xF];
  }
  return hex;
}

std::string hash_hex(HashAlgorithm algorithm, std::string_view bytes) {
  Hasher hasher(algorithm);
  hasher.update(bytes);
  return hasher.hex_digest();
}

std::string md5_hex(std::string_view bytes) {
  return hash_hex(HashAlgorithm::Md5, bytes);
}
std::string sha256_hex(std::string_view bytes) {
  return hash_hex(HashAlgorithm::Sha256, bytes);
}

std::string base64_of_hex(std::string_view hex) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return "";
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int high = nibble(hex[i]), low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return "";
    bytes += static_cast<char>(high * 16 + low);
  }
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}
std::string sha512_hex(std::string_view bytes) {
  return hash_hex(HashAlgorithm::Sha512, bytes);
}

namespace {

// Streams a file into `hasher`, after `prefix`; throws an operational Error when it cannot be
// read.
std::string hash_of_file(HashAlgorithm algorithm, const std::filesystem::path& file,
                         const std::function<std::string(uint64_t size)>& prefix) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw operational_error("cannot read " + file.string());
  Hasher hasher(algorithm);
  if (prefix) {
    std::error_code error;
    uint64_t size = std::filesystem::file_size(file, error);
    if (error) throw operational_error("cannot read " + file.string() + ": " + error.message());
    hasher.update(prefix(size));
  }
  std::string buffer(1 << 20, '\0');
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    hasher.update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) throw operational_error("cannot read " + file.string());
  return hasher.hex_digest();
}

}  // namespace

std::string git_blob_header(uint64_t size) {
  return "blob " + std::to_string(size) + std::string(1, '\0');
}

std::string sha256_of_file(const std::filesystem::path& file) {
  return hash_of_file(HashAlgorithm::Sha256, file, nullptr);
}

std::string git_blob_id(std::string_view content) {
  Hasher sha1(HashAlgorithm::Sha1);
  sha1.update(git_blob_header(content.size()));
  sha1.update(content);
  return sha1.hex_digest();
}

std::string git_blob_id_of_file(const std::filesystem::path& file) {
  return hash_of_file(HashAlgorithm::Sha1, file, git_blob_header);
}

bool hash_range(int fd, Hasher& hasher, uint64_t from, uint64_t to) {
  // Kept per thread, never zeroed: the hash worker calls this for every 4 MiB handed over, and
  // a fresh 1 MiB buffer was a fresh mapping, faulted in and zeroed page by page each time.
  constexpr size_t kReadSize = 1 << 20;
  thread_local std::unique_ptr<char[]> buffer(new char[kReadSize]);
  while (from < to) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kReadSize, to - from));
    ssize_t n = pread(fd, buffer.get(), want, static_cast<off_t>(from));
    if (n <= 0) return false;
    hasher.update(std::string_view(buffer.get(), static_cast<size_t>(n)));
    from += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace neuron_cache
