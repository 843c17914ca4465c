// Running helper programs (neuronx-cc --version) and looking for running compilers, without a
// shell: arguments are passed as a vector and never interpreted.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::process {

struct ProcessResult {
  int exit_code = -1;  // -1 when it did not exit normally
  bool timed_out = false;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (found through PATH), captures its output, kills it after `timeout`.
ProcessResult run_and_capture(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout);

// The first executable `program` in the ':'-separated `path_list`.
std::optional<std::string> find_on_path(const std::string& program, const std::string& path_list);

// Like `pgrep NAME`: whether a process whose command name contains `name` runs.
bool is_process_running(std::string_view name);

}  // namespace neuron_cache::process
