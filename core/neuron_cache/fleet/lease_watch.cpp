#include "neuron_cache/fleet/lease_watch.h"

#include <algorithm>
#include <limits>

#include "neuron_cache/format/lease.h"

namespace neuron_cache::fleet {
namespace {

// 2200-01-01T00:00:00Z: a store clock beyond it is wrong, not late.
constexpr int64_t kLatestSeconds = 7'258'118'400;
// A file written this much after the store's now is rounding (whole seconds, a probe and the
// file on two servers of one share); more is a clock that is not believable.
constexpr int64_t kStoreTimeSlackSeconds = 5;

// Whole seconds from `from` to `to`, 0 when `to` is earlier, saturated instead of overflowing
// (a test's clock may be anywhere; a steady clock never goes back).
int64_t seconds_between(std::chrono::steady_clock::time_point from,
                        std::chrono::steady_clock::time_point to) {
  using Rep = std::chrono::steady_clock::rep;
  Rep ticks = 0;
  if (__builtin_sub_overflow(to.time_since_epoch().count(), from.time_since_epoch().count(),
                             &ticks))
    ticks = to > from ? std::numeric_limits<Rep>::max() : 0;
  if (ticks <= 0) return 0;
  auto span = std::chrono::steady_clock::duration(ticks);
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(span).count());
}

}  // namespace

std::optional<int64_t> store_age(const storage::StoreTimes& times) {
  for (int64_t t : {times.written, times.now}) {
    if (t < lease::kEarliestSeconds || t > kLatestSeconds) return std::nullopt;
  }
  int64_t age = times.now - times.written;  // both within [2020, 2200]: no overflow
  if (age < -kStoreTimeSlackSeconds) return std::nullopt;
  return std::max<int64_t>(age, 0);
}

LeaseWatch::LeaseWatch(MonotonicClock clock) : clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

LeaseWatch::Sight LeaseWatch::seen(
    const std::string& path, const std::string& content,
    const std::function<std::optional<storage::StoreTimes>()>& store_times) {
  auto now = clock_();
  {
    std::lock_guard lock(mutex_);
    auto it = by_path_.find(path);
    if (it != by_path_.end() && it->second.content == content) {
      const Version& v = it->second;
      return {lease::add_seconds(v.age_then, seconds_between(v.first_seen, now)), v.store_written};
    }
  }
  // A new version (a renewal, a new holder) or a first sight: asked without the lock, as the
  // store may take a while to answer.
  Version v{content, now, 0, std::nullopt};
  if (std::optional<storage::StoreTimes> times = store_times ? store_times() : std::nullopt) {
    if (std::optional<int64_t> age = store_age(*times)) {
      v.age_then = *age;
      v.store_written = times->written;
    }
  }
  std::lock_guard lock(mutex_);
  by_path_[path] = v;
  return {v.age_then, v.store_written};
}

}  // namespace neuron_cache::fleet
