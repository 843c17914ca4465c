// The compile step of the pipeline: each miss runs the manifest's compile command against a
// staging cache (compile/capture.h): a seeded view of the cache (compile/seed_view.h) that one
// SeedViews object keeps up to date for all runs of the process, so the MODULE_ folders a run
// produced or reused are known exactly, at a cost that does not grow with the cache; only then
// are they moved into the cache and recorded in the artifact index.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"

namespace neuron_cache::compile {
class CaptureCache;
struct CaptureResult;
class SeedViews;
}  // namespace neuron_cache::compile

namespace neuron_cache::pipeline {

class LeaseCoordinator;

class Compiler {
 public:
  explicit Compiler(RunContext& run);
  ~Compiler();

  // Compiles the Compile rows (jobs in parallel); rows compiled become Local. With `leases`
  // active, a real compile is first claimed across the machines sharing the store.
  CompileStep compile(plan::Plan& plan, LeaseCoordinator* leases);
  // Compiles `rows` (jobs in parallel), their outcomes appended to the step's and the rows to
  // `compiled`, in the same order. Each running compile says every NEURON_CACHE_HEARTBEAT_SECONDS
  // that it still runs, through the run's progress lines.
  void compile_rows(const std::vector<plan::PlanRow*>& rows, CompileStep& step,
                    std::vector<plan::PlanRow*>& compiled);
  // The rows compiled and recorded become Local (again and again as compiles end).
  void mark_compiled(const std::vector<plan::PlanRow*>& compiled, const CompileStep& step);
  // Runs `argv` with the cache (NEURON_COMPILE_CACHE_URL on a staging cache), output shown
  // live, then moves what it compiled into the cache; with a target and a zero exit status, the
  // index entry for the target's key is written: the MODULE_ folders the run produced or used,
  // with those of the previous local entry that are still complete (so an entry only grows).
  WrappedRun run_wrapped(const plan::Target* target, const std::vector<std::string>& argv);
  // The seeded views of the cache, watched from the first call on (before prefetch installs
  // anything, so the first compile sees only what changed). Nothing when seeding is off.
  compile::SeedViews* seed_views();
  // The compile time the store or the local cache recorded for the configuration nearest to
  // `row` (its own earlier compile, or one that differs least), or 0.
  double expected_seconds(const plan::PlanRow& row) const;

 private:
  // How often running compiles say so, and how long each row's compile is expected to take.
  struct Heartbeats;
  CompileOutcome compile_one(const plan::PlanRow& row, std::chrono::seconds heartbeat,
                             double expected_seconds);
  // After a compile command that succeeded: completes what the hub proxy left, then writes the
  // index entry (no compile time when the command compiled nothing), or says in `out` why not.
  void finish_one(const plan::Target& target, compile::CaptureResult& captured,
                  const compile::CaptureCache& capture,
                  const std::map<std::string, std::string>& child_env, double seconds,
                  CompileOutcome& out);
  void compile_each(const std::vector<plan::PlanRow*>& misses, CompileOutcome* outcomes,
                    std::atomic<size_t>& next, const Heartbeats& heartbeats);
  void finish_compile(const std::vector<plan::PlanRow*>& compiled, CompileStep& step);
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

  RunContext& run_;
  std::once_flag seed_views_once_;
  std::unique_ptr<compile::SeedViews> seed_views_;
};

}  // namespace neuron_cache::pipeline
