#include "neuron_cache/config/redact.h"

#include <algorithm>
#include <utility>

#include "neuron_cache/config/settings.h"

namespace neuron_cache::config {
namespace {

constexpr size_t kShortestSecret = 8;

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

void add_secret(const std::string& secret) {
  std::lock_guard lock(secrets_mutex());
  process_secrets().push_back(secret);
}

Redactor known_secrets() {
  std::lock_guard lock(secrets_mutex());
  return Redactor(process_secrets());
}

std::string redact(std::string_view text) {
  return known_secrets()(text);
}

}  // namespace neuron_cache::config
