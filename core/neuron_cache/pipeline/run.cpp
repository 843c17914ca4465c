#include "neuron_cache/pipeline/run.h"

#include <chrono>

namespace neuron_cache::pipeline {

RunResult run(Pipeline& p, const RunSteps& steps,
              const std::function<void(const plan::Plan&)>& on_plan) {
  auto start = std::chrono::steady_clock::now();
  RunResult result;
  p.read_head_when_local(steps.push);
  result.initial = p.make_plan();
  result.final = result.initial;
  if (on_plan) on_plan(result.initial);
  if (steps.prefetch) result.prefetch = p.prefetch(result.final);
  if (steps.compile) result.compile = p.compile(result.final);
  if (steps.push) result.push = p.push(result.final);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!steps.export_dir.empty())
    result.exports = p.export_artifacts(result.final, steps.export_dir);
  result.repo = p.context().repo;
  result.compiler_version = p.context().compiler_version;
  result.store_requests = p.context().store_requests();
  result.notices = p.context().notices;
  return result;
}

}  // namespace neuron_cache::pipeline
