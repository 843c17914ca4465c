#include "neuron_cache/pipeline/verify_step.h"

#include <algorithm>

#include "neuron_cache/error.h"

namespace neuron_cache::pipeline {

size_t VerifyStep::refused() const {
  return static_cast<size_t>(std::count_if(
      entries.begin(), entries.end(), [](const VerifiedEntry& e) { return !e.refused.empty(); }));
}

VerifyStep verify_entries(RunContext& run, const plan::Plan& plan) {
  if (!run.remote) {
    throw operational_error("cannot verify: " + (plan.hub_problem.empty()
                                                     ? std::string("no cache store could be read")
                                                     : plan.hub_problem));
  }
  std::vector<const plan::Target*> keyed;
  for (const auto& row : plan.rows)
    if (row.target.unkeyed.empty()) keyed.push_back(&row.target);
  run.remote->load(plan::shards_of(keyed));
  if (!run.remote->complete()) throw operational_error(run.remote->why_incomplete());
  VerifyStep step;
  step.store = run.store->location();
  step.revision = run.remote->revision();
  for (const auto& row : plan.rows) {
    VerifiedEntry out;
    out.configuration = row.target.configuration.name;
    out.key = row.target.key;
    if (!row.target.unkeyed.empty()) {
      out.absent = "no cache key: " + row.target.unkeyed;
    } else if (const auto* entry =
                   run.remote->find(row.target.inputs.compiler_version, row.target.key)) {
      out.in_store = true;
      out.verdict = trust::verify_entry(*entry, run.trust.keys);
      out.refused = plan::refusal(*entry, run.trust).value_or("");
    } else {
      out.absent = "not in " + run.repo;
    }
    step.entries.push_back(std::move(out));
  }
  return step;
}

}  // namespace neuron_cache::pipeline
