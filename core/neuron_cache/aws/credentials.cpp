#include "neuron_cache/aws/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "neuron_cache/aws/sources.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/log/log.h"

namespace neuron_cache::aws {
namespace {

using Clock = std::chrono::system_clock;

// A credential document holds a few short strings.
constexpr pyjson::Limits kCredentialDocument{64u << 10, 8, 1000};
// AWS key ids are 16 to 128 characters; secrets and session tokens are opaque but bounded.
constexpr size_t kMaxCredentialText = 8192;

std::string text_of(const pyjson::Json& document, const char* key) {
  auto found = document.find(key);
  if (found == document.end() || !found->is_string()) return "";
  return found->get<std::string>();
}

std::string iso_text(Clock::time_point when) {
  return utc_text(Clock::to_time_t(when));
}

// Fresh until the refresh margin before expiry, or half their lifetime for credentials that live
// shorter than twice the margin (a 5-minute container credential would otherwise be fetched again
// before every request).
bool fresh(const Credentials& credentials, Clock::time_point fetched) {
  if (!credentials.expiration) return true;
  auto margin = std::min<Clock::duration>(kRefreshMargin, (*credentials.expiration - fetched) / 2);
  return Clock::now() < *credentials.expiration - margin;
}

bool usable(const Credentials& credentials) {
  return !credentials.expiration || *credentials.expiration > Clock::now();
}

}  // namespace

std::optional<Clock::time_point> parse_time(std::string_view text) {
  std::optional<int64_t> seconds = parse_utc_timestamp(text);
  if (!seconds) return std::nullopt;
  return Clock::time_point(std::chrono::seconds(*seconds));
}

Credentials checked(Credentials credentials, const std::string& what) {
  config::add_secret(credentials.access_key_id, config::kAwsKeyIdLabel);
  config::add_secret(credentials.secret_access_key, config::kAwsSecretLabel);
  config::add_secret(credentials.session_token, config::kAwsSessionLabel);
  bool whole = !credentials.access_key_id.empty() && !credentials.secret_access_key.empty() &&
               credentials.access_key_id.size() <= kMaxCredentialText &&
               credentials.secret_access_key.size() <= kMaxCredentialText &&
               credentials.session_token.size() <= kMaxCredentialText;
  if (!whole) {
    throw operational_error(what +
                            " answered without a usable access key id and secret: check "
                            "the credential source, or retry later");
  }
  if (!usable(credentials)) {
    throw operational_error(what + " gave credentials that expired at " +
                            iso_text(*credentials.expiration) +
                            ": check the machine's clock, or renew the source's session");
  }
  return credentials;
}

Credentials credentials_from_json(std::string_view body, const std::string& what) {
  std::optional<pyjson::Json> document = pyjson::parse_or_nothing(body, kCredentialDocument);
  if (!document || !document->is_object()) {
    throw operational_error(what +
                            " answered with something that is not a credential document "
                            "(JSON with AccessKeyId and SecretAccessKey)");
  }
  Credentials credentials;
  credentials.access_key_id = text_of(*document, "AccessKeyId");
  credentials.secret_access_key = text_of(*document, "SecretAccessKey");
  credentials.session_token = text_of(*document, "Token");
  if (credentials.session_token.empty())
    credentials.session_token = text_of(*document, "SessionToken");
  std::string expiration = text_of(*document, "Expiration");
  if (!expiration.empty()) {
    credentials.expiration = parse_time(expiration);
    if (!credentials.expiration) {
      throw operational_error(what + " gave an Expiration that is not an ISO 8601 time");
    }
  }
  return checked(std::move(credentials), what);
}

std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes,
                                           const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return std::nullopt;
  if (fd < 0) {
    throw input_error("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  struct stat info {};
  std::string content;
  bool regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  if (regular && static_cast<uint64_t>(info.st_size) <= max_bytes) {
    content.resize(static_cast<size_t>(info.st_size));
    ssize_t n = ::read(fd, content.data(), content.size());
    content.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  ::close(fd);
  if (!regular || static_cast<uint64_t>(info.st_size) > max_bytes) {
    throw input_error(what + " " + path + " is not a regular file of at most " +
                      std::to_string(max_bytes) + " bytes: point its variable at the right file");
  }
  return content;
}

Credentials fetch(const config::AwsSource& source, const config::AwsAccess& access,
                  const FetchOptions& options) {
  using Kind = config::AwsSourceKind;
  log::debug("aws", "fetching credentials from " + std::string(config::source_name(source.kind)) +
                        " (" + source.origin + ")");
  switch (source.kind) {
    case Kind::Keys:
      return checked({source.access_key_id, source.secret_access_key, source.session_token, {}},
                     source.origin);
    case Kind::AssumeRole:
      return fetch_assume_role(source, fetch(*source.role_source, access, options), access,
                               options);
    case Kind::WebIdentity:
      return fetch_web_identity(source, access, options);
    case Kind::Sso:
      return fetch_sso(source, access, options);
    case Kind::Process:
      return fetch_process(source, options);
    case Kind::Container:
      return fetch_container(source, options);
    case Kind::InstanceRole:
      return fetch_instance_role(source, options);
    case Kind::Anonymous:
      break;
  }
  throw operational_error("anonymous access has no credentials to sign with");
}

CredentialProvider::CredentialProvider(config::AwsAccess access, FetchOptions options)
    : access_(std::move(access)), options_(options) {
  if (!access_.source) {
    held_ =
        Credentials{access_.access_key_id, access_.secret_access_key, access_.session_token, {}};
  }
}

Credentials CredentialProvider::current() {
  std::lock_guard lock(mutex_);
  if (held_ && fresh(*held_, fetched_)) return *held_;
  try {
    Clock::time_point now = Clock::now();
    held_ = fetch(*access_.source, access_, options_);
    fetched_ = now;
    if (held_->expiration)
      log::debug("aws", "credentials valid until " + iso_text(*held_->expiration));
  } catch (const Error& error) {
    // A refresh that failed keeps the old credentials while they last: the store may still take
    // them, and the next request asks again.
    if (!held_ || !usable(*held_)) throw;
    log::debug("aws",
               std::string("refresh failed, the current credentials still serve: ") + error.what());
  }
  return *held_;
}

std::string CredentialProvider::describe() {
  std::string text = access_.credentials_origin;
  std::lock_guard lock(mutex_);
  if (held_ && held_->expiration) text += ", expires " + iso_text(*held_->expiration);
  if (held_ && !held_->session_token.empty()) text += ", temporary (with a session token)";
  return text;
}

}  // namespace neuron_cache::aws
