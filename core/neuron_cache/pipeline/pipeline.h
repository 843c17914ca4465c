// The main job, one step per stage: manifest -> plan -> prefetch -> compile -> push. The CLI
// commands (plan, prefetch, compile, push, ci, run) and the GitHub Action call these steps; none
// of them has cache logic of its own.
//
// The shared cache is a storage::Store (the Hub, S3 or a folder, storage/store.h); model repos are
// read through a storage::ModelSource. The pipeline knows neither the Hub client nor any backend.
//
// Policy: a cache problem (store down, no access, rate limit, no write access) never fails the
// job by default: it is recorded as a warning and the job falls back to compiling or skips the
// push. With `strict` it is an Error. With `read_only` nothing is ever written to the store.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/pipeline/outages.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/plan/targets.h"
#include "neuron_cache/remote/leases.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/remote/prefetch.h"
#include "neuron_cache/remote/push.h"
#include "neuron_cache/storage/policies.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::compile {
class CaptureCache;
struct CaptureResult;
class SeedViews;
}  // namespace neuron_cache::compile

namespace neuron_cache::pipeline {

struct RegistryAnswer;

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
  std::vector<std::string> configs;  // only these configuration names; empty: all
  bool strict = false;
  bool read_only = false;
  int jobs = 1;
  std::filesystem::path output_dir = "neuron-cache-output";  // compile outputs and logs
  remote::PushOptions push;
  LeasePolicy leases;
};

// A warning or note the user must see; also goes into reports.
struct Notice {
  bool warning = true;
  std::string text;
};

struct PrefetchStep {
  remote::PrefetchResult result;
  size_t hits = 0;  // configurations fetched from the Hub
  double seconds = 0;
};
// Adds a later prefetch of the same run (remote::PrefetchResult's += for the results).
PrefetchStep& operator+=(PrefetchStep& into, const PrefetchStep& later);

struct CompileOutcome {
  std::string configuration;
  std::string key;
  bool ok = false;
  bool recorded = false;  // an index entry was written: the configuration is complete locally
  double seconds = 0;
  int exit_code = -1;
  std::string error;     // one line
  std::string log_file;  // the command's output
  std::string log_tail;  // last lines, for failures
  size_t modules_produced = 0;
  size_t modules_used = 0;
  // Folders optimum-neuron's hub proxy left without a NEFF of their own (linked or not), to
  // complete from the store.
  size_t modules_from_hub = 0;
  // Not empty when the command compiled nothing itself: "reused from the Hub through
  // optimum-neuron".
  std::string reused;
  // With `ok`: why no index entry was written although the command succeeded (the store lacks
  // what the hub proxy used, or which graphs it used is unknown), or "".
  std::string not_recorded;
  uint64_t bytes_downloaded = 0;   // from the store, to complete what the hub proxy left
  uint64_t bytes_linked = 0;       // ... taken from the HF file cache instead (verified)
  uint64_t bytes_reused = 0;       // of the folders recorded for a configuration reused
  std::vector<std::string> notes;  // cached entries the run could not reuse, and why
  // The configurations the command exported when it exported more than one in its process (manifest
  // names where they match, else model and shape): their keys are not reproducible.
  std::vector<std::string> exported_configurations;
};

// What completing the folders optimum-neuron's hub proxy left from the store did.
struct Adoption {
  std::string problem;        // why they are not all complete now, or ""
  bool store_failed = false;  // the store failed (not: it lacks them), a cache problem
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_linked = 0;  // taken from the HF file cache instead of downloaded
};

// How the lease of one missed configuration went.
struct LeaseOutcome {
  enum class Kind {
    Held,          // this machine took the lease and compiled
    TookOver,      // ... from a machine that stopped without a result (expired or released)
    Fetched,       // another machine compiled it: waited, then fetched its push
    WaitTimedOut,  // waited past the bound, then compiled without the lease
    NotWaited,     // --no-wait: compiled although another machine compiles it too
    NoLease,       // the store could not give one (see `note`): compiled without
  };
  std::string configuration;
  std::string key;
  Kind kind = Kind::Held;
  std::string other_host;  // the machine that held it (Fetched, TookOver, WaitTimedOut, NotWaited)
  double waited_seconds = 0;
  std::string note;
};
// "held", "took_over", "waited_then_fetched", "wait_timed_out", "not_waited", "no_lease"
std::string_view lease_kind_name(LeaseOutcome::Kind kind);

