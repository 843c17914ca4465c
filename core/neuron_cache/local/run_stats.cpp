#include "neuron_cache/local/run_stats.h"

#include <limits>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/sys/duration.h"
#include "neuron_cache/sys/file_lock.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {
namespace {

using nlohmann::json;

constexpr std::string_view kLockName = "neuron-cache-stats.lock";

sys::RootedFile stats_file(const std::filesystem::path& cache_root) {
  return sys::RootedFile(cache_root, std::string(kStatsFile));
}

// A number the file holds, or 0: the file is the tool's own, but hostile until bounded (a
// negative, NaN or out-of-range number is no count this tool wrote).
template <typename T>
T number(const json& object, const char* key) {
  const json* value = object.is_object() && object.contains(key) ? &object.at(key) : nullptr;
  if (value == nullptr || !value->is_number()) return 0;
  double d = value->get<double>();
  if (!(d >= 0) || d >= static_cast<double>(std::numeric_limits<T>::max())) return 0;
  return value->is_number_float() ? static_cast<T>(d) : value->get<T>();
}

// Every field of StoreStats with its name in the file: read and written from this one list.
constexpr std::pair<const char*, uint64_t StoreStats::*> kCounts[] = {
    {"runs", &StoreStats::runs},
    {"local_hits", &StoreStats::local_hits},
    {"store_hits", &StoreStats::store_hits},
    {"misses", &StoreStats::misses},
    {"compiled", &StoreStats::compiled},
    {"reused", &StoreStats::reused},
    {"failed", &StoreStats::failed},
    {"bytes_reused", &StoreStats::bytes_reused},
    {"bytes_downloaded", &StoreStats::bytes_downloaded},
    {"bytes_uploaded", &StoreStats::bytes_uploaded},
};
constexpr std::pair<const char*, double StoreStats::*> kSeconds[] = {
    {"compile_seconds", &StoreStats::compile_seconds},
    {"compile_seconds_saved", &StoreStats::compile_seconds_saved},
};

StoreStats store_from(const json& object) {
  StoreStats s;
  for (const auto& [name, field] : kCounts) s.*field = number<uint64_t>(object, name);
  for (const auto& [name, field] : kSeconds) s.*field = number<double>(object, name);
  return s;
}

json store_json(const StoreStats& s) {
  json object = json::object();
  for (const auto& [name, field] : kCounts) object[name] = s.*field;
  for (const auto& [name, field] : kSeconds) object[name] = s.*field;
  return object;
}

Stats stats_from(const json& value) {
  Stats stats;
  if (!value.is_object() || number<int>(value, "format_version") != kStatsFormatVersion)
    return stats;
  if (value.contains("since") && value["since"].is_string())
    stats.since = value["since"].get<std::string>();
  if (value.contains("stores") && value["stores"].is_object()) {
    for (const auto& [name, object] : value["stores"].items())
      stats.stores[name] = store_from(object);
  }
  return stats;
}

// The statistics lock, or nothing when another run held it for `wait`.
std::optional<sys::FileLock> lock_stats(const std::filesystem::path& cache_root,
                                        std::chrono::milliseconds wait) {
  sys::SafeDir area = sys::SafeDir::open(cache_root).make_path(std::string(layout::kWorkAreaDir));
  return sys::FileLock::acquire(area, std::string(kLockName), sys::LockKind::Flock,
                                sys::FileLock::Clock::now() + wait);
}

// Renamed into place, so a reader sees the old counts or the new, but not flushed: an fsync
// cost more than the rest of a warm run (4 to 8 ms on ext4), and the counts are advisory. A
// crash that leaves the file empty or torn only starts them again (read_stats finds none).
void write(const std::filesystem::path& cache_root, const Stats& stats) {
  stats_file(cache_root).replace_unflushed(stats_json(stats).dump(2) + "\n");
}

}  // namespace

Stats read_stats(const std::filesystem::path& cache_root) {
  auto value = pyjson::read_kept(stats_file(cache_root));
  return value ? stats_from(*value) : Stats{};
}

bool update_stats(const std::filesystem::path& cache_root,
                  const std::function<void(Stats&)>& change, std::chrono::milliseconds wait) {
  std::optional<sys::FileLock> lock = lock_stats(cache_root, wait);
  if (!lock) return false;
  Stats stats = read_stats(cache_root);
  if (stats.since.empty()) stats.since = artifact_index::utc_now();
  change(stats);
  write(cache_root, stats);
  return true;
}

void zero_stats(const std::filesystem::path& cache_root, std::chrono::milliseconds wait) {
  std::optional<sys::FileLock> lock = lock_stats(cache_root, wait);
  if (!lock) {
    throw operational_error("the statistics of " + cache_root.string() + " stayed locked for " +
                            sys::duration_text(wait) +
                            " by another run recording its own: run `status --zero-stats` again "
                            "once it has finished");
  }
  Stats stats;
  stats.since = artifact_index::utc_now();
  write(cache_root, stats);
}

json stats_json(const Stats& stats) {
  json stores = json::object();
  for (const auto& [name, s] : stats.stores) stores[name] = store_json(s);
  return {{"format_version", kStatsFormatVersion}, {"since", stats.since}, {"stores", stores}};
}

}  // namespace neuron_cache::local
