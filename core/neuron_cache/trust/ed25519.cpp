#include "neuron_cache/trust/ed25519.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <memory>

#include "neuron_cache/error.h"

namespace neuron_cache::trust::ed25519 {
namespace {

using Pkey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

// A library failure with a seed that is 32 bytes cannot come from the input: it is OpenSSL's
// (no Ed25519 in this build, out of memory).
[[noreturn]] void library_failure(const char* what) {
  throw operational_error(std::string("OpenSSL could not ") + what +
                          " an Ed25519 key: is libcrypto built with Ed25519 (OpenSSL 1.1.1+)?");
}

Pkey private_key(const KeyBytes& seed) {
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()),
           EVP_PKEY_free);
  if (!key) library_failure("load");
  return key;
}

}  // namespace

KeyBytes public_of_seed(const KeyBytes& seed) {
  Pkey key = private_key(seed);
  KeyBytes out{};
  size_t size = out.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), out.data(), &size) != 1 || size != out.size()) {
    library_failure("derive the public key of");
  }
  return out;
}

SignatureBytes sign(const KeyBytes& seed, std::string_view message) {
  Pkey key = private_key(seed);
  DigestContext context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  SignatureBytes out{};
  size_t size = out.size();
  bool signed_ok =
      context && EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
      EVP_DigestSign(context.get(), out.data(), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  if (!signed_ok || size != out.size()) library_failure("sign with");
  return out;
}

bool verify(const KeyBytes& public_key, std::string_view message, const SignatureBytes& signature) {
  Pkey key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, public_key.data(), public_key.size()),
      EVP_PKEY_free);
  DigestContext context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool valid =
      key && context &&
      EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
      EVP_DigestVerify(context.get(), signature.data(), signature.size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  // A refused signature leaves OpenSSL's per-thread error queue full, and libcurl reads that
  // queue to explain its own TLS failures: it must not find ours there.
  if (!valid) ERR_clear_error();
  return valid;
}

}  // namespace neuron_cache::trust::ed25519
