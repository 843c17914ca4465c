#include "neuron_cache/config/redact.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "neuron_cache/config/settings.h"

namespace neuron_cache::config {
namespace {

constexpr size_t kShortestSecret = 8;
constexpr std::string_view kSecretWords[] = {"TOKEN", "SECRET", "PASSWORD", "KEY"};

std::mutex& secrets_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<std::string>& process_secrets() {
  static std::vector<std::string> secrets;
  return secrets;
}

// The length of the longest end of `text` that is the beginning of a secret (not all of it).
size_t secret_prefix_at_end(std::string_view text, const std::vector<std::string>& secrets) {
  size_t longest = 0;
  for (const auto& secret : secrets) {
    size_t most = std::min(text.size(), secret.size() - 1);
    for (size_t n = most; n > longest; --n) {
      if (text.substr(text.size() - n) == std::string_view(secret).substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

Redactor::Redactor(std::vector<std::string> secrets) {
  for (auto& secret : secrets) {
    bool known = std::find(secrets_.begin(), secrets_.end(), secret) != secrets_.end();
    if (secret.size() >= kShortestSecret && !known) secrets_.push_back(std::move(secret));
  }
  // Longest first: a secret that contains another is masked whole.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
}

std::string Redactor::operator()(std::string_view text) const {
  std::string out(text);
  for (const auto& secret : secrets_) {
    std::string mask = mask_token(secret);
    for (size_t at = out.find(secret); at != std::string::npos;
         at = out.find(secret, at + mask.size())) {
      out.replace(at, secret.size(), mask);
    }
  }
  return out;
}

std::string StreamRedactor::feed(std::string_view chunk) {
  pending_ = redactor_(pending_ + std::string(chunk));
  size_t keep = secret_prefix_at_end(pending_, redactor_.secrets());
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ready;
}

std::string StreamRedactor::finish() {
  return std::exchange(pending_, "");
}

bool is_secret_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view place : {"_PATH", "_FILE", "_DIR"}) {
    if (upper.ends_with(place)) return false;
  }
  return std::any_of(std::begin(kSecretWords), std::end(kSecretWords),
                     [&](std::string_view word) { return upper.find(word) != std::string::npos; });
}

void add_secret(const std::string& secret) {
  if (secret.size() < kShortestSecret) return;
  std::lock_guard lock(secrets_mutex());
  auto& secrets = process_secrets();
  if (std::find(secrets.begin(), secrets.end(), secret) == secrets.end()) secrets.push_back(secret);
}

void add_secrets_named_in(const std::map<std::string, std::string>& variables) {
  for (const auto& [name, value] : variables) {
    if (is_secret_name(name)) add_secret(value);
  }
}

Redactor known_secrets() {
  std::lock_guard lock(secrets_mutex());
  return Redactor(process_secrets());
}

std::string redact(std::string_view text) {
  return known_secrets()(text);
}

}  // namespace neuron_cache::config
