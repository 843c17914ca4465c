#include "neuron_cache/cli/context.h"

#include <iostream>

#include "neuron_cache/cli/output.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/report/progress.h"
#include "neuron_cache/storage/open.h"

namespace neuron_cache::cli {

std::string Context::hub_repo() {
  const config::Setting& repo = settings().cache_repo;
  if (repo.value.empty())
    throw input_error("no cache repo: pass --repo or run `neuron-cache set REPO`");
  hub_names::require_repo_id(repo.value, "the cache repo from " + repo.origin, "check the name");
  return repo.value;
}

hub::HubClient& Context::client() {
  if (!client_) {
    client_ = std::make_unique<hub::HubClient>(hub::HubClient::options_from(settings()));
  }
  return *client_;
}

storage::Store& Context::store() {
  if (store_) return *store_;
  const config::Setting& repo = settings().cache_repo;
  if (repo.value.empty())
    throw input_error("no cache repo: pass --repo or run `neuron-cache set REPO`");
  store_ =
      storage::open_store(repo.value, "the cache repo from " + repo.origin, settings(), client());
  return *store_;
}

void Context::use_manifest(const std::string& file) {
  use_manifest(manifest::load_manifest(file), file);
}

void Context::use_manifest(const manifest::Manifest& manifest, const std::string& file) {
  settings_ = settings().with_manifest(pipeline::manifest_layer(manifest, file));
  store_.reset();
}

bool Context::store_named() {
  return settings().cache_repo_named;
}

pipeline::Remotes Context::remotes() {
  if (!models_) models_ = std::make_unique<storage::HubModels>(client());
  return {storage::store_opener(client()), models_.get()};
}

void add_repo_option(CLI::App* cmd, Context& context, const std::string& defaults) {
  cmd->add_option_function<std::string>(
      "--repo,--repo_id", [&context](const std::string& v) { context.overrides().cache_repo = v; },
      "Cache store: a Hub repo id, s3://bucket/prefix or file:///folder (default: " + defaults +
          ")");
}

void add_trust_options(CLI::App* cmd, Context& context) {
  cmd->add_option_function<std::string>(
      "--trusted-key",
      [&context](const std::string& key) { context.overrides().trusted_keys.push_back(key); },
      "A public key (NAME:<base64>, `neuron-cache key public`) whose signatures make a store "
      "entry trusted; repeat for several (default: NEURON_CACHE_TRUSTED_KEYS, the manifest's "
      "trusted_keys)");
  cmd->add_flag_function(
      "--require-signatures",
      [&context](int64_t) { context.overrides().require_signatures = true; },
      "Install only store entries a trusted key signed; the others are compiled (also "
      "NEURON_CACHE_REQUIRE_SIGNATURES=1, the manifest's require_signatures)");
}

void add_cache_dir_option(CLI::App* cmd, Context& context, const std::string& defaults) {
  cmd->add_option_function<std::string>(
      "--cache-dir,--cache_dir",
      [&context](const std::string& v) { context.overrides().cache_dir = v; },
      "Local cache root (default: " + defaults + ")");
}

std::unique_ptr<pipeline::Pipeline> Context::open_pipeline(const pipeline::Options& options,
                                                           bool quiet) {
  const config::Settings& with_compiler = settings_with_compiler();
  for (const auto& warning : with_compiler.warnings) warn(warning);
  auto pipeline = std::make_unique<pipeline::Pipeline>(with_compiler, remotes(), options);
  show_progress(quiet);
  auto show = [quiet](const std::string& line) {
    report::ProgressDisplay::clear_line();
    if (line.starts_with("warning: ")) {
      warn(line.substr(9));
    } else if (!quiet) {
      std::cerr << "neuron-cache: " << config::redact(line) << "\n";
    }
  };
  // What the pipeline said while it was being made (a store that cannot be used, the settings'
  // notes) came before anyone listened: shown now, once.
  for (const auto& notice : pipeline->context().notices)
    show((notice.warning ? "warning: " : "") + notice.text);
  pipeline->on_progress(show);
  return pipeline;
}

}  // namespace neuron_cache::cli
