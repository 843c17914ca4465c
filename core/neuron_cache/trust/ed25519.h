// Ed25519 (RFC 8032, pure: the message itself is signed, no prehash) through OpenSSL's libcrypto.
#pragma once

#include <array>
#include <string_view>

#include "neuron_cache/trust/keys.h"

namespace neuron_cache::trust::ed25519 {

using SignatureBytes = std::array<uint8_t, kSignatureBytes>;

KeyBytes public_of_seed(const KeyBytes& seed);
SignatureBytes sign(const KeyBytes& seed, std::string_view message);
// False for a signature that does not verify, and for a public key OpenSSL refuses.
bool verify(const KeyBytes& public_key, std::string_view message, const SignatureBytes& signature);

}  // namespace neuron_cache::trust::ed25519
