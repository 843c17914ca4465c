#include "quota.h"

#include <algorithm>

namespace neuron_cache::hub_server {

Quotas::Quotas(QuotaOptions options) : options_(options) {
  options_.window_seconds = std::max<int64_t>(options_.window_seconds, 1);
  options_.commit_window_seconds = std::max<int64_t>(options_.commit_window_seconds, 1);
}

std::string Quotas::bucket_of(const std::string& decoded_path) {
  bool file = decoded_path.find("/resolve/") != std::string::npos ||
              decoded_path.find("/raw/") != std::string::npos ||
              decoded_path.starts_with("/api/resolve-cache/");
  return file ? "resolvers" : "api";
}

std::pair<int64_t, int64_t> Quotas::window_now(int64_t seconds) const {
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - start_)
                     .count();
  int64_t length = seconds * 1000;
  int64_t index = elapsed / length;
  int64_t left_ms = (index + 1) * length - elapsed;
  return {index, std::max<int64_t>(1, (left_ms + 999) / 1000)};  // whole seconds, rounded up
}

Quotas::Window& Quotas::current(std::map<std::string, Window>& windows, const std::string& key,
                                int64_t index) {
  Window& window = windows[key];
  if (window.index != index) window = {index, 0};  // a new window starts empty
  return window;
}

std::optional<QuotaState> Quotas::count(const std::string& bucket, const std::string& caller) {
  uint64_t quota = bucket == "resolvers" ? options_.resolvers : options_.api;
  if (quota == 0) return std::nullopt;
  auto [index, left] = window_now(options_.window_seconds);
  std::lock_guard lock(mutex_);
  Window& window = current(requests_, bucket + "\n" + caller, index);
  QuotaState state{bucket, quota, 0, left, options_.window_seconds, window.used >= quota};
  if (!state.refused) ++window.used;  // a refused request uses nothing
  state.remaining = quota - window.used;
  return state;
}

std::optional<int64_t> Quotas::commit_wait(const std::string& repo) {
  if (options_.commits == 0) return std::nullopt;
  auto [index, left] = window_now(options_.commit_window_seconds);
  std::lock_guard lock(mutex_);
  if (current(commits_, repo, index).used < options_.commits) return std::nullopt;
  return left;
}

void Quotas::add_commit(const std::string& repo) {
  if (options_.commits == 0) return;
  int64_t index = window_now(options_.commit_window_seconds).first;
  std::lock_guard lock(mutex_);
  ++current(commits_, repo, index).used;
}

std::string window_text(int64_t seconds) {
  if (seconds % 60 == 0) {
    int64_t minutes = seconds / 60;
    return std::to_string(minutes) + (minutes == 1 ? " minute" : " minutes");
  }
  return std::to_string(seconds) + (seconds == 1 ? " second" : " seconds");
}

}  // namespace neuron_cache::hub_server
