// Every setting neuron-cache reads from the environment, files and the manifest, resolved in one
// place with the precedence optimum-neuron, libneuronxla and huggingface_hub use, and the origin
// of each value kept so `neuron-cache config show` can say where it came from (like `ccache -p`).
// No other library code reads the process environment for a setting (tests/packaging/
// settings-only.sh checks it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::config {

// The process environment, or a fixed one in tests.
class Environment {
 public:
  static Environment from_process();
  explicit Environment(std::map<std::string, std::string> vars = {}) : vars_(std::move(vars)) {}
  // Unset and empty variables both read as nothing, as huggingface_hub treats them.
  std::optional<std::string> get(const std::string& name) const;
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }
  const std::map<std::string, std::string>& variables() const { return vars_; }

 private:
  std::map<std::string, std::string> vars_;
};

// NEURON_CACHE_S3_RECHECK_MS when unset: long enough for a second writer that checked the same
// index version to land its write (one PUT of a few KiB), short enough to add little to a push.
inline constexpr long kDefaultS3RecheckMs = 2000;

// NEURON_CACHE_PROGRESS_INTERVAL_MS when unset: a plain progress line every 10 s keeps a CI log
// readable over a long transfer.
inline constexpr long kDefaultProgressIntervalMs = 10000;

// NEURON_CACHE_HEARTBEAT_SECONDS when unset: a compile that runs for an hour says it is still
// running every 2 minutes, often enough that a CI log never looks stuck, rarely enough to stay
// readable.
inline constexpr long kDefaultHeartbeatSeconds = 120;

struct Setting {
  std::string value;   // empty when unset
  std::string origin;  // "--cache-dir", "NEURON_COMPILE_CACHE_URL", "default", "unset", a file
};

// Values given on the command line; they win over everything else.
struct SettingOverrides {
  std::optional<std::string> cache_dir;
  std::optional<std::string> cache_repo;
  std::optional<std::string> compiler_version;
  bool verbose = false;                   // --verbose: the debug log on
  std::optional<std::string> max_size;    // cleanup --max-size
  std::vector<std::string> trusted_keys;  // --trusted-key, repeated
  bool require_signatures = false;        // --require-signatures
};

// What a manifest declares about the settings: one layer of the resolution. docs/configuration.md
// places it for each setting: above the environment for the cache repo and the
// compiler version (the project's own declaration), below it for the cache folder (libneuronxla's
// variables decide where the machine keeps its cache).
struct ManifestLayer {
  std::string file;  // the manifest, named in origins
  std::optional<std::string> cache_repo;
  std::optional<std::string> cache_dir;  // already made absolute against the manifest's folder
  std::optional<std::string> compiler_version;
  std::optional<std::vector<std::string>> trusted_keys;  // public key lines
  std::optional<bool> require_signatures;
};

struct Settings {
  Setting cache_dir;
  bool cache_dir_is_s3 = false;   // an s3:// URL: not a local path, local commands refuse it
  bool caching_disabled = false;  // --no_cache / --no-cache in NEURON_CC_FLAGS
  Setting cache_repo;
  // Whether the cache repo was named for this run (--repo, the manifest, CUSTOM_CACHE_REPO), not
  // taken from the saved file or optimum-neuron's default: what gc --apply requires.
  bool cache_repo_named = false;
  Setting token;  // the secret itself: print only mask_token(token.value)
  Setting endpoint;
  // HF_HUB_OFFLINE (or NEURON_CACHE_OFFLINE): no request to the Hugging Face Hub, as a store or
  // for model revisions. It never makes an S3 or folder store offline.
  bool offline = false;
  Setting offline_origin;  // value "true"/"false"
  // NEURON_CACHE_OFFLINE: no store is asked anything, whatever its kind (the Hub too).
  // The front end that runs the tool (NEURON_CACHE_FRONT_END: "cmake", "bazel", set by the CMake
  // module and the Bazel rule; empty: the command line): advice is worded for it.
  std::string front_end;
  bool store_offline = false;
  Setting store_offline_origin;  // value "true"/"false"
  Setting hf_home;
  Setting hf_hub_cache;        // where huggingface_hub keeps downloaded files
  Setting custom_cache_file;   // $HF_HOME/optimum_neuron_custom_cache
  Setting compiler_version;    // full neuronx-cc version, or empty when unknown
  Setting installed_compiler;  // what `neuronx-cc --version` said (detect_compiler), or empty
  Setting cc_flags;            // NEURON_CC_FLAGS: added to every compile, part of every key
  bool seeding = true;         // NEURON_CACHE_SEED=0: compiles start from an empty staging cache
  Setting seeding_origin;      // value "true"/"false"
  // NEURON_CACHE_TIMEOUT_MS (alias: NEURON_CACHE_HUB_TIMEOUT_MS): when the Hub or S3 counts as
  // unreachable, and how long a shared folder's commit waits for its index lock.
  Setting timeout_ms;
  Setting retry_base_ms;  // NEURON_CACHE_RETRY_BASE_MS: shorter retry waits; empty: 1 s
  // SSL_CERT_FILE and SSL_CERT_DIR (OpenSSL's names): the trusted certificates, where the
  // distribution keeps them elsewhere than the release's libcurl looks (net/tls_trust.h).
  Setting ssl_cert_file;
  Setting ssl_cert_dir;
  // NEURON_CACHE_S3_RECHECK_MS: how long after writing an index file to an S3 store that ignores
  // conditional writes it is read again, to catch a writer that replaced it meanwhile.
  Setting s3_recheck_ms;
  // NEURON_CACHE_S3_SSE: the server-side encryption S3 uploads ask for ("AES256" or "aws:kms"),
  // for buckets whose policy refuses unencrypted PUTs; NEURON_CACHE_S3_SSE_KMS_KEY_ID the KMS
  // key with aws:kms. Unset: the bucket's default encryption.
  Setting s3_sse;
  Setting s3_sse_kms_key_id;
  // Transfer progress (report/progress.h). Off with HF_HUB_DISABLE_PROGRESS_BARS (as
  // huggingface_hub) or TERM=dumb (a terminal that cannot redraw a line); NO_COLOR (no-color.org)
  // drops colour.
  bool progress = true;
  Setting progress_origin;  // value "true"/"false"
  bool colour = true;
  // NEURON_CACHE_PROGRESS_INTERVAL_MS: how often a plain progress line is printed when stderr is
  // not a terminal (tests shorten it).
  Setting progress_interval_ms;
  // NEURON_CACHE_HEARTBEAT_SECONDS: how often a running compile prints a line (its configuration,
  // the time so far, the time expected, its log); tests shorten it.
  Setting heartbeat_seconds;
  // Compile leases (remote/leases.h): NEURON_CACHE_LEASE_SECONDS, how long a lease lives without
  // renewal (default 600, at most 3600); NEURON_CACHE_LEASE_POLL_MS, how often a machine waiting
  // for another's compile looks again (default 15000; tests shorten both); how other machines'
  // messages name this one: RUNNER_NAME (a GitHub runner's name), else the host name.
  Setting lease_seconds;
  Setting lease_poll_ms;
  Setting runner_name;
  // cleanup's size bound: --max-size > NEURON_CACHE_MAX_SIZE (as sccache's SCCACHE_CACHE_SIZE) >
  // none; its value as written ("200GiB"), read by max_size_bytes().
  Setting max_size;
  // The debug log (log/log.h): --verbose, NEURON_CACHE_LOG=debug (as SCCACHE_LOG), or a GitHub
  // re-run with debug logging (RUNNER_DEBUG=1).
  bool debug_log = false;
  Setting debug_log_origin;  // value "true"/"false"
  // Signed entries (trust/signing.h, config/trust_settings.h). The public keys a store entry's
  // signature may come from, one per line: --trusted-key > NEURON_CACHE_TRUSTED_KEYS > the
  // manifest's trusted_keys (the nearest layer's list, whole). Whether only entries they signed
  // are installed: any of --require-signatures, NEURON_CACHE_REQUIRE_SIGNATURES and the
  // manifest's require_signatures turns it on, and no layer turns another's off. The secret key
  // file pushes sign with: NEURON_CACHE_SIGNING_KEY (a path, never the key).
  Setting trusted_keys;
  bool require_signatures = false;
  Setting require_signatures_origin;  // value "true"/"false"
  Setting signing_key;
  // CUSTOM_CACHE_REPO set but not used because the manifest's cache_repo wins, or empty.
  std::string cache_repo_note;
  std::vector<std::string> warnings;

