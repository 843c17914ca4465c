// The main job, one step per stage: manifest -> plan -> prefetch -> compile -> push. The CLI
// commands (plan, prefetch, compile, push, ci, run) and the GitHub Action call these steps; none
// of them has cache logic of its own.
//
// Pipeline is the orchestrator: it plans (keys, the local index, the store's index, optimum-
// neuron's registry) and prefetches itself, and hands the rest to one object per step over a
// shared RunContext (pipeline/run_context.h): Compiler (compile_step.h), LeaseCoordinator
// (lease_step.h), Publisher (publish_step.h); locked mode is lock_step.cpp.
//
// The shared cache is a storage::Store (the Hub, S3 or a folder, storage/store.h); model repos are
// read through a storage::ModelSource. The pipeline knows neither the Hub client nor any backend.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/pipeline/compile_step.h"
#include "neuron_cache/pipeline/lease_step.h"
#include "neuron_cache/pipeline/publish_step.h"
#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/plan/targets.h"
#include "neuron_cache/remote/lookup.h"

namespace neuron_cache::pipeline {

struct RegistryAnswer;

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

  const manifest::Manifest& manifest() const { return run_.manifest; }
  // The cache store as reports name it: a Hub repo id, "s3://bucket/prefix", "file:///path".
  const std::string& repo() const { return run_.repo; }
  // The store, or null when none is set (or it could not be opened: see notices()).
  const storage::Store* store() const { return run_.store; }
  // Where repo() comes from (RunContext::repo_origin).
  const std::string& repo_origin() const { return run_.repo_origin; }
  const std::string& compiler_version() const { return run_.compiler_version; }
  const std::filesystem::path& cache_root() const { return run_.root; }
  const std::vector<Notice>& notices() const { return run_.notices; }
  const local::LocalIndex& local_index() const { return *run_.local_index; }
  // The settings with the manifest's layer (its cache_repo, cache_dir, compiler version).
  const config::Settings& settings() const { return run_.settings; }
  // Requests sent to the cache store since the pipeline opened it.
  size_t store_requests() const;
  // Called with one line whenever something happens (for live output).
  void on_progress(std::function<void(const std::string&)> show) {
    run_.on_progress = std::move(show);
  }

  // Keys for every selected configuration (revisions and model types resolved).
  std::vector<plan::Target> targets();
  // The keys of targets(), for gc to keep what the manifest declares. An input Error for a
  // configuration whose key cannot be known now: gc would take its entries for undeclared.
  std::set<std::string> declared_keys();
  // The target of a profile (cache_key.h): its name, the compiler version and NEURON_CC_FLAGS.
  // Throws an input Error for a bad name or an unknown compiler version.
  plan::Target profile_target(const std::string& name);
  // Whether the store's head is read even when every configuration is complete locally: true
  // (the default) when a push follows, which must know what the store lacks at its head; a plan
  // or prefetch alone sets it false and then asks the store nothing in that case.
  void read_head_when_local(bool read) { head_when_local_ = read; }
  // Keys for every selected configuration, then local, store or compile for each.
  plan::Plan make_plan();
  // The same for these targets.
  plan::Plan make_plan(const std::vector<plan::Target>& targets);
  // The plan of the one target of `run` (a profile or a configuration), whose entry grows: the
  // store's entry is read even when the local one is complete, and the row becomes a store row
  // for the union of the local entry's complete folders and the store's entry when the store
  // lists folders this cache lacks (another machine's run added them).
  plan::Plan plan_run(const plan::Target& target);
  // Downloads the store hits of `plan`; rows fetched become Local, rows that failed become
  // Compile (or throw when strict).
  PrefetchStep prefetch(plan::Plan& plan);
  // Compiles the Compile rows (Compiler, under leases when they are enabled).
  CompileStep compile(plan::Plan& plan);
  // Pushes every Local row whose entry the store does not have (Publisher), ends the leases,
  // and adds the pushes made before waiting for other machines.
  PushStep push(const plan::Plan& plan);
  // Exports every configuration complete locally under `dir` (Publisher::export_artifacts).
  std::map<std::string, std::string> export_artifacts(const plan::Plan& plan,
                                                      const std::filesystem::path& dir);
  // `run -- CMD` (Compiler::run_wrapped).
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
  const lockfile::Lock* lock_in_use() const { return run_.lock ? &*run_.lock : nullptr; }

 private:
  // Says why configurations have no cache key: one warning for those an outage left unkeyed
  // (their reasons then name it briefly), one for each other.
  void note_unkeyed(std::vector<plan::Target>& targets);
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
  std::vector<plan::Target> locked_targets() const;
  // The lock's entries as the store's index, read at the lock's commit on the lock's store
  // unless `at_head` (a mirror always reads its head).
  std::unique_ptr<remote::RemoteIndex> locked_index(bool at_head = false);
  // After failed downloads of a locked prefetch: when the lock's commit is gone from the Hub (a
  // squashed history), the failed entries again at the head, still checked against the lock.
  void refetch_locked_at_head(const std::vector<artifact_index::Entry>& entries,
                              remote::PrefetchResult& result);

  RunContext run_;
  Compiler compiler_;
  Publisher publisher_;
  // Declared last: destroyed first, its leases ended while the store is still open.
  LeaseCoordinator leases_;
  bool head_when_local_ = true;
  std::string short_version_;  // why the manifest's compiler_version matches no store folder
  // Made by targets(): the registry read asks it the models' architectures.
  std::unique_ptr<plan::ModelResolver> resolver_;
};

}  // namespace neuron_cache::pipeline
