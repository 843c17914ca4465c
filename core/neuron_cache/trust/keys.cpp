#include "neuron_cache/trust/keys.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/trust/ed25519.h"

namespace neuron_cache::trust {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
// A public key line or a secret file is a name (64 bytes), ':' and 44 base64 characters: anything
// much longer is refused before it is looked at.
constexpr size_t kMaxKeyText = 256;
constexpr const char* kKeyShape = "NAME:<base64 of 32 bytes>";

int base64_value(char c) {
  const char* at = std::strchr(kAlphabet, c);
  return c != '\0' && at ? static_cast<int>(at - kAlphabet) : -1;
}

// "NAME:<base64 of 32 bytes>" split and decoded, or a reason it is not. The reason never quotes
// the text: for a secret file, the text is the secret.
struct KeyText {
  std::string name;
  KeyBytes bytes{};
};
std::optional<KeyText> split_key_text(std::string_view text, std::string* problem) {
  size_t colon = text.find(':');
  if (text.size() > kMaxKeyText || colon == std::string_view::npos) {
    *problem = std::string("it is not ") + kKeyShape;
    return std::nullopt;
  }
  std::string_view name = text.substr(0, colon);
  if (auto name_problem = artifact_index::key_name_problem(name)) {
    *problem = "its key name is not valid (" + *name_problem + ")";
    return std::nullopt;
  }
  std::optional<std::string> bytes = base64_decode(text.substr(colon + 1));
  if (!bytes || bytes->size() != kKeyBytes) {
    *problem = "what follows the key name is not the base64 of 32 bytes";
    return std::nullopt;
  }
  KeyText out{std::string(name), {}};
  std::memcpy(out.bytes.data(), bytes->data(), kKeyBytes);
  OPENSSL_cleanse(bytes->data(), bytes->size());
  return out;
}

std::string_view trimmed(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

std::string shown(const std::filesystem::path& path) {
  return printable(path.string());
}

}  // namespace

std::string base64_encode(const uint8_t* bytes, size_t size) {
  std::string out;
  for (size_t i = 0; i < size; i += 3) {
    uint32_t chunk = static_cast<uint32_t>(bytes[i]) << 16;
    if (i + 1 < size) chunk |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (i + 2 < size) chunk |= bytes[i + 2];
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  std::string out;
  uint32_t chunk = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    int value = base64_value(text[i]);
    if (value < 0) return std::nullopt;
    chunk = (chunk << 6) | static_cast<uint32_t>(value);
    if (i % 4 == 3) {
      out += static_cast<char>(chunk >> 16);
      out += static_cast<char>(chunk >> 8);
      out += static_cast<char>(chunk);
      chunk = 0;
    }
  }
  // The last group's unused bits must be zero, else two texts would decode to one byte string.
  if (padding == 2) {
    if (chunk & 0xf) return std::nullopt;
    out += static_cast<char>(chunk >> 4);
  } else if (padding == 1) {
    if (chunk & 0x3) return std::nullopt;
    out += static_cast<char>(chunk >> 10);
    out += static_cast<char>(chunk >> 2);
  }
  return out;
}

void check_key_name(std::string_view name) {
  if (auto problem = artifact_index::key_name_problem(name)) {
    throw input_error("the key name \"" + printable(std::string(name.substr(0, 80))) +
                      "\" is not valid: " + *problem +
                      "; a name looks like acme-ci-1 (letters, digits, '.', '_', '-', at most " +
                      std::to_string(artifact_index::kMaxKeyName) + " bytes)");
  }
}

std::string public_key_line(const PublicKey& key) {
  return key.name + ":" + base64_encode(key.bytes.data(), key.bytes.size());
}

PublicKey parse_public_key(std::string_view line, const std::string& origin) {
  std::string problem;
  auto parsed = split_key_text(trimmed(line), &problem);
  if (!parsed) {
    throw input_error(origin + ": not a public key: " + problem +
                      "; `neuron-cache key public SECRETFILE` prints the line to use");
  }
  return {parsed->name, parsed->bytes};
}

SecretKey::SecretKey(std::string name, const KeyBytes& seed)
    : name_(std::move(name)), seed_(seed), public_{name_, ed25519::public_of_seed(seed_)} {}

SecretKey::~SecretKey() {
  OPENSSL_cleanse(seed_.data(), seed_.size());
}

SecretKey::SecretKey(SecretKey&& other) noexcept
    : name_(std::move(other.name_)), seed_(other.seed_), public_(other.public_) {
  OPENSSL_cleanse(other.seed_.data(), other.seed_.size());
}

SecretKey generate_key(const std::string& name) {
  check_key_name(name);
  KeyBytes seed{};
  if (RAND_priv_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
    throw operational_error(
        "could not draw a new key from the system's random source (OpenSSL "
        "RAND_priv_bytes failed): try again");
  }
  SecretKey key(name, seed);
  OPENSSL_cleanse(seed.data(), seed.size());
  return key;
}

SecretKey parse_secret_key(std::string_view text, const std::string& origin) {
  // One line and at most one newline: a file with more is not one this tool wrote.
  if (text.ends_with("\n")) text.remove_suffix(1);
  std::string problem;
  auto parsed = text.find_first_of("\r\n \t") == std::string_view::npos
                    ? split_key_text(text, &problem)
                    : std::nullopt;
  if (!parsed) {
    if (problem.empty()) problem = "it holds more than one line or a space";
    throw input_error(origin + ": not a neuron-cache secret key (" + problem + "; expected " +
                      kKeyShape + " and a newline, as `neuron-cache key generate` writes)");
  }
  SecretKey key(parsed->name, parsed->bytes);
  OPENSSL_cleanse(parsed->bytes.data(), parsed->bytes.size());
  return key;
}

void write_secret_key(const std::filesystem::path& path, const SecretKey& key) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int error = errno;
    std::string why = error == EEXIST ? "it already exists (a secret key is never overwritten: "
                                        "choose another path or remove the old file yourself)"
                                      : std::strerror(error);
    throw operational_error("could not create the secret key file " + shown(path) + ": " + why);
  }
  std::string text =
      key.name() + ":" + base64_encode(key.secret_seed().data(), key.secret_seed().size()) + "\n";
  bool written = ::fchmod(fd, 0600) == 0 &&
                 ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                 ::fsync(fd) == 0;
  int error = errno;
  OPENSSL_cleanse(text.data(), text.size());
  if (::close(fd) != 0 && written) written = false, error = errno;
  if (!written) {
    ::unlink(path.c_str());
    throw operational_error("could not write the secret key file " + shown(path) + ": " +
                            std::strerror(error));
  }
}