struct CompileStep {
  std::vector<CompileOutcome> outcomes;
  std::vector<LeaseOutcome> leases;  // one per miss when leases are enabled
  // The store cannot refuse a conditional write itself (an S3-compatible server that ignores
  // If-None-Match): two machines may both hold a lease, rarely.
  bool leases_advisory = false;
  // What was fetched after waiting for other machines' compiles (LeaseOutcome::Kind::Fetched).
  PrefetchStep fetched;
  double seconds = 0;
  size_t failed() const;
};

// `neuron-cache run -- CMD`: a command run with the cache, and what it compiled.
struct WrappedRun {
  int exit_code = -1;
  std::string error;  // when it could not start or was killed
  double seconds = 0;
  std::vector<std::string> produced;  // "neuronxcc-<v>/MODULE_..." moved into the cache
  size_t used = 0;
  bool recorded = false;     // an index entry was written for the target
  std::string not_recorded;  // with a target and a zero exit status: why no entry was written
  // With a target and a zero exit status: the command neither produced nor used a graph, and
  // every folder of the target's entry was complete before it ran: nothing new to record.
  bool all_cached_before = false;
  size_t modules_recorded = 0;  // MODULE_ folders the written entry lists
  size_t modules_added = 0;     // ... that the target's previous local entry did not list
};

struct PushStep {
  bool attempted = false;
  remote::PushResult result;
  std::string skipped_reason;  // read-only, offline, no repo, nothing to push, error
  double seconds = 0;
};
// Adds a later push of the same run: attempted when either was; a skip's reason stays only
// while nothing was attempted (a later "nothing new to push" is no news after a push), an
// error's reason is kept.
PushStep& operator+=(PushStep& into, const PushStep& later);

// `neuron-cache lock`: the store's entries of the plan's configurations.
struct LockStep {
  lockfile::Lock lock;               // every configuration the store holds
  std::vector<std::string> missing;  // "name: why" for each one it cannot cover
};

// The lockfile's path: `given`, else neuron-cache.lock beside `manifest`.
std::filesystem::path lock_path(const std::filesystem::path& manifest, const std::string& given);
// The lockfile at `path`, or nothing when there is none; throws an input Error for a file that
// is not a lock (lockfile::parse) or larger than one may be.
std::optional<lockfile::Lock> read_lock(const std::filesystem::path& path);
// read_lock(), or an input Error saying how to write it.
lockfile::Lock require_lock(const std::filesystem::path& path, const std::string& manifest);
// Why `lock` does not lock `names` of this very manifest (changed since, a name missing), or "".
std::string lock_problem(const lockfile::Lock& lock, const manifest::Manifest& manifest,
                         const std::vector<std::string>& names, const std::filesystem::path& path);

class Pipeline {
 public:
  // Loads the manifest (throws an input Error on bad input), resolves the settings again with it
  // as a layer (Settings::with_manifest), then opens the cache store they name.
  Pipeline(const config::Settings& settings, Remotes remotes, Options options);
  ~Pipeline();

  const manifest::Manifest& manifest() const { return manifest_; }
  // The cache store as reports name it: a Hub repo id, "s3://bucket/prefix", "file:///path".
  const std::string& repo() const { return repo_; }
  // The store, or null when none is set (or it could not be opened: see notices()).
  const storage::Store* store() const { return store_; }
  // Where repo() comes from: "--repo", "the manifest's cache_repo in FILE", "CUSTOM_CACHE_REPO",
  // the saved-repo file, "optimum-neuron's default" (Settings::resolve, the manifest a layer).
  const std::string& repo_origin() const { return repo_origin_; }
  const std::string& compiler_version() const { return compiler_version_; }
  const std::filesystem::path& cache_root() const { return root_; }
  const std::vector<Notice>& notices() const { return notices_; }
  const local::LocalIndex& local_index() const { return *local_index_; }
  // Requests sent to the cache store since the pipeline opened it.
  size_t store_requests() const;

