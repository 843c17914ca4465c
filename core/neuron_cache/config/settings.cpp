#include "neuron_cache/config/settings.h"

#include <unistd.h>
#include <algorithm>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/config/trust_settings.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/store_name.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/process/process.h"
#include "neuron_cache/sys/safe_dir.h"

extern char** environ;

namespace neuron_cache::config {
namespace {

constexpr const char* kDefaultRepo = "aws-neuron/optimum-neuron-cache";
constexpr const char* kDefaultEndpoint = "https://huggingface.co";
constexpr const char* kCustomCacheFileName = "optimum_neuron_custom_cache";
constexpr long kDefaultHubTimeoutMs = 15000;
constexpr const char* kNotDetected = "not detected yet";

std::string strip(const std::string& text) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  auto begin = std::find_if(text.begin(), text.end(), not_space);
  auto end = std::find_if(text.rbegin(), text.rend(), not_space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

// The stripped content of a small text file, or nothing when it is missing or empty.
std::optional<std::string> read_stripped(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream content;
  content << file.rdbuf();
  std::string value = strip(content.str());
  if (value.empty()) return std::nullopt;
  return value;
}

bool is_truthy(const std::string& value) {
  std::string upper;
  for (char c : value) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper == "1" || upper == "ON" || upper == "YES" || upper == "TRUE";
}

bool env_flag(const Environment& env, const std::string& name) {
  auto value = env.get(name);
  return value && is_truthy(*value);
}

std::vector<std::string> split_flags(const std::string& flags) {
  std::istringstream stream(flags);
  std::vector<std::string> tokens;
  for (std::string token; stream >> token;) tokens.push_back(token);
  return tokens;
}

void resolve_hf_home(Settings& s, const Environment& env) {
  if (auto home = env.get("HF_HOME")) {
    s.hf_home = {*home, "HF_HOME"};
  } else if (auto xdg = env.get("XDG_CACHE_HOME")) {
    s.hf_home = {*xdg + "/huggingface", "XDG_CACHE_HOME"};
  } else {
    s.hf_home = {env.get("HOME").value_or("") + "/.cache/huggingface", "default"};
  }
  if (auto hub = env.get("HF_HUB_CACHE")) {
    s.hf_hub_cache = {*hub, "HF_HUB_CACHE"};
  } else {
    s.hf_hub_cache = {s.hf_home.value + "/hub", "hf_home/hub"};
  }
  s.custom_cache_file = {s.hf_home.value + "/" + kCustomCacheFileName, s.hf_home.origin};
}

// libneuronxla's order: --cache_dir in NEURON_CC_FLAGS, then NEURON_COMPILE_CACHE_URL.
void resolve_cache_dir(Settings& s, const Environment& env, const SettingOverrides& o,
                       const ManifestLayer& m) {
  std::string flags = env.get("NEURON_CC_FLAGS").value_or("");
  // Both forms, in the one reader strip_cache_flags matches: a folder named one way but read
  // another would move the cache silently.
  std::optional<std::string> from_flags = cache_dir_in_flags(flags);
  for (const auto& token : split_flags(flags)) {
    if (token == "--no_cache" || token == "--no-cache") s.caching_disabled = true;
  }
  if (o.cache_dir) {
    s.cache_dir = {*o.cache_dir, "--cache-dir"};
  } else if (from_flags && !from_flags->empty()) {
    s.cache_dir = {url::local_path_of(*from_flags, "NEURON_CC_FLAGS --cache_dir"),
                   "NEURON_CC_FLAGS --cache_dir"};
  } else if (auto url = env.get("NEURON_COMPILE_CACHE_URL")) {
    s.cache_dir = {url::local_path_of(*url, "NEURON_COMPILE_CACHE_URL"),
                   "NEURON_COMPILE_CACHE_URL"};
  } else if (m.cache_dir) {
    s.cache_dir = {*m.cache_dir, "the manifest's cache_dir in " + m.file};
  } else {
    s.cache_dir = {std::string(layout::kDefaultCacheRoot), "default"};
  }
  s.cache_dir_is_s3 = s.cache_dir.value.starts_with("s3://");
  if (s.caching_disabled) {
    s.warnings.push_back(
        "NEURON_CC_FLAGS contains --no_cache: libneuronxla will not use the cache");
  }
}

// The manifest wins over CUSTOM_CACHE_REPO: it is the project's own declaration, checked in with
// the code, while CUSTOM_CACHE_REPO is often a machine-wide default.
void resolve_cache_repo(Settings& s, const Environment& env, const SettingOverrides& o,
                        const ManifestLayer& m) {
  auto custom = env.get("CUSTOM_CACHE_REPO");
  s.cache_repo_named = o.cache_repo || m.cache_repo || custom;
  if (o.cache_repo) {
    s.cache_repo = {*o.cache_repo, "--repo"};
  } else if (m.cache_repo) {
    s.cache_repo = {*m.cache_repo, "the manifest's cache_repo in " + m.file};
    if (custom && *custom != *m.cache_repo) {
      s.cache_repo_note = "CUSTOM_CACHE_REPO=" + *custom + " is not used: " + s.cache_repo.origin +
                          " wins (pass --repo to choose)";
    }
  } else if (custom) {
    s.cache_repo = {*custom, "CUSTOM_CACHE_REPO"};
  } else if (auto saved = read_stripped(s.custom_cache_file.value)) {
    s.cache_repo = {*saved, s.custom_cache_file.value};
  } else if (env_flag(env, "HUGGINGFACE_CO_STAGING")) {
    s.cache_repo = {"", "unset (HUGGINGFACE_CO_STAGING has no default repo)"};
  } else {
    s.cache_repo = {kDefaultRepo, "optimum-neuron's default"};
  }
  // Only a warning here, so commands that do not use the Hub (and `set`, which fixes a bad saved
  // repo) still run; the commands that use the Hub refuse it before any request.
  if (!s.cache_repo.value.empty() && !store_name::is_store_name(s.cache_repo.value)) {
    s.warnings.push_back("the cache repo \"" + s.cache_repo.value + "\" from " +
                         s.cache_repo.origin + " is not a Hub repo id");
  }
}

void resolve_hub(Settings& s, const Environment& env) {
  if (auto token = env.get("HF_TOKEN")) {
    s.token = {strip(*token), "HF_TOKEN"};
  } else if (auto legacy = env.get("HUGGING_FACE_HUB_TOKEN")) {
    s.token = {strip(*legacy), "HUGGING_FACE_HUB_TOKEN"};
  } else {
    auto path_env = env.get("HF_TOKEN_PATH");
    std::string path = path_env.value_or(s.hf_home.value + "/token");
    if (auto stored = read_stripped(path)) {
      s.token = {*stored, path};
    } else {
      s.token = {"", "unset"};
      // The default file is often absent (no `huggingface-cli login`); a path someone set is not.
      if (path_env) {
        s.token.origin = "unset: HF_TOKEN_PATH names " + printable(path) + ", which cannot be read";
        s.warnings.push_back("HF_TOKEN_PATH names " + printable(path) +
                             ", which cannot be read: no Hub token is used; fix the path or unset "
                             "HF_TOKEN_PATH");
      }
    }
  }
  // Known from now on to every writer, which masks it (config/redact.h), with every other
  // credential the environment holds: a compile command may print any of them.
  if (!s.token.value.empty()) add_secret(s.token.value, kHubTokenLabel);
  add_secrets_named_in(env.variables());
  if (auto endpoint = env.get("HF_ENDPOINT")) {
    std::string value = *endpoint;
    while (value.ends_with("/")) value.pop_back();
    url::refuse_userinfo(value, "HF_ENDPOINT");
    s.endpoint = {value, "HF_ENDPOINT"};
  } else {
    s.endpoint = {kDefaultEndpoint, "default"};
  }
  s.front_end = env.get("NEURON_CACHE_FRONT_END").value_or("");
  s.store_offline = env_flag(env, "NEURON_CACHE_OFFLINE");
  s.store_offline_origin = {s.store_offline ? "true" : "false",
                            env.get("NEURON_CACHE_OFFLINE") ? "NEURON_CACHE_OFFLINE" : "default"};
  s.offline = s.store_offline || env_flag(env, "HF_HUB_OFFLINE");
  const char* origin = s.store_offline             ? "NEURON_CACHE_OFFLINE"
                       : env.get("HF_HUB_OFFLINE") ? "HF_HUB_OFFLINE"
                                                   : "default";
  s.offline_origin = {s.offline ? "true" : "false", origin};
}

// The variable `name`, its name as the origin; `fallback` when it is not set.
Setting from_env(const Environment& env, const std::string& name, Setting fallback) {
  if (auto value = env.get(name)) return {*value, name};
  return fallback;
}

// How transfer progress is shown: huggingface_hub's switch, the terminal's kind, no-color.org.
void resolve_progress(Settings& s, const Environment& env) {
  bool dumb = env.get("TERM") == "dumb";
  bool disabled = env_flag(env, "HF_HUB_DISABLE_PROGRESS_BARS");
  s.progress = !dumb && !disabled;
  s.progress_origin = {s.progress ? "true" : "false", disabled ? "HF_HUB_DISABLE_PROGRESS_BARS"
                                                      : dumb   ? "TERM"
                                                               : "default"};
  s.colour = !env.get("NO_COLOR");
  s.progress_interval_ms = from_env(env, "NEURON_CACHE_PROGRESS_INTERVAL_MS",
                                    {std::to_string(kDefaultProgressIntervalMs), "default"});
  s.heartbeat_seconds = from_env(env, "NEURON_CACHE_HEARTBEAT_SECONDS",
                                 {std::to_string(kDefaultHeartbeatSeconds), "default"});
}

// Whether the debug log is on: the flag, then NEURON_CACHE_LOG's level, then GitHub's debug re-run.
void resolve_debug_log(Settings& s, const Environment& env, const SettingOverrides& overrides) {
  auto set = [&](bool on, const std::string& origin) {
    s.debug_log = on;
    s.debug_log_origin = {on ? "true" : "false", origin};
  };
  if (overrides.verbose) return set(true, "--verbose");
  if (auto level = env.get("NEURON_CACHE_LOG")) {
    std::string value = *level;
    for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (value == "debug" || value == "trace") return set(true, "NEURON_CACHE_LOG");
    if (value != "off" && value != "error" && value != "warn" && value != "info") {
      s.warnings.push_back("NEURON_CACHE_LOG=" + printable(*level) +
                           " is not a level neuron-cache knows: set it to debug for the debug "
                           "log (off, error, warn and info leave it off)");
    }
    return set(false, "NEURON_CACHE_LOG");
  }
  if (env.get("RUNNER_DEBUG") == "1") return set(true, "RUNNER_DEBUG");
  set(false, "default");
}

// The knobs of neuron-cache itself, and the compile flags every compile and key gets.
void resolve_knobs(Settings& s, const Environment& env) {
  s.cc_flags = from_env(env, "NEURON_CC_FLAGS", {"", "unset"});
  auto seed = env.get("NEURON_CACHE_SEED");
  s.seeding = seed.value_or("1") != "0";
  s.seeding_origin = {s.seeding ? "true" : "false", seed ? "NEURON_CACHE_SEED" : "default"};
  // NEURON_CACHE_HUB_TIMEOUT_MS: its name before it applied to every store.
  s.timeout_ms = from_env(env, "NEURON_CACHE_TIMEOUT_MS",
                          from_env(env, "NEURON_CACHE_HUB_TIMEOUT_MS",
                                   {std::to_string(kDefaultHubTimeoutMs), "default"}));
  s.retry_base_ms =
      from_env(env, "NEURON_CACHE_RETRY_BASE_MS", {"", "default (1 s, doubling up to 30 s)"});
  s.ssl_cert_file = from_env(env, "SSL_CERT_FILE", {"", "unset (the system's bundle)"});
  s.ssl_cert_dir = from_env(env, "SSL_CERT_DIR", {"", "unset"});
  s.s3_recheck_ms =
      from_env(env, "NEURON_CACHE_S3_RECHECK_MS", {std::to_string(kDefaultS3RecheckMs), "default"});
  s.lease_seconds = from_env(env, "NEURON_CACHE_LEASE_SECONDS", {"600", "default"});
  s.lease_poll_ms = from_env(env, "NEURON_CACHE_LEASE_POLL_MS", {"15000", "default"});
  s.runner_name = from_env(env, "RUNNER_NAME", {"", "unset (the host name)"});
  s.s3_sse = from_env(env, "NEURON_CACHE_S3_SSE", {"", "default (the bucket's encryption)"});
  s.s3_sse_kms_key_id = from_env(env, "NEURON_CACHE_S3_SSE_KMS_KEY_ID", {"", "unset"});
  resolve_progress(s, env);
}

// cleanup's size bound: the flag, then the variable (as sccache's SCCACHE_CACHE_SIZE), else none.
void resolve_max_size(Settings& s, const Environment& env, const SettingOverrides& overrides) {
  if (overrides.max_size) {
    s.max_size = {*overrides.max_size, "--max-size"};
  } else {
    s.max_size = from_env(env, "NEURON_CACHE_MAX_SIZE", {"", "unset"});
  }
}

}  // namespace

Environment Environment::from_process() {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t eq = text.find('=');
    if (eq != std::string::npos) vars[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return Environment(std::move(vars));
}

std::optional<std::string> Environment::get(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

Settings Settings::resolve(const Environment& env, const SettingOverrides& overrides,
                           const ManifestLayer& manifest) {
  Settings s;
  s.environment = env;
  s.given = overrides;
  s.manifest_layer = manifest;
  resolve_hf_home(s, env);
  resolve_cache_dir(s, env, overrides, manifest);
  resolve_cache_repo(s, env, overrides, manifest);
  resolve_hub(s, env);
  resolve_knobs(s, env);
  resolve_debug_log(s, env, overrides);
  resolve_max_size(s, env, overrides);
  resolve_trust(s, env, overrides, manifest);
  s.installed_compiler = {"", kNotDetected};
  s.choose_compiler();
  return s;
}

Settings Settings::with_manifest(const ManifestLayer& manifest) const {
  Settings s = resolve(environment, given, manifest);
  if (compiler_detected) {
    s.installed_compiler = installed_compiler;
    s.compiler_detected = true;
    s.choose_compiler();
  }
  return s;
}

// --compiler-version > the manifest's compiler_version > `neuronx-cc --version`.
void Settings::choose_compiler() {
  if (given.compiler_version) {
    compiler_version = {*given.compiler_version, "--compiler-version"};
  } else if (manifest_layer.compiler_version) {
    compiler_version = {*manifest_layer.compiler_version,
                        "the manifest's compiler_version in " + manifest_layer.file};
  } else {
    compiler_version = installed_compiler;
  }
}

void Settings::detect_compiler(const Environment& env) {
  if (given.compiler_version || compiler_detected) return;
  compiler_detected = true;
  installed_compiler = {"", "neuronx-cc is not on PATH"};
  if (auto program = process::find_on_path("neuronx-cc", env.get("PATH").value_or(""))) {
    // neuronx-cc is a Python program: its start-up alone can take seconds.
    process::ProcessResult run =
        process::run_and_capture({*program, "--version"}, std::chrono::seconds(60));
    if (auto version = parse_compiler_version_output(run.output); version && run.exit_code == 0) {
      installed_compiler = {*version, *program + " --version"};
    } else {
      installed_compiler.origin = *program + " --version gave no version";
    }
  }
  choose_compiler();
}

std::string Settings::local_cache_root() const {
  if (cache_dir_is_s3) {
    throw input_error("the cache location " + cache_dir.value + " (from " + cache_dir.origin +
                      ") is an S3 URL, not a local path: pass --cache-dir with a local directory");
  }
  return cache_dir.value;
}

std::string Settings::require_compiler_version() const {
  if (compiler_version.value.empty()) {
    throw input_error("the neuronx-cc version is unknown (" + compiler_version.origin +
                      "): pass --compiler-version, e.g. --compiler-version 2.21.33363.0+82129205");
  }
  return compiler_version.value;
}

std::optional<std::chrono::milliseconds> Settings::timeout_if_set() const {
  if (timeout_ms.origin == "default") return std::nullopt;
  return timeout();
}

std::chrono::milliseconds Settings::timeout() const {
  const std::string& value = timeout_ms.value;
  try {
    size_t used = 0;
    long ms = std::stol(value, &used);
    if (used == value.size() && ms > 0) return std::chrono::milliseconds(ms);
  } catch (const std::exception&) {
    // reported below
  }
  throw input_error(timeout_ms.origin + " must be a positive number of milliseconds (got \"" +
                    value + "\")");
}

std::optional<std::chrono::milliseconds> Settings::retry_base() const {
  if (retry_base_ms.value.empty()) return std::nullopt;
  try {
    return std::chrono::milliseconds(std::stol(retry_base_ms.value));
  } catch (const std::exception&) {
    throw input_error("NEURON_CACHE_RETRY_BASE_MS must be a number of milliseconds");
  }
}

std::chrono::milliseconds Settings::s3_recheck() const {
  const std::string& value = s3_recheck_ms.value;
  if (!value.empty() && value.size() <= 9 &&
      value.find_first_not_of("0123456789") == std::string::npos) {
    return std::chrono::milliseconds(std::stol(value));
  }
  throw input_error(s3_recheck_ms.origin + " must be a number of milliseconds >= 0 (got \"" +
                    printable(value) + "\")");
}

namespace {

// A setting that must be a positive whole number of `unit`s.
int64_t positive(const Setting& setting, const std::string& unit) {
  const std::string& value = setting.value;
  if (!value.empty() && value.size() <= 9 &&
      value.find_first_not_of("0123456789") == std::string::npos && std::stol(value) > 0) {
    return std::stol(value);
  }
  throw input_error(setting.origin + " must be a positive number of " + unit + " (got \"" +
                    printable(value) + "\")");
}

}  // namespace

std::chrono::milliseconds Settings::progress_interval() const {
  return std::chrono::milliseconds(positive(progress_interval_ms, "milliseconds"));
}

std::chrono::seconds Settings::compile_heartbeat() const {
  return std::chrono::seconds(positive(heartbeat_seconds, "seconds"));
}

std::chrono::seconds Settings::lease_ttl() const {
  int64_t seconds = positive(lease_seconds, "seconds");
  // Other machines read a lease living longer past its heartbeat as damaged (format/lease.h).
  if (seconds > lease::kMaxTtlSeconds)
    throw input_error(lease_seconds.origin + " must be at most " +
                      std::to_string(lease::kMaxTtlSeconds) + " seconds (got " +
                      std::to_string(seconds) +
                      "): the holder renews its lease every third of it; give a shorter one");
  return std::chrono::seconds(seconds);
}

std::chrono::milliseconds Settings::lease_poll() const {
  return std::chrono::milliseconds(positive(lease_poll_ms, "milliseconds"));
}

std::optional<uint64_t> Settings::max_size_bytes() const {
  if (max_size.value.empty()) return std::nullopt;
  return format::parse_size(max_size.value, max_size.origin);
}

std::string save_custom_cache_repo(const Settings& settings, const std::string& repo) {
  hub_names::require_repo_id(repo, "the cache repo", "give it as org/name");
  std::filesystem::path file = settings.custom_cache_file.value;
  try {
    sys::replace_file(file, repo);  // folders 0755, the file 0644, whatever the umask
  } catch (const std::exception& e) {
    throw operational_error("cannot save the cache repo in " + file.string() + ": " + e.what() +
                            ": check that " + file.parent_path().string() +
                            " is writable (or set HF_HOME)");
  }
  return file.string();
}

std::string mask_token(const std::string& token) {
  return mask(token, kHubTokenLabel);
}

std::optional<std::string> parse_compiler_version_output(const std::string& output) {
  // The first "version" followed by digits.digits.digits[.digits][+suffix].
  for (size_t at = output.find("ersion"); at != std::string::npos;
       at = output.find("ersion", at + 1)) {
    size_t start = output.find_first_not_of(" \t:", at + 6);
    if (start == std::string::npos || !std::isdigit(static_cast<unsigned char>(output[start]))) {
      continue;
    }
    size_t end = output.find_first_not_of("0123456789.+abcdefABCDEF", start);
    std::string version = output.substr(start, end == std::string::npos ? end : end - start);
    while (!version.empty() && (version.back() == '.' || version.back() == '+')) version.pop_back();
    if (std::count(version.begin(), version.end(), '.') >= 2) return version;
  }
  return std::nullopt;
}

}  // namespace neuron_cache::config
