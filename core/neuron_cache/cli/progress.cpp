#include "neuron_cache/cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "neuron_cache/report/report.h"

namespace neuron_cache::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTerminalInterval = std::chrono::milliseconds(200);
constexpr auto kLineInterval = std::chrono::seconds(10);

}  // namespace

Progress::Mode Progress::mode_for(bool quiet) {
  if (quiet) return Mode::Quiet;
  return isatty(STDERR_FILENO) ? Mode::Terminal : Mode::Lines;
}

Progress::Progress(std::string label, Mode mode)
    : label_(std::move(label)), mode_(mode), start_(Clock::now()), last_print_(start_) {}

Progress::~Progress() {
  finish();
}

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  auto now = Clock::now();
  auto interval = mode_ == Mode::Terminal
                      ? std::chrono::duration_cast<Clock::duration>(kTerminalInterval)
                      : std::chrono::duration_cast<Clock::duration>(kLineInterval);
  if (mode_ != Mode::Quiet && now - last_print_ >= interval) {
    last_print_ = now;
    print(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ != Mode::Quiet && done_ > 0) print(true);
}

void Progress::print(bool final) {
  double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0;
  std::string line = label_ + ": " + report::human_bytes(done_);
  if (total_ > 0) line += " / " + report::human_bytes(total_);
  line += "  " + report::human_bytes(static_cast<uint64_t>(rate)) + "/s";
  if (!final && total_ > done_ && rate > 0) {
    line += "  ETA " + std::to_string(static_cast<long>((total_ - done_) / rate)) + "s";
  }
  if (final) {
    char elapsed[32];
    std::snprintf(elapsed, sizeof elapsed, "  in %.1fs", seconds);
    line += elapsed;
  }
  if (mode_ == Mode::Terminal) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace neuron_cache::cli
