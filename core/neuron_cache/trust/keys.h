// Ed25519 signing keys, as Nix's binary caches name them: a public key is one line,
// `NAME:<base64 of the 32 raw public key bytes>` (a manifest's trusted_keys list holds such
// lines), and a secret key file holds `NAME:<base64 of the 32-byte private seed>` and a newline,
// mode 0600. NAME ends in a number (acme-ci-1) so that a key can be replaced by the next one
// while both are trusted. Everything here reads hostile text (a manifest, an environment
// variable, a file anyone may have written) without crashing, and no message ever holds a byte
// of a secret.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache::trust {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;
using KeyBytes = std::array<uint8_t, kKeyBytes>;

// Standard base64 with padding; decode is strict (exact length, padding only at the end, unused
// bits zero: one text per byte string), or nothing.
std::string base64_encode(const uint8_t* bytes, size_t size);
std::optional<std::string> base64_decode(std::string_view text);

// Throws an input Error saying what is wrong with `name` and what a name looks like.
void check_key_name(std::string_view name);

struct PublicKey {
  std::string name;
  KeyBytes bytes{};
  bool operator==(const PublicKey&) const = default;
};

// "NAME:<base64>"
std::string public_key_line(const PublicKey& key);
// Reads "NAME:<base64>" (surrounding spaces ignored); throws an input Error naming what is wrong
// (`origin` says where the line came from): a valid name and exactly 32 bytes.
PublicKey parse_public_key(std::string_view line, const std::string& origin);

// A secret key: its name and the private seed. Not copyable, wiped when destroyed, never printed.
class SecretKey {
 public:
  SecretKey(std::string name, const KeyBytes& seed);
  ~SecretKey();
  SecretKey(SecretKey&& other) noexcept;
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  SecretKey& operator=(SecretKey&&) = delete;

  const std::string& name() const { return name_; }
  const KeyBytes& secret_seed() const { return seed_; }
  // Derived once: a push checks it against every entry it writes.
  const PublicKey& public_key() const { return public_; }

 private:
  std::string name_;
  KeyBytes seed_;
  PublicKey public_;
};

// A new key from the system's random source; throws an input Error for a bad name.
SecretKey generate_key(const std::string& name);
// Writes the secret key file: created with mode 0600, O_EXCL and O_NOFOLLOW (never over an
// existing file, never through a symlink), synced. Throws an operational Error otherwise.
void write_secret_key(const std::filesystem::path& path, const SecretKey& key);
// Reads a secret key file; refuses a file group or others may read (chmod 600), a symlink, a
// file that is not regular, and malformed content. Messages never quote the content.
SecretKey read_secret_key(const std::filesystem::path& path);
// The text of a secret key file (what write_secret_key writes, and what the Action's input will
// hold); throws an input Error naming `origin`, never quoting the text.
SecretKey parse_secret_key(std::string_view text, const std::string& origin);

// The public keys an entry's signature may come from, by name.
class TrustedKeys {
 public:
  // Throws an input Error for a second, different key of the same name (one name, one key: a
  // replaced key takes the next number).
  void add(const PublicKey& key);
  const PublicKey* find(std::string_view name) const;
  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }

 private:
  std::map<std::string, PublicKey, std::less<>> keys_;
};

}  // namespace neuron_cache::trust
