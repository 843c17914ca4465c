// Running a compile command (optimum-cli export neuron, a training script, ...) as a child process
// without a shell, its output sent to a log file, so that neuron-cache can capture what it
// compiled. Safe to call from several threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::compile {

struct CommandRun {
  std::vector<std::string> argv;               // argv[0] is looked up in the child's PATH
  std::map<std::string, std::string> set_env;  // added to or overridden in the child's environment
  std::vector<std::string> unset_env;          // removed from it
  // stdout and stderr (created or truncated, 0644), with every secret masked (config/redact.h):
  // the known token and the value of any variable of the child's environment whose name ends
  // in TOKEN.
  std::filesystem::path log_file;
  std::optional<std::filesystem::path> working_dir;
  bool tee = false;  // also copy the (masked) output to our stdout
  // Called every `heartbeat_every` while the command runs, with the seconds since it started:
  // a long compile that prints nothing is not mistaken for a stuck one. Called on the thread
  // that runs the command, between reads of its output, so it ends with the command (no thread
  // of its own to stop); a call that comes late is not made up for. Never when zero.
  std::chrono::milliseconds heartbeat_every{0};
  std::function<void(double seconds)> heartbeat;
};

struct RunOutcome {
  int exit_code = -1;  // -1 when killed by a signal or not started
  int signal = 0;
  bool started = false;
  std::string start_error;  // why it could not start (not found, not executable, ...)
  double seconds = 0;
};

// Starts the command, waits for it and reports how it ended. Never throws: a command that could
// not start (not found, not executable, log file not writable) has started=false and start_error.
// Never prints the environment (it may hold tokens).
RunOutcome run_command(const CommandRun& run);

// The last `lines` lines of a log file (empty when it cannot be read).
std::string log_tail(const std::filesystem::path& log_file, size_t lines = 20);
}  // namespace neuron_cache::compile