  // Everything but the compiler version unless --compiler-version or the manifest gives it:
  // detecting it runs `neuronx-cc --version` (seconds, up to a minute), which only commands that
  // key or scan by compiler need (detect_compiler).
  static Settings resolve(const Environment& env, const SettingOverrides& overrides,
                          const ManifestLayer& manifest = {});
  // The same resolution with a manifest's layer added (a compiler version already detected is
  // kept, not detected again).
  Settings with_manifest(const ManifestLayer& manifest) const;
  // Runs `neuronx-cc --version` from PATH once, unless --compiler-version gave the version.
  void detect_compiler(const Environment& env);

  // The local cache root; throws an input Error when it is an s3:// URL.
  std::string local_cache_root() const;
  // The compiler version; throws an input Error explaining how to give it when unknown.
  std::string require_compiler_version() const;
  // timeout_ms; throws an input Error when it is not a positive number.
  std::chrono::milliseconds timeout() const;
  // timeout_ms when one of its variables sets it, else nothing (the store's own default).
  std::optional<std::chrono::milliseconds> timeout_if_set() const;
  // NEURON_CACHE_RETRY_BASE_MS, or nothing; throws an input Error when it is not a number.
  std::optional<std::chrono::milliseconds> retry_base() const;
  // s3_recheck_ms; throws an input Error when it is not a number >= 0.
  std::chrono::milliseconds s3_recheck() const;
  // progress_interval_ms; throws an input Error when it is not a positive number.
  std::chrono::milliseconds progress_interval() const;
  // heartbeat_seconds; throws an input Error when it is not a positive number.
  std::chrono::seconds compile_heartbeat() const;
  // lease_seconds and lease_poll_ms; throw an input Error when not a positive number (or, for
  // lease_seconds, past lease::kMaxTtlSeconds).
  std::chrono::seconds lease_ttl() const;
  std::chrono::milliseconds lease_poll() const;
  // max_size in bytes (format::parse_size), or nothing when unset; throws an input Error naming
  // its origin and the accepted forms when it is not a size.
  std::optional<uint64_t> max_size_bytes() const;

  // What the resolution was made from, for with_manifest.
  Environment environment;
  SettingOverrides given;
  ManifestLayer manifest_layer;
  bool compiler_detected = false;

 private:
  void choose_compiler();
};

// Writes the default Hub cache repo where optimum-neuron keeps it ($HF_HOME/
// optimum_neuron_custom_cache, no trailing newline), atomically. Returns the file path.
std::string save_custom_cache_repo(const Settings& settings, const std::string& repo);

// "hf_****abcd": never more than the last 4 characters of a token.
std::string mask_token(const std::string& token);

// The version in `neuronx-cc --version` output ("NeuronX Compiler version 2.21.33363.0+82129205").
std::optional<std::string> parse_compiler_version_output(const std::string& output);

}  // namespace neuron_cache::config
