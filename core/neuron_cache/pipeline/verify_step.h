// `neuron-cache verify`: an audit of the store's entries of a manifest's configurations under
// the trust policy (config/trust_settings.h): for each, who signed it, whether the signatures of
// trusted keys verify, and whether a machine with this policy would install it.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/pipeline/run_context.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/trust/signing.h"

namespace neuron_cache::pipeline {

struct VerifiedEntry {
  std::string configuration;
  std::string key;
  bool in_store = false;
  std::string absent;  // why there is nothing to verify (not in the store, no cache key)
  trust::Verdict verdict;
  std::string refused;  // why a machine with this policy would not install it, or ""
};

struct VerifyStep {
  std::string store;  // where the entries were read
  std::string revision;
  std::vector<VerifiedEntry> entries;

  size_t refused() const;
};

// Reads the store's entries of `plan`'s configurations (at the head the plan read) and judges
// each. Throws an operational Error when the store's index could not be read.
VerifyStep verify_entries(RunContext& run, const plan::Plan& plan);

}  // namespace neuron_cache::pipeline
