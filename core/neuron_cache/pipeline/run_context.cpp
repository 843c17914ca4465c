#include "neuron_cache/pipeline/run_context.h"

#include <algorithm>

#include "neuron_cache/error.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::pipeline {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

manifest::Manifest load_selected(const Options& options) {
  if (options.manifest.empty()) return {};  // `run` without a manifest: no configurations
  manifest::Manifest manifest =
      options.loaded ? *options.loaded : manifest::load_manifest(options.manifest);
  if (options.configs.empty()) return manifest;
  std::vector<manifest::Configuration> selected;
  for (const auto& name : options.configs) {
    const manifest::Configuration* found = manifest.find(name);
    if (!found) {
      std::string known;
      for (const auto& c : manifest.configurations) known += (known.empty() ? "" : ", ") + c.name;
      throw input_error("no configuration named \"" + name + "\" in " + options.manifest.string() +
                        " (it has: " + known + ")");
    }
    selected.push_back(*found);
  }
  manifest.configurations = std::move(selected);
  return manifest;
}

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

config::ManifestLayer manifest_layer(const manifest::Manifest& manifest, const fs::path& file) {
  config::ManifestLayer layer;
  layer.file = file.string();
  layer.cache_repo = manifest.cache_repo;
  if (manifest.cache_dir) {
    fs::path folder = file.empty() ? fs::current_path() : fs::absolute(file).parent_path();
    layer.cache_dir = (folder / *manifest.cache_dir).lexically_normal().string();
  }
  layer.compiler_version = manifest.compiler_version;
  layer.trusted_keys = manifest.trusted_keys;
  layer.require_signatures = manifest.require_signatures;
  return layer;
}

RunContext::RunContext(const config::Settings& settings_in, Remotes remotes_in, Options options_in)
    : settings(settings_in), remotes(std::move(remotes_in)), options(std::move(options_in)) {
  if (options.configs.size() > 0 && options.manifest.empty()) {
    throw input_error("--config needs a manifest: the configuration is declared there");
  }
  // NEURON_CACHE_RETRY_BASE_MS shortens the waits between commit conflicts too.
  if (settings.retry_base())
    options.push.conflicts = net::retry_policy(settings, options.push.conflicts.max_attempts);
  manifest = load_selected(options);
  if (!options.manifest.empty()) {
    std::vector<std::string> shown = settings.warnings;  // the front end showed these
    settings = settings.with_manifest(manifest_layer(manifest, options.manifest));
    for (const auto& warning : settings.warnings) {
      if (std::find(shown.begin(), shown.end(), warning) == shown.end()) note(true, warning);
    }
  }
  trust = config::trust_policy(settings);
  signer = options.signing_key;
  if (!signer && options.signs && !options.read_only) signer = config::signing_key(settings);
  repo = settings.cache_repo.value;
  repo_origin = settings.cache_repo.origin;
  if (!settings.cache_repo_note.empty()) note(false, settings.cache_repo_note);
  root = settings.local_cache_root();
  compiler_version = settings.compiler_version.value;
  const std::string& installed = settings.installed_compiler.value;
  if (!installed.empty() && installed != compiler_version) {
    // Only the manifest's compiler_version takes the place of the installed one (with
    // --compiler-version, neuronx-cc is never asked).
    note(true, "the manifest declares neuronx-cc " + compiler_version +
                   " but the installed one is " + installed +
                   ": keys use the manifest's version; a compile with the installed compiler "
                   "would not match them");
  }
  if (compiler_version.empty() && !manifest.configurations.empty()) {
    compiler_version = settings.require_compiler_version();
  }
  cache = std::make_unique<local::LocalCache>(root, trusted_roots());
  local_index = std::make_unique<local::LocalIndex>(*cache);
  open_store();
}

