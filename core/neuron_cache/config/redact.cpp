#include "neuron_cache/config/redact.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <utility>

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

std::map<std::string, std::string>& process_labels() {
  static std::map<std::string, std::string> labels;
  return labels;
}

void add_labelled(const std::string& secret, const std::string& label, bool replace_label) {
  if (secret.size() < kShortestSecret) return;
  std::lock_guard lock(secrets_mutex());
  auto& secrets = process_secrets();
  if (std::find(secrets.begin(), secrets.end(), secret) == secrets.end()) secrets.push_back(secret);
  auto [it, added] = process_labels().emplace(secret, label);
  if (!added && replace_label) it->second = label;
}

std::string folded(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// How much of a secret's beginning gives too much of it away: what is left of a half cannot be
// guessed, what is left of the last character can.
size_t telling_length(std::string_view secret) {
  return std::max(kShortestSecret, (secret.size() + 1) / 2);
}

// How many characters of `text` from `at` are the beginning of `secret`.
size_t matching(std::string_view text, size_t at, std::string_view secret) {
  size_t n = 0;
  while (at + n < text.size() && n < secret.size() && text[at + n] == secret[n]) ++n;
  return n;
}

// A copy of a secret, or of a long enough beginning of one, found in a text.
struct Copy {
  size_t at;
  size_t length;
  const std::string* secret;
};

// The copies of `secret` in `lower`, found by its telling beginning (`lowered` is the secret
// lowercase). With `more_follows`, a beginning that runs to the end of `lower` is not one yet.
void add_copies(std::string_view lower, const std::string& lowered, const std::string& secret,
                bool more_follows, std::vector<Copy>& copies) {
  std::string_view start = std::string_view(lowered).substr(0, telling_length(lowered));
  for (size_t at = lower.find(start); at != std::string::npos; at = lower.find(start, at + 1)) {
    size_t length = matching(lower, at, lowered);
    bool unfinished = more_follows && at + length == lower.size() && length < lowered.size();
    if (!unfinished) copies.push_back({at, length, &secret});
  }
}

// The copies to mask, by where they start: the longest first where copies overlap, so a whole
// secret is never cut short by the beginning of another that starts alike.
std::map<size_t, Copy> chosen(std::vector<Copy> copies) {
  std::stable_sort(copies.begin(), copies.end(),
                   [](const Copy& a, const Copy& b) { return a.length > b.length; });
  std::map<size_t, Copy> spans;
  for (const Copy& copy : copies) {
    auto next = spans.upper_bound(copy.at);
    bool overlaps = next != spans.end() && next->first < copy.at + copy.length;
    if (next != spans.begin()) {
      const Copy& before = std::prev(next)->second;
      overlaps = overlaps || before.at + before.length > copy.at;
    }
    if (!overlaps) spans[copy.at] = copy;
  }
  return spans;
}

}  // namespace

std::string mask(const std::string& secret, const std::string& label) {
  if (secret.empty()) return "";
  if (secret.size() < 12) return label + "****";
  return label + "****" + secret.substr(secret.size() - 4);
}

std::string label_of_variable(std::string_view name) {
  // The variables of a known kind are labelled like the same secret read elsewhere.
  static const std::map<std::string_view, const char*> kKnown = {
      {"HF_TOKEN", kHubTokenLabel},
      {"HUGGING_FACE_HUB_TOKEN", kHubTokenLabel},
      {"AWS_ACCESS_KEY_ID", kAwsKeyIdLabel},
      {"AWS_SECRET_ACCESS_KEY", kAwsSecretLabel},
      {"AWS_SESSION_TOKEN", kAwsSessionLabel},
      {"AWS_CONTAINER_AUTHORIZATION_TOKEN", kContainerTokenLabel}};
  if (auto known = kKnown.find(name); known != kKnown.end()) return known->second;
  std::string label;
  for (char c : name) {
    bool plain = std::isalnum(static_cast<unsigned char>(c));
    label += plain ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
  }
  return label + "_";
}

Redactor::Redactor(std::vector<std::string> secrets, std::map<std::string, std::string> labels)
    : labels_(std::move(labels)) {
  for (auto& secret : secrets) {
    bool known = std::find(secrets_.begin(), secrets_.end(), secret) != secrets_.end();
    if (secret.size() >= kShortestSecret && !known) secrets_.push_back(std::move(secret));
  }
  // Longest first: the masks do not depend on the order the secrets were added in.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& secret : secrets_) folded_.push_back(folded(secret));
}

std::string Redactor::operator()(std::string_view text, bool more_follows) const {
  std::string lower = folded(text);
  std::vector<Copy> copies;
  for (size_t i = 0; i < secrets_.size(); ++i)
    add_copies(lower, folded_[i], secrets_[i], more_follows, copies);
  std::string out;
  size_t done = 0;
  for (const auto& [at, copy] : chosen(std::move(copies))) {
    out.append(text.substr(done, at - done));
    auto label = labels_.find(*copy.secret);
    out += mask(*copy.secret, label == labels_.end() ? kSecretLabel : label->second);
    done = at + copy.length;
  }
  out.append(text.substr(done));
  return out;
}

size_t Redactor::unfinished_at_end(std::string_view text) const {
  size_t longest = 0;
  for (const auto& secret : folded_) {
    size_t most = std::min(text.size(), secret.size() - 1);
    std::string end = folded(text.substr(text.size() - most));
    for (size_t n = most; n > longest; --n) {
      if (std::string_view(end).substr(most - n) == std::string_view(secret).substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

std::string StreamRedactor::feed(std::string_view chunk) {
  pending_ = redactor_(pending_ + std::string(chunk), true);
  size_t keep = redactor_.unfinished_at_end(pending_);
  std::string ready = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return ready;
}

std::string StreamRedactor::finish() {
  return redactor_(std::exchange(pending_, ""));
}

bool is_secret_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view place : {"_PATH", "_FILE", "_DIR"}) {
    if (upper.ends_with(place)) return false;
  }
  // Named like a secret, holding where one is kept (the secret key file's path).
  if (upper == "NEURON_CACHE_SIGNING_KEY") return false;
  return std::any_of(std::begin(kSecretWords), std::end(kSecretWords),
                     [&](std::string_view word) { return upper.find(word) != std::string::npos; });
}

void add_secret(const std::string& secret, const std::string& label) {
  add_labelled(secret, label, true);
}

void add_secrets_named_in(const std::map<std::string, std::string>& variables) {
  for (const auto& [name, value] : variables) {
    if (is_secret_name(name)) add_labelled(value, label_of_variable(name), false);
  }
}

Redactor known_secrets() {
  std::lock_guard lock(secrets_mutex());
  return Redactor(process_secrets(), process_labels());
}

std::string redact(std::string_view text) {
  return known_secrets()(text);
}

}  // namespace neuron_cache::config
