// What a run adds to the cache root's cumulative statistics (local/run_stats.h keeps them), and
// how `neuron-cache status` shows them, like `sccache --show-stats`.
#pragma once

#include <functional>
#include <string>

#include "neuron_cache/local/run_stats.h"
#include "neuron_cache/pipeline/run.h"

namespace neuron_cache::report {

// Adds one run to the statistics, under their lock so parallel runs on one cache root add up. A
// run that neither prefetched nor compiled (plan, push) adds only the bytes it moved. Never
// throws: the statistics are never worth failing a run; when another run holds their lock past
// its bound or the root cannot be written, this run is not counted (the debug log says so).
void record_run(const std::filesystem::path& cache_root, const pipeline::RunResult& run,
                bool prefetched_or_compiled);
// pipeline::run, then record_run into the pipeline's cache root: what every command (and the
// Action) that fetches, compiles or pushes calls, so each run is counted once, the same way.
pipeline::RunResult counted_run(pipeline::Pipeline& p, const pipeline::RunSteps& steps,
                                const std::function<void(const plan::Plan&)>& on_plan = {});

std::string stats_text(const local::Stats& stats);

}  // namespace neuron_cache::report