  // Keys for every selected configuration (revisions and model types resolved).
  std::vector<plan::Target> targets();
  // The keys of targets(), for gc to keep what the manifest declares. An input Error for a
  // configuration whose key cannot be known now: gc would take its entries for undeclared.
  std::set<std::string> declared_keys();
  // The settings with the manifest's layer (its cache_repo, cache_dir, compiler version).
  const config::Settings& settings() const { return settings_; }
  // The target of a profile (cache_key.h): its name, the compiler version and NEURON_CC_FLAGS.
  // Throws an input Error for a bad name or an unknown compiler version.
  plan::Target profile_target(const std::string& name);
  // Keys for every selected configuration, then local, Hub or compile for each.
  // Whether the store's head is read even when every configuration is complete locally: true
  // (the default) when a push follows, which must know what the store lacks at its head; a plan
  // or prefetch alone sets it false and then asks the store nothing in that case.
  void read_head_when_local(bool read) { head_when_local_ = read; }
  plan::Plan make_plan();
  // The same for these targets.
  plan::Plan make_plan(const std::vector<plan::Target>& targets);
  // The plan of the one target of `run` (a profile or a configuration), whose entry grows: the
  // Hub's entry is read even when the local one is complete, and the row becomes a Hub row for
  // the union of the local entry's complete folders and the Hub's entry when the Hub lists
  // folders this cache lacks (another machine's run added them).
  plan::Plan plan_run(const plan::Target& target);
  // Downloads the Hub hits of `plan`; rows fetched become Local, rows that failed become
  // Compile (or throw when strict).
  PrefetchStep prefetch(plan::Plan& plan);
  // Compiles the Compile rows (jobs in parallel); rows compiled become Local.
  CompileStep compile(plan::Plan& plan);
  // Pushes every Local row whose entry the Hub does not have (compiled here or earlier).
  PushStep push(const plan::Plan& plan);

  // Exports every configuration complete locally (local/export_dir.h) under `dir`; returns the
  // folder of each, by configuration name.
  std::map<std::string, std::string> export_artifacts(const plan::Plan& plan,
                                                      const std::filesystem::path& dir);

  // Runs `argv` with the cache (NEURON_COMPILE_CACHE_URL on a staging cache), output shown
  // live, then moves what it compiled into the cache; with a target and a zero exit status, the
  // index entry for the target's key is written: the MODULE_ folders the run produced or used,
  // with those of the previous local entry that are still complete (so an entry only grows).
  WrappedRun run_wrapped(const plan::Target* target, const std::vector<std::string>& argv);
  // Pushes MODULE_ folders that belong to no configuration (a training run without --config).
  PushStep push_modules(const std::vector<std::string>& modules);

  // The store's index entries of the plan's configurations at the head read (pipeline/
  // lock_step.cpp). Throws an operational Error when the store could not be read.
  LockStep lock(const plan::Plan& plan);
  // Locked mode (`--locked`, lock_step.cpp): plans read the lock, not the store. Each selected
  // configuration's target is its locked entry's key and inputs (no model revision is
  // resolved), the store's index is exactly the locked entries (no index, listing or registry
  // read), reads are pinned to the lock's revision on the lock's store, and the run is strict: a
  // locked file the store cannot give is an Error, never a compile. The caller checked that the
  // lock covers every selected configuration (throws an input Error otherwise).
  void use_lock(lockfile::Lock lock);
  // use_lock() of the lockfile `given` (empty: neuron-cache.lock beside the manifest), read and
  // checked first: missing, changed since the manifest or not covering a selected configuration
  // is an input Error that says to run `neuron-cache lock` again.
  void use_lockfile(const std::string& given);
  // The lock of locked mode, or null.
  const lockfile::Lock* lock_in_use() const { return lock_ ? &*lock_ : nullptr; }

