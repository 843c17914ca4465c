// The push step of the pipeline: what the store lacks of the local entries, sent in one commit
// (remote/push.h), or why nothing is sent; and the export folders of the configurations complete
// locally.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/pipeline/results.h"
#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"

namespace neuron_cache::pipeline {

class Publisher {
 public:
  explicit Publisher(RunContext& run) : run_(run) {}

  // Pushes every Local row whose entry the store does not have (compiled here or earlier).
  // `also`: writes for the push's own commit (the leases of what it publishes end in it).
  PushStep push(const plan::Plan& plan, const transfer::AlsoCommit& also = {});
  // Pushes MODULE_ folders that belong to no configuration (a training run without --config).
  PushStep push_modules(const std::vector<std::string>& modules);
  // Why a push must not happen (read-only, no repo, offline, nothing new), or "" when it may.
  std::string why_not_push(bool nothing_new);
  // Exports every configuration complete locally (local/export_dir.h) under `dir`; returns the
  // folder of each, by configuration name.
  std::map<std::string, std::string> export_artifacts(const plan::Plan& plan,
                                                      const std::filesystem::path& dir);

 private:
  // Why nothing can be pushed when the store says its credentials cannot write, else empty.
  std::string read_only_token();
  // Whether this run owes the store a push: its compile step recorded something, or, without a
  // compile step (`push`, `run`), the plan has configurations complete locally.
  bool owes_push(const plan::Plan& plan) const;
  // Under --strict, a push owed (`owed`) and skipped for any reason but --read-only is an Error.
  void refuse_skip_when_strict(bool owed, const std::string& reason);
  // The local index entries of the plan's Local rows that the store's index does not have, or
  // has with fewer MODULE_ folders or registry files (artifact_index::covers).
  std::vector<artifact_index::Entry> not_on_hub(const plan::Plan& plan);
  // The contents ids (artifact_index::contents_id) of the rows' entries the store's index covers
  // (none when it cannot be read).
  std::vector<std::string> covered_on_hub(const std::vector<const plan::PlanRow*>& rows);
  std::string contents_id(const artifact_index::Entry& entry) const;
  void remember_stored(const std::vector<artifact_index::Entry>& entries,
                       const transfer::PushResult& result);

  RunContext& run_;
  // What an earlier push of this run placed in the store (contents ids): a later push of the
  // run (after waiting for other machines) does not offer it again on a stale view of the store.
  std::set<std::string> stored_this_run_;
};

}  // namespace neuron_cache::pipeline
