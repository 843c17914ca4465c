#include "neuron_cache/report/stats.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/sys/fd.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::report {
namespace {

using nlohmann::json;

constexpr std::string_view kLockName = "neuron-cache-stats.lock";

sys::RootedFile stats_file(const std::filesystem::path& cache_root) {
  return sys::RootedFile(cache_root, std::string(kStatsFile));
}

// A number the file holds, or 0: the file is the tool's own, but hostile until bounded.
template <typename T>
T number(const json& object, const char* key) {
  const json* value = object.is_object() && object.contains(key) ? &object.at(key) : nullptr;
  if (value == nullptr || !value->is_number() || value->get<double>() < 0) return 0;
  return value->get<T>();
}

StoreStats store_from(const json& object) {
  StoreStats s;
  s.runs = number<uint64_t>(object, "runs");
  s.local_hits = number<uint64_t>(object, "local_hits");
  s.store_hits = number<uint64_t>(object, "store_hits");
  s.misses = number<uint64_t>(object, "misses");
  s.compiled = number<uint64_t>(object, "compiled");
  s.reused = number<uint64_t>(object, "reused");
  s.bytes_reused = number<uint64_t>(object, "bytes_reused");
  s.failed = number<uint64_t>(object, "failed");
  s.bytes_downloaded = number<uint64_t>(object, "bytes_downloaded");
  s.bytes_uploaded = number<uint64_t>(object, "bytes_uploaded");
  s.compile_seconds = number<double>(object, "compile_seconds");
  s.compile_seconds_saved = number<double>(object, "compile_seconds_saved");
  return s;
}

json store_json(const StoreStats& s) {
  return {{"runs", s.runs},
          {"local_hits", s.local_hits},
          {"store_hits", s.store_hits},
          {"misses", s.misses},
          {"compiled", s.compiled},
          {"reused", s.reused},
          {"failed", s.failed},
          {"bytes_reused", s.bytes_reused},
          {"bytes_downloaded", s.bytes_downloaded},
          {"bytes_uploaded", s.bytes_uploaded},
          {"compile_seconds", s.compile_seconds},
          {"compile_seconds_saved", s.compile_seconds_saved}};
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

void write(const std::filesystem::path& cache_root, const Stats& stats) {
  stats_file(cache_root).replace(stats_json(stats).dump(2) + "\n");
}

// Holds the lock of the statistics file while it lives: parallel runs on one cache root each add
// their own run instead of overwriting another's.
class StatsLock {
 public:
  explicit StatsLock(const std::filesystem::path& cache_root) {
    sys::SafeDir dir = sys::SafeDir::open(cache_root).make_path(std::string(layout::kWorkAreaDir));
    fd_ = sys::UniqueFd(
        openat(dir.fd(), kLockName.data(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    while (fd_ && flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
  }

 private:
  sys::UniqueFd fd_;
};

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

Stats read_stats(const std::filesystem::path& cache_root) {
  auto value = pyjson::read_kept(stats_file(cache_root));
  return value ? stats_from(*value) : Stats{};
}

void record_run(const std::filesystem::path& cache_root, const pipeline::RunResult& run,
                bool prefetched_or_compiled) {
  try {
    StatsLock lock(cache_root);
    Stats stats = read_stats(cache_root);
    if (stats.since.empty()) stats.since = artifact_index::utc_now();
    add(stats.stores[run.repo.empty() ? "(no store)" : run.repo], totals(run),
        prefetched_or_compiled);
    write(cache_root, stats);
  } catch (const std::exception&) {
    // A read-only or full cache root: the run's own report still says what it did.
  }
}

pipeline::RunResult counted_run(pipeline::Pipeline& p, const pipeline::RunSteps& steps,
                                const std::function<void(const plan::Plan&)>& on_plan) {
  pipeline::RunResult result = pipeline::run(p, steps, on_plan);
  record_run(p.local_index().cache().root(), result, steps.prefetch || steps.compile);
  return result;
}

void zero_stats(const std::filesystem::path& cache_root) {
  StatsLock lock(cache_root);
  Stats stats;
  stats.since = artifact_index::utc_now();
  write(cache_root, stats);
}

json stats_json(const Stats& stats) {
  json stores = json::object();
  for (const auto& [name, s] : stats.stores) stores[name] = store_json(s);
  return {{"format_version", kStatsFormatVersion}, {"since", stats.since}, {"stores", stores}};
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
            human_bytes(s.bytes_uploaded) + " uploaded, " + human_seconds(s.compile_seconds) +
            " compiling, " + human_seconds(s.compile_seconds_saved) + " of compiling saved\n";
  }
  return text;
}

}  // namespace neuron_cache::report
