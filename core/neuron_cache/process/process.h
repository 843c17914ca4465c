// Running helper programs (neuronx-cc --version) and looking for running compilers, without a
// shell: arguments are passed as a vector and never interpreted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
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

// How to start a child: no shell, stdin /dev/null, stdout and stderr to one descriptor, signal
// dispositions and mask reset, and (glibc 2.34+) no descriptor of ours but those three.
struct SpawnRequest {
  std::string program;  // a path; with search_path, a name looked up in our PATH as execvp does
  bool search_path = false;
  std::vector<std::string> argv;
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; nothing: ours
  int output_fd = -1;
  int error_fd = -1;  // stderr's descriptor; -1: output_fd
  std::optional<std::filesystem::path> working_dir;
};

// Starts the child with posix_spawn (no fork of a threaded process); its pid, or the errno that
// prevented the start as a negative number.
pid_t spawn(const SpawnRequest& request);
// Waits for `pid` (retrying on EINTR); its raw wait status.
int wait_status(pid_t pid);

// Runs argv[0] (found through PATH), captures its output, kills it after `timeout`.
ProcessResult run_and_capture(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout);

// Runs argv[0] (found through PATH) for what it prints on stdout (stderr is dropped: a
// credential helper may print secrets there), killed after `timeout` or once it printed more
// than `max_output` bytes (then timed_out stays false and the output is cut to max_output + 1).
ProcessResult run_for_stdout(const std::vector<std::string>& argv,
                             std::chrono::milliseconds timeout, size_t max_output);

// The first executable `program` in the ':'-separated `path_list`.
std::optional<std::string> find_on_path(const std::string& program, const std::string& path_list);

// Like `pgrep NAME`: whether a process whose command name contains `name` runs.
bool is_process_running(std::string_view name);

}  // namespace neuron_cache::process