SecretKey read_secret_key(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    std::string why =
        error == ELOOP ? "it is a symbolic link (give the file itself)" : std::strerror(error);
    throw input_error("could not open the secret key file " + shown(path) + ": " + why);
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw input_error("the secret key file " + shown(path) + " is not a regular file");
  }
  if ((info.st_mode & 077) != 0) {
    throw input_error("the secret key file " + shown(path) +
                      " may be read by other users: run `chmod 600 " + shown(path) +
                      "` (and consider the key exposed if others could read it)");
  }
  char buffer[kMaxKeyText + 2];
  ssize_t size = ::read(fd, buffer, sizeof buffer);
  if (size < 0) {
    throw operational_error("could not read the secret key file " + shown(path) + ": " +
                            std::strerror(errno));
  }
  std::string_view text(buffer, static_cast<size_t>(size));
  if (text.size() > kMaxKeyText) text = "";  // too long: refused below as malformed
  try {
    SecretKey key = parse_secret_key(text, "the secret key file " + shown(path));
    OPENSSL_cleanse(buffer, sizeof buffer);
    return key;
  } catch (...) {
    OPENSSL_cleanse(buffer, sizeof buffer);
    throw;
  }
}

void TrustedKeys::add(const PublicKey& key) {
  check_key_name(key.name);
  auto [at, added] = keys_.emplace(key.name, key);
  if (!added && at->second != key) {
    throw input_error("two different trusted keys are named " + key.name +
                      ": a replaced key takes a new name (the next number, as in acme-ci-2)");
  }
}

const PublicKey* TrustedKeys::find(std::string_view name) const {
  auto at = keys_.find(name);
  return at == keys_.end() ? nullptr : &at->second;
}

}  // namespace neuron_cache::trust
