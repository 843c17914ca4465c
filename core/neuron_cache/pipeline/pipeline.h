// The main job, one step per stage: manifest -> plan -> prefetch -> compile -> push. The CLI
// commands (plan, prefetch, compile, push, ci, run) and the GitHub Action call these steps; none
// of them has cache logic of its own.
//
// Pipeline is the orchestrator: it prefetches itself and hands the rest to one object per step
// over a shared RunContext (pipeline/run_context.h): Planner (plan_step.h), LockedMode
// (lock_step.h), Compiler (compile_step.h), LeaseCoordinator (lease_step.h), Publisher
// (publish_step.h).
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
#include "neuron_cache/local/in_use.h"
#include "neuron_cache/pipeline/compile_step.h"
#include "neuron_cache/pipeline/lease_step.h"
#include "neuron_cache/pipeline/lock_step.h"
#include "neuron_cache/pipeline/plan_step.h"
#include "neuron_cache/pipeline/publish_step.h"
#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/pipeline/verify_step.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/plan/targets.h"
#include "neuron_cache/remote/lookup.h"

namespace neuron_cache::pipeline {

class Pipeline {
 public:
  // Loads the manifest (throws an input Error on bad input), resolves the settings again with it
  // as a layer (Settings::with_manifest), then opens the cache store they name.
  Pipeline(const config::Settings& settings, Remotes remotes, Options options);
  ~Pipeline();

  // What the run holds: the manifest, the store and where its name comes from, the local cache
  // and its index, the settings with the manifest's layer, the notices, the lock in use.
  const RunContext& context() const { return run_; }
  // Called with one line whenever something happens (for live output).
  void on_progress(std::function<void(const std::string&)> show) {
    run_.on_progress = std::move(show);
  }

  // The plan step (Planner): keys, then local, store, registry or compile for each.
  std::vector<plan::Target> targets();
  std::set<std::string> declared_keys();
  plan::Target profile_target(const std::string& name);
  // Whether the store's head is read even when every configuration is complete locally: true
  // (the default) when a push follows, which must know what the store lacks at its head; a plan
  // or prefetch alone sets it false and then asks the store nothing in that case.
  void read_head_when_local(bool read) { planner_.read_head_when_local(read); }
  plan::Plan make_plan();
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

  // Locked builds (LockedMode): `lock`, and `--locked` from the lockfile.
  LockStep lock(const plan::Plan& plan);
  void use_lockfile(const std::string& given);
  // `verify`: the store's entries of the plan's configurations judged by the trust policy.
  VerifyStep verify(const plan::Plan& plan);

 private:
  RunContext run_;
  local::InUse in_use_{run_.root};  // the entries this run uses, kept from cleanup
  LockedMode locked_;
  Planner planner_;
  Compiler compiler_;
  Publisher publisher_;
  // Declared last: destroyed first, its leases ended while the store is still open.
  LeaseCoordinator leases_;
};

}  // namespace neuron_cache::pipeline