  // Called with one line whenever something happens (for live output).
  std::function<void(const std::string&)> on_progress;

 private:
  // Where the store's answers are remembered in the cache root (sys::RootedFile's rule).
  sys::RootedFile memo_folder() const;
  // A notice, unless an announced outage is its cause (the debug log keeps it then).
  void note(bool warning, const std::string& text);
  // A notice, always.
  void say(bool warning, const std::string& text);
  void describe_repo(plan::Plan& plan) const;
  // The debug log's lines for the plan: each configuration's key, status and why.
  void log_decisions(const plan::Plan& plan) const;
  // Compile rows that optimum-neuron's registry lists become Registry rows (one listing per
  // compiler version, whatever the number of configurations).
  void read_registry(plan::Plan& plan);
  RegistryAnswer scan_registry(const std::string& compiler_version,
                               const remote::ScanModels& models);
  std::string short_version_problem(const std::string& version,
                                    const std::vector<std::string>& full) const;
  // The models of `targets` with the architecture digest of each target's task, when known.
  // `notes`: by model, how its folders are found when not by its digest (pipeline reasons).
  remote::ScanModels registry_models(const std::vector<const plan::Target*>& targets,
                                     std::map<std::string, std::string>& notes);
  // Throws when strict; otherwise records the fallback, unless an outage already announced is
  // its cause (the announcement said what the run does instead).
  void cache_problem(const std::string& what, const std::string& fallback);
  // Says why configurations have no cache key: one warning for those an outage left unkeyed
  // (their reasons then name it briefly), one for each other.
  void note_unkeyed(std::vector<plan::Target>& targets);
  // Announces (once each) the outages of the store's and the models' hosts found so far.
  void announce_outages();
  // `detail` (a failure's text), or the few words of the announced outage that caused it.
  std::string brief(const std::string& detail);
  CompileOutcome compile_one(const plan::Target& target, bool listed_in_registry);
  // After a compile command that succeeded: completes what the hub proxy left, then writes the
  // index entry (no compile time when the command compiled nothing), or says in `out` why not.
  void finish_one(const plan::Target& target, compile::CaptureResult& captured,
                  const compile::CaptureCache& capture,
                  const std::map<std::string, std::string>& child_env, double seconds,
                  CompileOutcome& out);
  void compile_each(const std::vector<plan::PlanRow*>& misses, CompileOutcome* outcomes,
                    std::atomic<size_t>& next, std::mutex& progress);
  // Compiles `rows` (jobs in parallel), their outcomes appended to the step's and the rows to
  // `compiled`, in the same order.
  void compile_rows(const std::vector<plan::PlanRow*>& rows, CompileStep& step,
                    std::vector<plan::PlanRow*>& compiled);
  void finish_compile(const std::vector<plan::PlanRow*>& compiled, CompileStep& step);
  // The compile leases of this run (pipeline/lease_step.cpp), made on first need; null when
  // leases are off or the store cannot hold them (a notice says why).
  remote::Leases* leases();
  // The compile step with leases: claims each miss's lease, compiles those taken, then waits
  // for the machines compiling the others and fetches their pushes (or takes over a lease its
  // holder dropped).
  void compile_with_leases(plan::Plan& plan, const std::vector<plan::PlanRow*>& misses,
                           CompileStep& step, std::vector<plan::PlanRow*>& compiled);
  // Pushes what this machine compiled and ends its leases before it waits for other machines:
  // they may be waiting for it in turn. The push step later adds these pushes to its own.
  void publish_before_waiting(const plan::Plan& plan, const std::vector<plan::PlanRow*>& compiled,
                              CompileStep& step);
  // The rows compiled and recorded become Local (again and again as compiles end).
  void mark_compiled(const std::vector<plan::PlanRow*>& compiled, const CompileStep& step);
  struct Waiting;  // a configuration another machine compiles (pipeline/lease_step.cpp)
  // Claims the leases of `rows` (keyed misses) in one go: those taken, or to compile anyway, go
  // to `mine` with their outcome in the step; the others are returned, to wait for.
  std::vector<Waiting> claim_each(const std::vector<plan::PlanRow*>& rows,
                                  const std::vector<remote::ClaimRequest>& requests,
                                  CompileStep& step, std::vector<plan::PlanRow*>& mine);
  // Polls them until each is fetched or compiled here.
  void wait_for_others(const plan::Plan& plan, std::vector<Waiting>& waiting, CompileStep& step,
                       std::vector<plan::PlanRow*>& compiled);
  // One poll: true when it is settled (fetched, or compiled here).
  bool poll_other(const plan::Plan& plan, Waiting& waiting, CompileStep& step,
                  std::vector<plan::PlanRow*>& compiled);
  // Compiles `row`, holding its lease, and releases the lease at once when the compile failed.
  void compile_leased(plan::PlanRow& row, CompileStep& step, std::vector<plan::PlanRow*>& compiled);
  // Releases the leases of the rows compiled from `first` on whose compile failed.
  void release_failed(const std::vector<plan::PlanRow*>& compiled, const CompileStep& step,
                      size_t first);
  // Reads the store's index again for `row` and fetches its entry when the store has one now.
  enum class Refetch { Fetched, Absent, Failed };
  // What it downloaded is added to the step's `fetched`.
  Refetch fetch_after_wait(plan::PlanRow& row, CompileStep& step);
  // The compile time the store or the local cache recorded for the configuration nearest to
  // `row`, or 0.
  double expected_seconds(const plan::PlanRow& row) const;
  // After the push: each lease held is done when the store has its configuration now, else
  // released with the reason.
  void finish_leases(const plan::Plan& plan, const PushStep& step);
  // The push step itself, without ending the leases.
  PushStep push_entries(const plan::Plan& plan);
  // Installs from the store the folders optimum-neuron's hub proxy left without a NEFF of their
  // own (captured.proxied and captured.unlinked, named by their keys) and counts them as used;
  // or says why it could not. A file the proxy linked from the HF file cache (`child_env`'s
  // HF_HUB_CACHE) is taken from there when it verifies against the store's listing.
  Adoption complete_from_store(compile::CaptureResult& captured,
                               const compile::CaptureCache& capture,
                               const std::map<std::string, std::string>& child_env);
  // After a compile command that succeeded: completes what the hub proxy left, or records in
  // `out` why nothing can be recorded (with `strict`, a store failure is an error). False when
  // `out` is final (an error).
  bool adopt_from_proxy(compile::CaptureResult& captured, const compile::CaptureCache& capture,
                        const std::map<std::string, std::string>& child_env, CompileOutcome& out);
  // With a Hub store, the compile command reads the Hub through optimum-neuron's hub proxy: it
  // gets the repo, endpoint, file cache and token of this run (in its environment, never its
  // arguments), so a repo declared in the manifest is the one it reads, and what it links is in
  // a trusted place. Other stores give it nothing: optimum-neuron only knows the Hub.
  void add_hub_env(std::map<std::string, std::string>& env) const;
  // Writes the entry of a run of `target` that exited 0 (or says in `out` why it cannot).
  void record_run(const plan::Target& target, const compile::CaptureResult& captured,
                  double seconds, WrappedRun& out);
  // Whether every folder of the local entry of `target` is complete (and it has one).
  bool all_cached(const plan::Target& target) const;
  // The staging cache of one run: a seeded view (NEURON_CACHE_SEED=0: an empty one).
  std::unique_ptr<compile::CaptureCache> capture_cache(const std::string& label);
  // The seeded views of the cache, watched from the first call on (before prefetch installs
  // anything, so the first compile sees only what changed). Nothing when seeding is off.
  compile::SeedViews* seed_views();
  std::vector<std::filesystem::path> trusted_roots() const;
  // The store when it may be asked (set, opened, not offline), else null.
  storage::Store* online_store() const;
  // Opens the store the settings name, wrapped in the run's policies: read-only (--read-only),
  // and, unless strict, a read failure is a miss (storage/policies.h). A store that cannot be
  // opened is a cache problem.
  void open_store();
  // Warns once about each read failure the miss-on-failure policy turned into a miss.
  void report_misses();
  // Why a push must not happen (read-only, no repo, offline, nothing new), or "" when it may.
  std::string why_not_push(bool nothing_new);
  // Why nothing can be pushed when the store says its credentials cannot write, else empty.
  std::string read_only_token();
  // Whether this run owes the store a push: its compile step recorded something, or, without a
  // compile step (`push`, `run`), the plan has configurations complete locally.
  bool owes_push(const plan::Plan& plan) const;
  // Under --strict, a push owed (`owed`) and skipped for any reason but --read-only is an Error.
  void refuse_skip_when_strict(bool owed, const std::string& reason);
  // The local index entries of the plan's Local rows that the Hub's index does not have, or has
  // with fewer MODULE_ folders or registry files (artifact_index::covers).
  std::vector<artifact_index::Entry> not_on_hub(const plan::Plan& plan);
  // The contents ids (artifact_index::contents_id) of the rows' entries the Hub's index covers
  // (none when it cannot be read).
  std::vector<std::string> covered_on_hub(const std::vector<const plan::PlanRow*>& rows);
  // The part of an entry complete in the local cache: its complete folders and present files.
  artifact_index::Entry complete_part(const artifact_index::Entry& entry) const;
  // The manifest's folder (the working directory without a manifest).
  std::filesystem::path manifest_dir() const;

