// What the steps of one run share (pipeline/pipeline.h): the settings with the manifest's layer,
// the local cache and its index, the store wrapped in the run's policies, the store's index as
// last read, and the notices. Each step (planning, compiling, leases, publishing, locked mode)
// holds a reference to it; none holds another step's state.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/config/trust_settings.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/pipeline/outages.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/storage/models.h"
#include "neuron_cache/storage/policies.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/sys/safe_dir.h"
#include "neuron_cache/transfer/push.h"

namespace neuron_cache::pipeline {

// What the pipeline reaches beyond this machine.
struct Remotes {
  // Opens the store the resolved settings name (storage/open.h), once the manifest's layer is
  // known. Throws an input Error for a malformed name. Null: no shared cache at all.
  std::function<std::unique_ptr<storage::Store>(const config::Settings&)> open_store;
  // Where model revisions and config.json files are read; null when offline.
  storage::ModelSource* models = nullptr;
};

// Compile leases across the machines sharing the store (remote/leases.h): one compile of a
// configuration for the whole fleet; the others wait for its push and fetch it.
struct LeasePolicy {
  bool enabled = false;  // only when a push follows the compiles (`ci`, the Action)
  bool wait = true;      // --no-wait: compile what another machine compiles too
  // --wait-timeout: how long to wait for another machine's compile; without it, the holder's
  // expected compile time plus a margin, else an hour.
  std::optional<std::chrono::seconds> wait_timeout;
};

struct Options {
  std::filesystem::path manifest;
  // The manifest's content when the caller has read it already (gc reads each once).
  std::optional<manifest::Manifest> loaded;
  std::vector<std::string> configs;  // only these configuration names; empty: all
  bool strict = false;
  bool read_only = false;
  // The command compiles what is missing (ci, compile, run): messages about a configuration
  // that cannot be keyed say what becomes of it in this command, compiled or only not looked up.
  bool compiles = false;
  int jobs = 1;
  std::filesystem::path output_dir = "neuron-cache-output";  // compile outputs and logs
  transfer::PushOptions push;
  LeasePolicy leases;
  // push, ci and run publish what they compiled: the signing key (NEURON_CACHE_SIGNING_KEY) is
  // read when the run starts, so a bad key fails before any compile.
  bool signs = false;
  // The key given directly (the Action's signing-key input); else read from the settings.
  std::shared_ptr<const trust::SecretKey> signing_key;
};

// A warning or note the user must see; also goes into reports.
struct Notice {
  bool warning = true;
  std::string text;
};

// Policy: a cache problem (store down, no access, rate limit, no write access) never fails the
// job by default: it is recorded as a warning and the job falls back to compiling or skips the
// push. With `strict` it is an Error. With `read_only` nothing is ever written to the store.
class RunContext {
 public:
  // Loads the manifest (throws an input Error on bad input), resolves the settings again with it
  // as a layer (Settings::with_manifest), then opens the cache store they name.
  RunContext(const config::Settings& settings, Remotes remotes, Options options);
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  // A notice, unless an announced outage is its cause (the debug log keeps it then). Safe to
  // call from the compile step's workers.
  void note(bool warning, const std::string& text);
  // A line of live output (no notice). Safe to call from any thread: lines never interleave.
  void progress(const std::string& line);
  // Throws when strict; otherwise records the fallback, unless an outage already announced is
  // its cause (the announcement said what the run does instead).
  void cache_problem(const std::string& what, const std::string& fallback);
  // `detail` (a failure's text), or the few words of the announced outage that caused it.
  std::string brief(const std::string& detail);
  // Whether an announced outage (announced now if need be) is the cause of `detail`.
  bool caused_by_outage(const std::string& detail);
  // Announces (once each) the outages of the store's and the models' hosts found so far.
  void announce_outages();
  // Warns once about each read failure the miss-on-failure policy turned into a miss.
  void report_misses();

  // The store when it may be asked (set, opened, not offline), else null.
  storage::Store* online_store() const;
  // Requests sent to the cache store since it was opened.
  size_t store_requests() const;
  // The lock of locked mode, or null.
  const lockfile::Lock* lock_in_use() const { return lock ? &*lock : nullptr; }
  // Where the store's answers are remembered in the cache root (sys::RootedFile's rule).
  sys::RootedFile memo_folder() const;
  // The manifest's folder (the working directory without a manifest).
  std::filesystem::path manifest_dir() const;
  std::vector<std::filesystem::path> trusted_roots() const;
  // The part of an entry complete in the local cache: its complete folders and present files.
  artifact_index::Entry complete_part(const artifact_index::Entry& entry) const;

  config::Settings settings;
  Remotes remotes;
  Options options;
  manifest::Manifest manifest;
  // The cache store as reports name it: a Hub repo id, "s3://bucket/prefix", "file:///path".
  std::string repo;
  // Where repo comes from: "--repo", "the manifest's cache_repo in FILE", "CUSTOM_CACHE_REPO",
  // the saved-repo file, "optimum-neuron's default" (Settings::resolve, the manifest a layer).
  std::string repo_origin;
  std::string compiler_version;
  std::filesystem::path root;
  std::unique_ptr<local::LocalCache> cache;
  std::unique_ptr<local::LocalIndex> local_index;

  std::vector<std::unique_ptr<storage::Store>> store_layers;  // the backend, then policies
  storage::Store* store = nullptr;                            // the outermost layer
  storage::MissOnFailureStore* misses = nullptr;
  // The layer below the miss policy: a push must never take a shard it could not read for a
  // missing one (it would replace the store's shard with this run's entries alone).
  storage::Store* writer = nullptr;
  // The store's index as last read (a wait for another machine's push reads it again).
  std::unique_ptr<remote::RemoteIndex> remote;
  std::optional<lockfile::Lock> lock;  // locked mode
  // Configurations the compile step of this run recorded; nothing when it did not run.
  std::optional<size_t> compiled_here;
  // The model whose remembered revision the Hub (the store's host too) did not confirm in time
  // (ModelResolver::slow_hub), or "": a run with everything local then does not wait for the
  // store's head, and one that compiled nothing does not push.
  std::string hub_slow;
  // Set once this run holds a compile lease in the store: an outage's warning then says the
  // leases (and the push other machines wait for) still ask it (pipeline/lease_step.cpp).
  std::atomic<bool> holds_leases{false};

  // Which store entries may be installed (trusted keys, require_signatures), and the key this
  // run's pushes sign with (null: they do not sign).
  config::TrustPolicy trust;
  std::shared_ptr<const trust::SecretKey> signer;

  std::vector<Notice> notices;
  std::function<void(const std::string&)> on_progress;

 private:
  // Opens the store the settings name, wrapped in the run's policies: read-only (--read-only),
  // and, unless strict, a read failure is a miss (storage/policies.h). A store that cannot be
  // opened is a cache problem.
  void open_store();
  void say(bool warning, const std::string& text);  // a notice, always

  std::recursive_mutex notes_mutex_;  // notices, outages and the miss count
  std::mutex progress_mutex_;         // one line at a time (taken after notes_mutex_, never before)
  Outages outages_;
  size_t misses_reported_ = 0;
  size_t requests_at_start_ = 0;
};

// The manifest's layer of the settings (Settings::with_manifest); its cache_dir is relative to
// the manifest's folder.
config::ManifestLayer manifest_layer(const manifest::Manifest& manifest,
                                     const std::filesystem::path& file);

// "neuron-cache 0.1.0"
std::string tool_version();

double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace neuron_cache::pipeline
