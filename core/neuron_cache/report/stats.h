// Cumulative statistics, like `sccache --show-stats`: what the runs that used this cache root got
// from each store (hits, misses, bytes moved, compile time spent and saved), kept in the cache
// root's work area and shown by `neuron-cache status` (`--zero-stats` starts them again).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "neuron_cache/pipeline/run.h"

namespace neuron_cache::report {

// `.cache/huggingface/neuron-cache-stats.json` below the cache root: the tool's own bookkeeping,
// read and written through sys::RootedFile (no symlink followed, bounded).
inline constexpr std::string_view kStatsFile = ".cache/huggingface/neuron-cache-stats.json";
inline constexpr int kStatsFormatVersion = 1;

struct StoreStats {
  uint64_t runs = 0;  // runs that fetched or compiled with this store
  uint64_t local_hits = 0;
  uint64_t store_hits = 0;
  uint64_t misses = 0;
  uint64_t compiled = 0;
  uint64_t reused = 0;  // hits through optimum-neuron's hub proxy (report::Totals::reused)
  uint64_t failed = 0;
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_reused = 0;  // of those reused configurations
  uint64_t bytes_uploaded = 0;
  double compile_seconds = 0;
  double compile_seconds_saved = 0;
};

struct Stats {
  std::string since;                         // when counting began (UTC, ISO 8601)
  std::map<std::string, StoreStats> stores;  // by store name (acme/cache, s3://b/p, file:///x)
};

// What the file holds; empty stats when it is missing, damaged or not a regular file.
Stats read_stats(const std::filesystem::path& cache_root);
// Adds one run to the file, under a lock so parallel runs on one cache root add up. A run that
// neither prefetched nor compiled (plan, push) adds only the bytes it moved. Never throws: the
// statistics are never worth failing a run.
void record_run(const std::filesystem::path& cache_root, const pipeline::RunResult& run,
                bool prefetched_or_compiled);
// pipeline::run, then record_run into the pipeline's cache root: what every command (and the
// Action) that fetches, compiles or pushes calls, so each run is counted once, the same way.
pipeline::RunResult counted_run(pipeline::Pipeline& p, const pipeline::RunSteps& steps,
                                const std::function<void(const plan::Plan&)>& on_plan = {});
// Starts counting again from now.
void zero_stats(const std::filesystem::path& cache_root);

nlohmann::json stats_json(const Stats& stats);
std::string stats_text(const Stats& stats);

}  // namespace neuron_cache::report
