// Cumulative statistics, like `sccache --show-stats`: what the runs that used this cache root got
// from each store (hits, misses, bytes moved, compile time spent and saved), kept in the cache
// root's work area. This file holds their format and their file; what a run adds is
// report/stats.h's, and `neuron-cache status` shows them (`--zero-stats` starts them again).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace neuron_cache::local {

// `.cache/huggingface/neuron-cache-stats.json` below the cache root: the tool's own bookkeeping,
// read and written through sys::RootedFile (no symlink followed, bounded).
inline constexpr std::string_view kStatsFile = ".cache/huggingface/neuron-cache-stats.json";
inline constexpr int kStatsFormatVersion = 1;
// How long a run waits for another run on the same cache root to add its own statistics.
inline constexpr std::chrono::seconds kStatsLockWait{10};

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
// Reads the file, lets `change` change what it holds and writes it back, under the statistics
// lock so that parallel runs on one cache root each add their own. False, with the file left as
// it was, when another run held the lock for `wait`; throws when the cache root cannot be
// written.
bool update_stats(const std::filesystem::path& cache_root,
                  const std::function<void(Stats&)>& change,
                  std::chrono::milliseconds wait = kStatsLockWait);
// Starts counting again from now; throws when another run held the lock for `wait`.
void zero_stats(const std::filesystem::path& cache_root,
                std::chrono::milliseconds wait = kStatsLockWait);

nlohmann::json stats_json(const Stats& stats);

}  // namespace neuron_cache::local
