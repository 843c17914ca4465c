// Every setting neuron-cache reads from the environment and files, resolved in one place with
// the precedence optimum-neuron, libneuronxla and huggingface_hub use, and the origin of each
// value kept so `neuron-cache config show` can say where it came from (like `ccache -p`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache {

// The process environment, or a fixed one in tests.
class Environment {
 public:
  static Environment from_process();
  explicit Environment(std::map<std::string, std::string> vars = {}) : vars_(std::move(vars)) {}
  // Unset and empty variables both read as nothing, as huggingface_hub treats them.
  std::optional<std::string> get(const std::string& name) const;
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }

 private:
  std::map<std::string, std::string> vars_;
};

struct Setting {
  std::string value;   // empty when unset
  std::string origin;  // "--cache-dir", "NEURON_COMPILE_CACHE_URL", "default", "unset", a file
};

// Values given on the command line; they win over everything else.
struct SettingOverrides {
  std::optional<std::string> cache_dir;
  std::optional<std::string> cache_repo;
  std::optional<std::string> compiler_version;
};

struct Settings {
  Setting cache_dir;
  bool cache_dir_is_s3 = false;   // an s3:// URL: not a local path, local commands refuse it
  bool caching_disabled = false;  // --no_cache / --no-cache in NEURON_CC_FLAGS
  Setting cache_repo;
  Setting token;  // the secret itself: print only mask_token(token.value)
  Setting endpoint;
  bool offline = false;
  Setting offline_origin;  // value "true"/"false"
  Setting hf_home;
  Setting hf_hub_cache;       // where huggingface_hub keeps downloaded files
  Setting custom_cache_file;  // $HF_HOME/optimum_neuron_custom_cache
  Setting compiler_version;   // full neuronx-cc version, or empty when unknown
  std::vector<std::string> warnings;

  // Everything but the compiler version unless --compiler-version gave it: detecting it runs
  // `neuronx-cc --version` (seconds, up to a minute), which only commands that key or scan by
  // compiler need (detect_compiler).
  static Settings resolve(const Environment& env, const SettingOverrides& overrides);
  // Runs `neuronx-cc --version` from PATH once, unless the version is already known.
  void detect_compiler(const Environment& env);

  // The local cache root; throws an input Error when it is an s3:// URL.
  std::string local_cache_root() const;
  // The compiler version; throws an input Error explaining how to give it when unknown.
  std::string require_compiler_version() const;
};

// Writes the default Hub cache repo where optimum-neuron keeps it ($HF_HOME/
// optimum_neuron_custom_cache, no trailing newline), atomically. Returns the file path.
std::string save_custom_cache_repo(const Settings& settings, const std::string& repo);

// "hf_****abcd": never more than the last 4 characters of a token.
std::string mask_token(const std::string& token);

// The version in `neuronx-cc --version` output ("NeuronX Compiler version 2.21.33363.0+82129205").
std::optional<std::string> parse_compiler_version_output(const std::string& output);

}  // namespace neuron_cache