  config::Settings settings_;
  Remotes remotes_;
  std::vector<std::unique_ptr<storage::Store>> store_layers_;  // the backend, then policies
  storage::Store* store_ = nullptr;                            // the outermost layer
  storage::MissOnFailureStore* misses_ = nullptr;
  // The layer below the miss policy: a push must never take a shard it could not read for a
  // missing one (it would replace the store's shard with this run's entries alone).
  storage::Store* writer_ = nullptr;
  size_t misses_reported_ = 0;
  // Configurations the compile step of this run recorded; nothing when it did not run.
  std::optional<size_t> compiled_here_;
  Options options_;
  manifest::Manifest manifest_;
  std::string repo_;
  std::string repo_origin_;
  std::string compiler_version_;
  std::filesystem::path root_;
  std::unique_ptr<local::LocalCache> cache_;
  std::unique_ptr<local::LocalIndex> local_index_;
  std::unique_ptr<remote::RemoteIndex> remote_;
  std::optional<lockfile::Lock> lock_;  // locked mode
  std::vector<plan::Target> locked_targets() const;
  // The lock's entries as the store's index, read at the lock's commit on the lock's store
  // unless `at_head` (a mirror always reads its head).
  std::unique_ptr<remote::RemoteIndex> locked_index(bool at_head = false);
  // After failed downloads of a locked prefetch: when the lock's commit is gone from the Hub (a
  // squashed history), the failed entries again at the head, still checked against the lock.
  void refetch_locked_at_head(const std::vector<artifact_index::Entry>& entries,
                              remote::PrefetchResult& result);
  bool head_when_local_ = true;
  std::string short_version_;  // why the manifest's compiler_version matches no store folder
  // Made by targets(): the registry read asks it the models' architectures.
  std::unique_ptr<plan::ModelResolver> resolver_;
  std::vector<Notice> notices_;
  Outages outages_;
  size_t requests_at_start_ = 0;
  std::once_flag seed_views_once_;
  std::unique_ptr<compile::SeedViews> seed_views_;
  // After store_layers_: released (its destructor ends the leases still held) before them.
  std::optional<std::unique_ptr<remote::Leases>> leases_;  // set once asked: null when none
  std::vector<PushStep> early_pushes_;  // publish_before_waiting's, for the push step
};

// "neuron-cache 0.1.0"
std::string tool_version();

// The manifest's layer of the settings (Settings::with_manifest); its cache_dir is relative to
// the manifest's folder.
config::ManifestLayer manifest_layer(const manifest::Manifest& manifest,
                                     const std::filesystem::path& file);

}  // namespace neuron_cache::pipeline
