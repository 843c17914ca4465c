#include "neuron_cache/log/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/printable.h"

namespace neuron_cache::log {
namespace {

// A decision names a configuration, a request a URL: long enough for both, never a flood.
constexpr size_t kMaxLine = 2000;

std::atomic<bool> on{false};
std::mutex write_mutex;
std::function<void()> before_line;
const auto started = std::chrono::steady_clock::now();

std::string elapsed_text() {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char text[32];
  std::snprintf(text, sizeof text, "+%.3fs", seconds);
  return text;
}

}  // namespace

void enable(bool value) {
  on.store(value, std::memory_order_relaxed);
}

bool enabled() {
  return on.load(std::memory_order_relaxed);
}

void debug(std::string_view topic, std::string_view text) {
  if (!enabled()) return;
  std::string line = "neuron-cache: debug: " + elapsed_text() + " " + std::string(topic) + ": " +
                     printable(config::redact(text), kMaxLine) + "\n";
  std::lock_guard lock(write_mutex);
  if (before_line) before_line();
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void set_before_line(std::function<void()> hook) {
  std::lock_guard lock(write_mutex);
  before_line = std::move(hook);
}

}  // namespace neuron_cache::log
