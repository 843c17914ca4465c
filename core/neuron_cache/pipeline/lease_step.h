// The compile step's leases (remote/leases.h): before compiling a miss this machine claims the
// configuration's lease in the store; a miss another machine holds is waited for and fetched
// from its push, or compiled here when its holder stopped without a result (a killed runner: the
// lease expires) or the wait goes past its bound.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/fleet/leases.h"
#include "neuron_cache/pipeline/compile_step.h"
#include "neuron_cache/pipeline/publish_step.h"
#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"

namespace neuron_cache::pipeline {

class LeaseCoordinator {
 public:
  // `prefetch` fetches a plan's store rows (the pipeline's prefetch step): what another machine
  // pushed while this one waited.
  LeaseCoordinator(RunContext& run, Compiler& compiler, Publisher& publisher,
                   std::function<PrefetchStep(plan::Plan&)> prefetch);
  // Ends the leases still held (fleet::Leases' destructor).
  ~LeaseCoordinator();

  // Whether this run compiles under leases: they are enabled and the store can hold them (made
  // on first call; a notice says why not).
  bool active();
  // The compile step with leases: claims each miss's lease, compiles those taken, then waits
  // for the machines compiling the others and fetches their pushes (or takes over a lease its
  // holder dropped).
  void compile(plan::Plan& plan, const std::vector<plan::PlanRow*>& misses, CompileStep& step,
               std::vector<plan::PlanRow*>& compiled);
  // The push step with leases: the leases of what it publishes end in its own commit; then each
  // lease still held is done when the store has its configuration now, else released with the
  // reason (finish).
  PushStep push(const plan::Plan& plan);
  // The pushes made before waiting for other machines, in order: the push step adds them.
  const std::vector<PushStep>& early_pushes() const { return early_pushes_; }

 private:
  struct Waiting;  // a configuration another machine compiles
  enum class Refetch { Fetched, Absent, Failed };

  fleet::Leases* leases();
  // After the push: each lease still held is done when the store has its configuration now, else
  // released with the reason; asked again while the store cannot be reached (an outage), for at
  // most the leases' life unrenewed.
  void finish(const plan::Plan& plan, const PushStep& step);
  // Pushes what this machine compiled and ends its leases before it waits for other machines:
  // they may be waiting for it in turn.
  void publish_before_waiting(const plan::Plan& plan, const std::vector<plan::PlanRow*>& compiled,
                              CompileStep& step);
  // Claims the leases of `rows` (keyed misses) in one go: those taken, or to compile anyway, go
  // to `mine` with their outcome in the step; the others are returned, to wait for.
  std::vector<Waiting> claim_each(const std::vector<plan::PlanRow*>& rows,
                                  const std::vector<fleet::ClaimRequest>& requests,
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
  // Reads the store's index again for `row` and fetches its entry when the store has one now;
  // what it downloaded is added to the step's `fetched`.
  Refetch fetch_after_wait(plan::PlanRow& row, CompileStep& step);

  RunContext& run_;
  Compiler& compiler_;
  Publisher& publisher_;
  std::function<PrefetchStep(plan::Plan&)> prefetch_;
  std::optional<std::unique_ptr<fleet::Leases>> leases_;  // set once asked: null when none
  std::vector<PushStep> early_pushes_;
  bool poll_failed_ = false;  // the current round of polls could not read the store
};

}  // namespace neuron_cache::pipeline
