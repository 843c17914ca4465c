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

// What a mask says the hidden secret was: "hf_" a Hub token, "aws_secret_" an AWS secret key,
// "my_api_key_" the value of MY_API_KEY. A mask is the label, "****", and for a secret of 12
// characters or more its last four: "hf_****1234", "aws_secret_****EKEY".
inline constexpr const char* kHubTokenLabel = "hf_";
inline constexpr const char* kAwsKeyIdLabel = "aws_key_id_";
inline constexpr const char* kAwsSecretLabel = "aws_secret_";
inline constexpr const char* kAwsSessionLabel = "aws_session_";
inline constexpr const char* kWebIdentityLabel = "web_identity_token_";
inline constexpr const char* kContainerTokenLabel = "container_token_";
inline constexpr const char* kSsoTokenLabel = "sso_token_";
inline constexpr const char* kSigningKeyLabel = "signing_key_";
inline constexpr const char* kSecretLabel = "secret_";  // a secret of no known kind
std::string mask(const std::string& secret, const std::string& label);
// The label of the value of the variable `name` (named like a secret): "db_password_".
std::string label_of_variable(std::string_view name);

// Replaces each known secret by its mask. A copy in another case is the secret too, and so is a
// beginning of one long enough to be secret material by itself (the token minus its last
// character): half of the secret, and no less than the shortest secret.
class Redactor {
 public:
  // `labels`: each secret's label (kSecretLabel for one not in it).
  explicit Redactor(std::vector<std::string> secrets = {},
                    std::map<std::string, std::string> labels = {});
  // `text` masked. With `more_follows` (a stream read in chunks), a beginning of a secret that
  // runs to the end of `text` is left as it is, for the next chunk to complete.
  std::string operator()(std::string_view text, bool more_follows = false) const;
  // The length of the longest end of `text` that could begin a secret (not all of it).
  size_t unfinished_at_end(std::string_view text) const;
  const std::vector<std::string>& secrets() const { return secrets_; }
  const std::map<std::string, std::string>& labels() const { return labels_; }

 private:
  std::vector<std::string> secrets_;  // longest first
  std::vector<std::string> folded_;   // the same, lowercase
  std::map<std::string, std::string> labels_;
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
// ends in _PATH, _FILE or _DIR, which name where a secret is kept (HF_TOKEN_PATH), not the secret,
// or is NEURON_CACHE_SIGNING_KEY (a path too: the key file's secret is masked once it is read).
bool is_secret_name(std::string_view name);

// The secrets of this process, so every writer can redact without being handed them. Values
// shorter than 8 characters are not treated as secrets (masking "1" everywhere would garble
// output and protect nothing). A secret's label is the one its reader gave (the Hub token, an
// AWS key), which replaces the label of the variable it was first seen in.
void add_secret(const std::string& secret, const std::string& label);
// The value of each variable of `variables` named like a secret, labelled by the variable's name
// unless a reader labelled it already.
void add_secrets_named_in(const std::map<std::string, std::string>& variables);
Redactor known_secrets();
std::string redact(std::string_view text);

}  // namespace neuron_cache::config
