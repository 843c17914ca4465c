// The plan step: keys for every selected configuration (revisions and model types resolved),
// then for each whether it is complete locally, in the store, in optimum-neuron's registry, or to
// be compiled, and why (plan/plan.h).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/pipeline/lock_step.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/plan/targets.h"
#include "neuron_cache/remote/lookup.h"

namespace neuron_cache::pipeline {

struct RegistryAnswer;

// The debug log's line for one planned configuration: its key and why it has its status (a
// miss's reason names the nearest cached configuration).
void log_decision(const plan::PlanRow& row);

class Planner {
 public:
  Planner(RunContext& run, LockedMode& locked);
  ~Planner();

  // Keys for every selected configuration (revisions and model types resolved).
  std::vector<plan::Target> targets();
  // The keys of targets(), for gc to keep what the manifest declares. An input Error for a
  // configuration whose key cannot be known now: gc would take its entries for undeclared.
  std::set<std::string> declared_keys();
  // The target of a profile (cache_key.h): its name, the compiler version and NEURON_CC_FLAGS.
  // Throws an input Error for a bad name or an unknown compiler version.
  plan::Target profile_target(const std::string& name);
  // Whether the store's head is read even when every configuration is complete locally
  // (Pipeline::read_head_when_local).
  void read_head_when_local(bool read) { head_when_local_ = read; }
  // The plan of every selected configuration (the locked ones in locked mode).
  plan::Plan make_plan();
  // The same for these targets.
  plan::Plan make_plan(const std::vector<plan::Target>& targets);
  // The plan of the one target of `run`, whose entry grows (Pipeline::plan_run).
  plan::Plan plan_run(const plan::Target& target);

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
  void refuse_unsigned_registry(plan::Plan& plan) const;
  // Why the lock's entries may not be installed under the trust policy, or "".
  std::string untrusted_in_lock(const plan::Plan& plan) const;
  RegistryAnswer scan_registry(const std::string& compiler_version,
                               const remote::ScanModels& models);
  std::string short_version_problem(const std::string& version,
                                    const std::vector<std::string>& full) const;
  // The models of `targets` with the architecture digest of each target's task, when known.
  // `notes`: by model, how its folders are found when not by its digest (pipeline reasons).
  remote::ScanModels registry_models(const std::vector<const plan::Target*>& targets,
                                     std::map<std::string, std::string>& notes);

  RunContext& run_;
  LockedMode& locked_;
  bool head_when_local_ = true;
  std::string short_version_;   // why the manifest's compiler_version matches no store folder
  std::string untrusted_lock_;  // why the lock's entries may not be installed
  // Made by targets(): the registry read asks it the models' architectures.
  std::unique_ptr<plan::ModelResolver> resolver_;
};

}  // namespace neuron_cache::pipeline