void RunContext::open_store() {
  if (repo.empty() || !remotes.open_store) return;
  std::unique_ptr<storage::Store> backend;
  try {
    backend = remotes.open_store(settings);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::Input) throw;
    cache_problem("the cache store " + repo + " cannot be used: " + error.what(),
                  "nothing is read from it or written to it in this run");
  }
  if (!backend) return;
  store = backend.get();
  store_layers.push_back(std::move(backend));
  if (options.read_only) {
    store_layers.push_back(std::make_unique<storage::ReadOnlyStore>(*store));
    store = store_layers.back().get();
  }
  writer = store;
  if (!options.strict) {
    auto policy = std::make_unique<storage::MissOnFailureStore>(*store);
    misses = policy.get();
    store = policy.get();
    store_layers.push_back(std::move(policy));
  }
  repo = store->name();
  requests_at_start_ = store->requests();
  log::debug("decide", "cache store " + repo + " on " + storage::describe(store) + " (from " +
                           repo_origin + ")" + (options.read_only ? ", read-only" : "") +
                           (options.strict ? ", --strict: its failures fail the run"
                                           : ", its failures count as misses"));
}

storage::Store* RunContext::online_store() const {
  return store && !store->offline() ? store : nullptr;
}

void RunContext::report_misses() {
  if (!misses) return;
  const std::vector<std::string> problems = misses->problems();
  std::lock_guard lock_notes(notes_mutex_);
  for (; misses_reported_ < problems.size(); ++misses_reported_) {
    note(true, problems[misses_reported_] + ": counted as not cached");
  }
}

fs::path RunContext::manifest_dir() const {
  // fs::absolute("") throws: `run` needs no manifest.
  if (options.manifest.empty()) return fs::current_path();
  return fs::absolute(options.manifest).parent_path();
}

std::vector<fs::path> RunContext::trusted_roots() const {
  if (settings.hf_hub_cache.value.empty()) return {};
  return {settings.hf_hub_cache.value};
}

size_t RunContext::store_requests() const {
  return store ? store->requests() - requests_at_start_ : 0;
}

ai::Entry RunContext::complete_part(const ai::Entry& entry) const {
  ai::Entry out = entry;
  std::erase_if(out.modules, [&](const ai::ModuleRecord& module) {
    return !local_index->module_complete(entry.compiler_dir(), module);
  });
  std::erase_if(out.registry, [&](const ai::FileRecord& file) {
    return !local_index->registry_file_present(entry.compiler_dir(), file);
  });
  return out;
}

sys::RootedFile RunContext::memo_folder() const {
  return sys::RootedFile(root, std::string(artifact_index::kLocalDir) + "/hub");
}

void RunContext::note(bool warning, const std::string& text) {
  std::lock_guard lock_notes(notes_mutex_);
  announce_outages();
  if (warning && outages_.caused(text)) {
    log::debug("decide", text);  // the outage's warning said it, and what the run does instead
    return;
  }
  say(warning, text);
}

void RunContext::say(bool warning, const std::string& text) {
  notices.push_back({warning, text});
  progress((warning ? "warning: " : "") + text);
}

void RunContext::progress(const std::string& line) {
  std::lock_guard lock(progress_mutex_);
  if (on_progress) on_progress(line);
}

void RunContext::cache_problem(const std::string& what, const std::string& fallback) {
  if (options.strict)
    throw operational_error(what + " (an error under --strict; without it: " + fallback + ")");
  note(true, what + ": " + fallback);
}

void RunContext::announce_outages() {
  std::lock_guard lock_notes(notes_mutex_);
  // With compile leases held the push is tried once more: other machines wait for it.
  const bool leases = holds_leases;
  const std::string fallback = leases ? "configurations not complete locally count as misses"
                                      : "configurations not complete locally count as misses "
                                        "and nothing is pushed";
  if (store) {
    std::string advice = store->kind() == storage::Kind::S3
                             ? "check the network and the S3 endpoint"
                             : "check the network and HF_ENDPOINT";
    std::string said = outages_.announce(store->unreachable(), fallback, advice, leases);
    if (!said.empty()) say(true, said);
  }
  if (remotes.models) {
    std::string said = outages_.announce(remotes.models->unreachable(),
                                         "models are keyed from what earlier runs remembered",
                                         "check the network and HF_ENDPOINT");
    if (!said.empty()) say(true, said);
  }
}

std::string RunContext::brief(const std::string& detail) {
  std::lock_guard lock_notes(notes_mutex_);
  announce_outages();
  return outages_.brief(detail);
}

bool RunContext::caused_by_outage(const std::string& detail) {
  std::lock_guard lock_notes(notes_mutex_);
  announce_outages();
  return outages_.caused(detail);
}

}  // namespace neuron_cache::pipeline
