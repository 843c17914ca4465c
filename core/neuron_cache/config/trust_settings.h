// The settings of signed entries (trust/signing.h) read into keys: which public keys a reader
// trusts, whether it requires their signatures, and the secret key a push signs with. The
// resolution itself (which layer wins) is Settings::resolve's; what a key may look like is
// trust/keys.h's.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/trust/keys.h"

namespace neuron_cache::config {

// What a reader accepts from a store: nothing to check when no key is trusted and signatures are
// not required (every entry is used, as before signing existed).
struct TrustPolicy {
  trust::TrustedKeys keys;
  bool require = false;
  std::string keys_origin;     // "--trusted-key", "NEURON_CACHE_TRUSTED_KEYS", a manifest
  std::string require_origin;  // where require_signatures was turned on

  bool active() const { return require || !keys.empty(); }
};

// Splits NEURON_CACHE_TRUSTED_KEYS: keys separated by commas, spaces or newlines.
std::vector<std::string> split_key_list(const std::string& text);

// The policy of `settings`; throws an input Error naming the origin of a malformed key, and for
// require_signatures without any trusted key (nothing could ever be installed).
TrustPolicy trust_policy(const Settings& settings);

// The key NEURON_CACHE_SIGNING_KEY names, read (trust::read_secret_key's checks), or null when
// unset. Its secret is registered with the redactor (config/redact.h) before anything else.
std::shared_ptr<const trust::SecretKey> signing_key(const Settings& settings);
// A secret key given as text (the Action's signing-key input), registered the same way.
std::shared_ptr<const trust::SecretKey> signing_key_from_text(const std::string& text,
                                                              const std::string& origin);

// Settings::resolve's step for the three settings above.
void resolve_trust(Settings& s, const Environment& env, const SettingOverrides& overrides,
                   const ManifestLayer& manifest);

}  // namespace neuron_cache::config
