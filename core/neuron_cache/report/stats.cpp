#include "neuron_cache/report/stats.h"

#include "neuron_cache/format/wording.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/sys/duration.h"

namespace neuron_cache::report {
namespace {

using local::Stats;
using local::StoreStats;

void add(StoreStats& s, const Totals& t, bool prefetched_or_compiled) {
  s.bytes_downloaded += t.bytes_downloaded;
  s.bytes_uploaded += t.bytes_uploaded;
  if (!prefetched_or_compiled) return;
  ++s.runs;
  s.local_hits += t.local;
  s.store_hits += t.store_hits;
  s.misses += t.misses;
  s.compiled += t.compiled;
  s.reused += t.reused;
  s.bytes_reused += t.bytes_reused;
  s.failed += t.failed;
  s.compile_seconds += t.compile_seconds;
  s.compile_seconds_saved += t.compile_seconds_saved;
}

}  // namespace

void record_run(const std::filesystem::path& cache_root, const pipeline::RunResult& run,
                bool prefetched_or_compiled) {
  auto change = [&](Stats& stats) {
    add(stats.stores[run.repo.empty() ? "(no store)" : run.repo], totals(run),
        prefetched_or_compiled);
  };
  try {
    if (!local::update_stats(cache_root, change)) {
      log::debug("stats", "this run is not counted: another run held the statistics lock for " +
                              std::to_string(local::kStatsLockWait.count()) + " s");
    }
  } catch (const std::exception& e) {
    // A read-only or full cache root: the run's own report still says what it did.
    log::debug("stats", std::string("this run is not counted: ") + e.what());
  }
}

pipeline::RunResult counted_run(pipeline::Pipeline& p, const pipeline::RunSteps& steps,
                                const std::function<void(const plan::Plan&)>& on_plan) {
  pipeline::RunResult result = pipeline::run(p, steps, on_plan);
  record_run(p.context().root, result, steps.prefetch || steps.compile);
  return result;
}

std::string stats_text(const Stats& stats) {
  if (stats.stores.empty()) {
    return "Statistics: none yet (prefetch, compile, ci and run count here)" +
           (stats.since.empty() ? std::string() : ", since " + stats.since) + "\n";
  }
  std::string text = "Statistics since " + stats.since + ":\n";
  for (const auto& [name, s] : stats.stores) {
    uint64_t hits = s.local_hits + s.store_hits + s.reused;
    std::string reused = s.reused ? ", " + std::to_string(s.reused) +
                                        " reused through optimum-neuron (" +
                                        human_bytes(s.bytes_reused) + ")"
                                  : "";
    text += "  " + name + ": " + count_of(s.runs, "run") + ", " + count_of(hits, "hit") + " (" +
            std::to_string(s.local_hits) + " local, " + std::to_string(s.store_hits) + " fetched" +
            reused + "), " + count_of(s.misses, "miss", "misses") + " (" +
            std::to_string(s.compiled) + " compiled, " + std::to_string(s.failed) +
            " failed)\n    " + human_bytes(s.bytes_downloaded) + " downloaded, " +
            human_bytes(s.bytes_uploaded) + " uploaded, " + sys::duration_text(s.compile_seconds) +
            " compiling, " + sys::duration_text(s.compile_seconds_saved) + " of compiling saved\n";
  }
  return text;
}

}  // namespace neuron_cache::report
