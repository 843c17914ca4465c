// Transfer progress for people and for logs: a live line (bytes, rate, ETA) on a terminal,
// a plain line every few seconds otherwise, nothing with --quiet or --json.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace neuron_cache::cli {

class Progress {
 public:
  enum class Mode { Terminal, Lines, Quiet };
  static Mode mode_for(bool quiet);

  Progress(std::string label, Mode mode);
  ~Progress();
  void set_total(uint64_t bytes) { total_ = bytes; }
  void add(uint64_t bytes);
  void finish();

 private:
  void print(bool final);

  std::string label_;
  Mode mode_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  bool finished_ = false;
};

}  // namespace neuron_cache::cli
