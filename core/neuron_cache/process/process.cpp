#include "neuron_cache/process/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "neuron_cache/error.h"

namespace neuron_cache::process {
namespace {

// Runs in the forked child: only async-signal-safe calls (no allocation), since the parent may
// have other threads holding the malloc lock. `args` is built before fork().
[[noreturn]] void exec_child(char* const* args, int out_fd) {
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  execvp(args[0], args);
  _exit(127);
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

ProcessResult run_and_capture(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout) {
  if (argv.empty()) throw operational_error("cannot start a helper process: no program given");
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw operational_error("cannot start a helper process: " + std::string(strerror(errno)));
  }
  pid_t pid = fork();
  if (pid == 0) exec_child(args.data(), fds[1]);
  close(fds[1]);
  if (pid < 0) {
    // Without this, waitpid(-1) below would reap (and wait for) any child of the process.
    int error = errno;
    close(fds[0]);
    throw operational_error("cannot start " + argv[0] + ": " + strerror(error));
  }
  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd poll_fd{fds[0], POLLIN, 0};
    int ready = left.count() <= 0 ? 0 : poll(&poll_fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;  // a signal: poll again, never block in read()
    if (ready == 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  result.exit_code = wait_exit_code(pid);
  return result;
}

std::optional<std::string> find_on_path(const std::string& program, const std::string& path_list) {
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t colon = path_list.find(':', start);
    if (colon == std::string::npos) colon = path_list.size();
    std::string dir = path_list.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = colon + 1;
  }
  return std::nullopt;
}

namespace {

// A zombie (exited, not yet reaped by its parent) keeps its name in /proc but runs nothing.
bool is_zombie(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  std::getline(stat, text);
  size_t close = text.rfind(')');  // the name may itself contain ')' or spaces
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  char state = text[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

bool is_process_running(std::string_view name) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (dirent* entry = readdir(proc)) {
    std::string pid = entry->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm("/proc/" + pid + "/comm");
    std::string command;
    if (std::getline(comm, command) && command.find(name) != std::string::npos && !is_zombie(pid)) {
      found = true;
      break;
    }
  }
  closedir(proc);
  return found;
}

}  // namespace neuron_cache::process
