// Transfer progress for people and for logs, fed by the one meter every store feeds
// (net/meter.h): a bar redrawn in place on a terminal, a plain line every interval (10 s,
// NEURON_CACHE_PROGRESS_INTERVAL_MS) and a final line otherwise, nothing with --quiet, --json,
// HF_HUB_DISABLE_PROGRESS_BARS or TERM=dumb. The bar is drawn by a thread of its own a few times a
// second: the threads that move the bytes only add to atomic counters. The CLI shows it on
// stderr; the Action hands its plain lines to the runner's log (never a bar: a CI log cannot
// redraw a line).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/net/meter.h"

namespace neuron_cache::report {

enum class ProgressMode { Bar, Lines, Off };

struct ProgressStyle {
  ProgressMode mode = ProgressMode::Off;
  bool colour = false;                        // the bar's fill, unless NO_COLOR
  std::chrono::milliseconds interval{10000};  // between plain lines
};

// The style for a command's stderr: Off when `quiet` (--quiet, --json) or the settings say so.
ProgressStyle progress_style(const config::Settings& settings, bool quiet);

// THE rate and ETA math: the average rate since the phase started, and the time the bytes left
// take at that rate (none while the total or the rate is unknown).
struct Figures {
  double rate = 0;  // bytes per second
  std::optional<double> eta_seconds;
};
Figures figures(const net::MeterReading& reading, double elapsed_seconds);

// "Downloading: 10.0 MiB of 30.0 MiB (33%), 1 of 3 files, 5.0 MiB/s, ETA 4 s"
std::string progress_line(const std::string& label, const net::MeterReading& reading,
                          double elapsed_seconds);
// "Downloading done: 30.0 MiB, 3 files in 1.2 s (25.0 MiB/s)"
std::string final_line(const std::string& label, const net::MeterReading& reading,
                       double elapsed_seconds);
// "Downloading [#####.....] 33% 10.0 MiB/30.0 MiB 1/3 files 5.0 MiB/s ETA 4 s"
std::string bar_line(const std::string& label, const net::MeterReading& reading,
                     double elapsed_seconds, bool colour);

// Shows the meter's phases while it lives (one per command).
class ProgressDisplay : public net::MeterObserver {
 public:
  explicit ProgressDisplay(ProgressStyle style, std::FILE* out = stderr);
  // Plain lines only (a Bar style shows as Lines), each handed to `print` without its newline,
  // on the display's own thread and on the thread that ends a phase.
  ProgressDisplay(ProgressStyle style, std::function<void(const std::string&)> print);
  ~ProgressDisplay() override;
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void phase_started(const std::string& label) override;
  void phase_ended() override;
  // Clears a bar being drawn so that a message gets a line of its own (the next tick redraws).
  static void clear_line();

 private:
  void tick_loop();
  void draw(bool final);
  double elapsed() const;

  ProgressStyle style_;
  std::FILE* out_;
  std::function<void(const std::string&)> print_;  // plain lines go here when set
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drawn_ = false;  // a bar is on the current line
  std::thread ticker_;
};

}  // namespace neuron_cache::report
