// One place that knows every secret the tool holds and replaces it by its mask in everything the
// tool writes: logs of the commands it runs, their live output, reports, messages. The secrets are
// the Hub token and the value of every environment variable named like a secret (Settings::
// resolve), and the AWS secret key and session token wherever they were read (resolve_aws_access).
// The compile command receives HF_TOKEN on purpose, so whatever it prints must pass through here.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::config {

// Replaces each known secret by mask_token(secret). A copy in another case is the secret too, and
// so is a beginning of one long enough to be secret material by itself (the token minus its last
// character): half of the secret, and no less than the shortest secret.
class Redactor {
 public:
  explicit Redactor(std::vector<std::string> secrets = {});
  // `text` masked. With `more_follows` (a stream read in chunks), a beginning of a secret that
  // runs to the end of `text` is left as it is, for the next chunk to complete.
  std::string operator()(std::string_view text, bool more_follows = false) const;
  // The length of the longest end of `text` that could begin a secret (not all of it).
  size_t unfinished_at_end(std::string_view text) const;
  const std::vector<std::string>& secrets() const { return secrets_; }

 private:
  std::vector<std::string> secrets_;  // longest first
  std::vector<std::string> folded_;   // the same, lowercase
};

// Redacts a stream read in chunks: a secret split across two chunks is still found, because the
// end of a chunk that could begin a secret is held back until the next one (or finish(), where a
// long enough beginning of a secret is masked as one).
class StreamRedactor {
 public:
  explicit StreamRedactor(Redactor redactor) : redactor_(std::move(redactor)) {}
  // What can be written now.
  std::string feed(std::string_view chunk);
  // Whatever was held back, at the end of the stream.
  std::string finish();

 private:
  Redactor redactor_;
  std::string pending_;
};

// Whether an environment variable's name says it holds a credential: TOKEN, SECRET, PASSWORD or
// KEY in it, in any case (HF_TOKEN, AWS_SECRET_ACCESS_KEY, MY_API_KEY, db_password), unless it
// ends in _PATH, _FILE or _DIR, which name where a secret is kept (HF_TOKEN_PATH), not the secret.
bool is_secret_name(std::string_view name);

// The secrets of this process, so every writer can redact without being handed them. Values
// shorter than 8 characters are not treated as secrets (masking "1" everywhere would garble
// output and protect nothing).
void add_secret(const std::string& secret);
// add_secret of the value of each variable of `variables` named like a secret.
void add_secrets_named_in(const std::map<std::string, std::string>& variables);
Redactor known_secrets();
std::string redact(std::string_view text);

}  // namespace neuron_cache::config
