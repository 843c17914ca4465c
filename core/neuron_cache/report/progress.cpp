#include "neuron_cache/report/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "neuron_cache/format/wording.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/sys/duration.h"

namespace neuron_cache::report {
namespace {

using Clock = std::chrono::steady_clock;

// A bar redrawn more often is not read any faster; less often looks stuck.
constexpr auto kBarInterval = std::chrono::milliseconds(200);
constexpr size_t kBarWidth = 24;

// The display a message must clear the bar of; one per process (the meter is one).
std::atomic<ProgressDisplay*> active{nullptr};

// Retries may send bytes twice: what is shown never passes the total.
uint64_t shown_bytes(const net::MeterReading& r) {
  return r.bytes_total > 0 ? std::min(r.bytes, r.bytes_total) : r.bytes;
}

int percent(const net::MeterReading& r) {
  return r.bytes_total > 0 ? static_cast<int>(shown_bytes(r) * 100 / r.bytes_total) : 0;
}

std::string rate_and_eta(const Figures& f) {
  std::string text = human_bytes(static_cast<uint64_t>(f.rate)) + "/s";
  if (f.eta_seconds) text += ", ETA " + sys::duration_text(*f.eta_seconds);
  return text;
}

}  // namespace

ProgressStyle progress_style(const config::Settings& settings, bool quiet) {
  ProgressStyle style;
  style.colour = settings.colour;
  style.interval = settings.progress_interval();
  if (quiet || !settings.progress) return style;
  style.mode = isatty(STDERR_FILENO) ? ProgressMode::Bar : ProgressMode::Lines;
  return style;
}

Figures figures(const net::MeterReading& reading, double elapsed_seconds) {
  Figures f;
  uint64_t done = shown_bytes(reading);
  if (elapsed_seconds > 0) f.rate = static_cast<double>(done) / elapsed_seconds;
  if (reading.bytes_total > done && f.rate > 0) {
    f.eta_seconds = static_cast<double>(reading.bytes_total - done) / f.rate;
  }
  return f;
}

std::string progress_line(const std::string& label, const net::MeterReading& reading,
                          double elapsed_seconds) {
  std::string line = label + ": " + human_bytes(shown_bytes(reading));
  if (reading.bytes_total > 0) {
    line +=
        " of " + human_bytes(reading.bytes_total) + " (" + std::to_string(percent(reading)) + "%)";
  }
  if (reading.files_total > 0) {
    line += ", " + std::to_string(reading.files) + " of " + std::to_string(reading.files_total) +
            " files";
  }
  return line + ", " + rate_and_eta(figures(reading, elapsed_seconds));
}

std::string final_line(const std::string& label, const net::MeterReading& reading,
                       double elapsed_seconds) {
  Figures f = figures(reading, elapsed_seconds);
  return label + " done: " + human_bytes(shown_bytes(reading)) + ", " +
         count_of(reading.files, "file") + " in " + sys::duration_text(elapsed_seconds) + " (" +
         human_bytes(static_cast<uint64_t>(f.rate)) + "/s)";
}

std::string bar_line(const std::string& label, const net::MeterReading& reading,
                     double elapsed_seconds, bool colour) {
  size_t filled =
      reading.bytes_total > 0 ? kBarWidth * shown_bytes(reading) / reading.bytes_total : 0;
  std::string bar = std::string(filled, '#');
  if (colour) bar = "\033[32m" + bar + "\033[0m";
  bar += std::string(kBarWidth - filled, '.');
  std::string line = label + " [" + bar + "] " + std::to_string(percent(reading)) + "% " +
                     human_bytes(shown_bytes(reading));
  if (reading.bytes_total > 0) line += "/" + human_bytes(reading.bytes_total);
  if (reading.files_total > 0) {
    line +=
        " " + std::to_string(reading.files) + "/" + std::to_string(reading.files_total) + " files";
  }
  return line + " " + rate_and_eta(figures(reading, elapsed_seconds));
}

ProgressDisplay::ProgressDisplay(ProgressStyle style, std::FILE* out) : style_(style), out_(out) {
  if (style_.mode == ProgressMode::Off) return;
  active = this;
  net::meter().observe(this);
}

ProgressDisplay::ProgressDisplay(ProgressStyle style, std::function<void(const std::string&)> print)
    : style_(style), out_(nullptr), print_(std::move(print)) {
  if (style_.mode == ProgressMode::Bar) style_.mode = ProgressMode::Lines;
  if (style_.mode == ProgressMode::Off) return;
  active = this;
  net::meter().observe(this);
}

ProgressDisplay::~ProgressDisplay() {
  if (style_.mode == ProgressMode::Off) return;
  net::meter().observe(nullptr);
  phase_ended();  // a phase an exception left: stop the ticker
  active = nullptr;
}

void ProgressDisplay::phase_started(const std::string& label) {
  label_ = label;
  start_ = Clock::now();
  stop_ = false;
  ticker_ = std::thread([this] { tick_loop(); });
}

void ProgressDisplay::phase_ended() {
  if (!ticker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  ticker_.join();
  net::MeterReading reading = net::meter().read();
  if (reading.bytes > 0 || reading.files > 0) draw(true);
}

void ProgressDisplay::clear_line() {
  ProgressDisplay* display = active;
  if (display == nullptr) return;
  std::lock_guard lock(display->mutex_);
  if (!display->drawn_) return;
  std::fputs("\r\033[K", display->out_);
  std::fflush(display->out_);
  display->drawn_ = false;
}

void ProgressDisplay::tick_loop() {
  auto interval = style_.mode == ProgressMode::Bar
                      ? std::min<std::chrono::milliseconds>(kBarInterval, style_.interval)
                      : style_.interval;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stop_; })) {
    lock.unlock();
    draw(false);
    lock.lock();
  }
}

double ProgressDisplay::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressDisplay::draw(bool final) {
  net::MeterReading reading = net::meter().read();
  std::lock_guard lock(mutex_);
  if (style_.mode == ProgressMode::Lines) {
    std::string line =
        final ? final_line(label_, reading, elapsed()) : progress_line(label_, reading, elapsed());
    if (print_) return print_(line);
    std::fprintf(out_, "%s\n", line.c_str());
  } else {
    std::string line = bar_line(label_, reading, elapsed(), style_.colour);
    if (final) line = final_line(label_, reading, elapsed());
    std::fprintf(out_, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
    drawn_ = !final;
  }
  std::fflush(out_);
}

}  // namespace neuron_cache::report
