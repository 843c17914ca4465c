// One run of the main job: the plan, then prefetch, compile and push as asked, in that order,
// and what each step did. The CLI's plan, prefetch, compile, push and ci and the GitHub Action
// call it and only render the result (text, JSON report, step outputs): nothing here prints.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <vector>

#include "neuron_cache/pipeline/pipeline.h"

namespace neuron_cache::pipeline {

// The steps after the plan; each works on the plan the one before left.
struct RunSteps {
  bool prefetch = false;
  bool compile = false;
  bool push = false;
  // Afterwards, a folder DIR/<name> for each configuration complete locally (none when empty).
  std::filesystem::path export_dir;
};

struct RunResult {
  plan::Plan initial;  // before any step
  plan::Plan final;    // after the steps: fetched and compiled rows are Local
  std::optional<PrefetchStep> prefetch;
  std::optional<CompileStep> compile;
  std::optional<PushStep> push;
  std::map<std::string, std::string> exports;  // configuration name -> export folder
  double seconds = 0;                          // the whole run, the plan included
  // The pipeline's side of the run, copied when it ends: reports need nothing else.
  std::string repo;  // Pipeline::repo()
  std::string compiler_version;
  size_t store_requests = 0;
  std::vector<Notice> notices;

  bool compile_failed() const { return compile && compile->failed() > 0; }
};

// `on_plan` sees the plan before any step runs (the CLI and the Action show it then). Cache
// problems are notices of `p` (or Errors with strict); a failed compile is in the result.
RunResult run(Pipeline& p, const RunSteps& steps,
              const std::function<void(const plan::Plan&)>& on_plan = {});

}  // namespace neuron_cache::pipeline
