// What every command shares: the environment, the command-line overrides, and the settings
// resolved from them on first use. Only commands that key or scan by compiler ask for the
// compiler version, which runs `neuronx-cc --version`.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/tls_trust.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/report/progress.h"
#include "neuron_cache/storage/hub_models.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::cli {

class Context {
 public:
  explicit Context(config::Environment env) : env_(std::move(env)) {}
  config::SettingOverrides& overrides() { return overrides_; }
  const config::Environment& env() const { return env_; }
  const config::Settings& settings() {
    if (!settings_) {
      settings_ = config::Settings::resolve(env_, overrides_);
      log::enable(settings_->debug_log);
      net::use_trust_settings(*settings_);
    }
    return *settings_;
  }
  // The settings with the compiler version detected (plan, prefetch, status, cleanup, ...).
  const config::Settings& settings_with_compiler() {
    settings();
    settings_->detect_compiler(env_);
    return *settings_;
  }
  // The Hub client for the resolved endpoint and token, made on first use.
  hub::HubClient& client();
  // The cache repo a Hub command works on (its --repo is an override, like every command's);
  // throws an input Error when there is none or its name is not a Hub repo id.
  std::string hub_repo();
  // The cache store the settings name (any kind: storage/open.h), opened on first use; throws
  // an input Error when none is set or the name is malformed.
  storage::Store& store();
  // Takes the cache repo (and cache_dir, compiler_version) from the manifest `file` as a run of
  // it would (--repo still wins): gc and du then act on the manifest's store, not the saved one.
  void use_manifest(const std::string& file);
  void use_manifest(const manifest::Manifest& manifest, const std::string& file);
  // Where the store comes from, for a line a person reads: "the cache repo from --repo".
  std::string store_origin() { return "the cache repo from " + settings().cache_repo.origin; }
  // Whether the store was named for this command (--repo, a manifest, CUSTOM_CACHE_REPO) rather
  // than taken from the saved default, which every `create` and `set` replaces.
  bool store_named();
  // The cache store the resolved settings name and the Hub's model repos, for a Pipeline.
  pipeline::Remotes remotes();
  // A Pipeline of the settings with the compiler version, its progress lines on stderr (none
  // but warnings when `quiet`); the settings' warnings are printed first.
  std::unique_ptr<pipeline::Pipeline> open_pipeline(const pipeline::Options& options, bool quiet);
  // Shows the transfers of the rest of the command (report/progress.h); none when `quiet` (--quiet,
  // --json) or the settings turn progress off.
  void show_progress(bool quiet) {
    if (!progress_)
      progress_ =
          std::make_unique<report::ProgressDisplay>(report::progress_style(settings(), quiet));
  }

 private:
  config::Environment env_;
  config::SettingOverrides overrides_;
  std::optional<config::Settings> settings_;
  std::unique_ptr<hub::HubClient> client_;
  std::unique_ptr<storage::HubModels> models_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<report::ProgressDisplay> progress_;  // last member: it stops before the stores go
};

// The --repo/--repo_id and --cache-dir/--cache_dir options, which every command that has them
// hands to Settings as overrides; `defaults` is the help's list of what applies without it.
// What applies without --cache-dir, outside a manifest.
inline constexpr const char* kLocalCacheDefaults =
    "NEURON_CC_FLAGS --cache_dir, NEURON_COMPILE_CACHE_URL, /var/tmp/neuron-compile-cache";
void add_repo_option(CLI::App* cmd, Context& context, const std::string& defaults);
void add_cache_dir_option(CLI::App* cmd, Context& context, const std::string& defaults);
// --trusted-key and --require-signatures (config/trust_settings.h).
void add_trust_options(CLI::App* cmd, Context& context);

void register_config(CLI::App& app, Context& context);
void register_status(CLI::App& app, Context& context);
void register_cleanup(CLI::App& app, Context& context);
void register_inspect(CLI::App& app, Context& context);
void register_repo_commands(CLI::App& app, Context& context);  // whoami, create, set
void register_lookup(CLI::App& app, Context& context);
void register_fetch(CLI::App& app, Context& context);
void register_verify(CLI::App& app, Context& context);
void register_synchronize(CLI::App& app, Context& context);
void register_du(CLI::App& app, Context& context);        // the store's size
void register_gc(CLI::App& app, Context& context);        // the store's garbage
void register_pipeline(CLI::App& app, Context& context);  // plan, prefetch, compile, push, ci, run
void register_lock(CLI::App& app, Context& context);      // lock
void register_key(CLI::App& app, Context& context);       // key generate, key public

}  // namespace neuron_cache::cli
