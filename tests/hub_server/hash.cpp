#include "hash.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace neuron_cache::hub_server {

struct Digest::State {
  EVP_MD_CTX* context = nullptr;
  ~State() { EVP_MD_CTX_free(context); }
};

namespace {

const EVP_MD* message_digest(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Md5:
      return EVP_md5();
    case Algorithm::Sha1:
      return EVP_sha1();
    case Algorithm::Sha256:
      return EVP_sha256();
  }
  return nullptr;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Digest::Digest(Algorithm algorithm) : state_(std::make_unique<State>()) {
  state_->context = EVP_MD_CTX_new();
  if (state_->context == nullptr ||
      EVP_DigestInit_ex(state_->context, message_digest(algorithm), nullptr) != 1) {
    throw std::runtime_error("libcrypto could not initialise a hash: is OpenSSL usable here?");
  }
}

Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(std::string_view bytes) {
  EVP_DigestUpdate(state_->context, bytes.data(), bytes.size());
}

std::string Digest::hex() {
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

std::string hex_digest(Algorithm algorithm, std::string_view bytes) {
  Digest digest(algorithm);
  digest.update(bytes);
  return digest.hex();
}

std::string git_object_id(std::string_view type, std::string_view body) {
  Digest digest(Algorithm::Sha1);
  std::string header = std::string(type) + " " + std::to_string(body.size());
  digest.update(std::string_view(header.data(), header.size() + 1));  // with the '\0'
  digest.update(body);
  return digest.hex();
}

std::string lfs_pointer(std::string_view sha256, unsigned long long size) {
  return "version https://git-lfs.github.com/spec/v1\noid sha256:" + std::string(sha256) +
         "\nsize " + std::to_string(size) + "\n";
}

bool is_hex(std::string_view text, size_t length) {
  if (text.size() != length) return false;
  for (char c : text) {
    if (hex_value(c) < 0 || (c >= 'A' && c <= 'F')) return false;
  }
  return true;
}

std::string hex_to_bytes(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes += static_cast<char>(hex_value(hex[i]) * 16 + hex_value(hex[i + 1]));
  }
  return bytes;
}

}  // namespace neuron_cache::hub_server
