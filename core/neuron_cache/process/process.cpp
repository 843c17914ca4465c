#include "neuron_cache/process/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "neuron_cache/error.h"

extern char** environ;

namespace neuron_cache::process {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// posix_spawn's attributes and file actions, released however the start ends.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr_, &all);
    posix_spawnattr_setsigmask(&attr_, &none);
    posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  void redirect(int output_fd, int error_fd,
                const std::optional<std::filesystem::path>& working_dir) {
    posix_spawn_file_actions_addopen(&actions_, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions_, output_fd, STDOUT_FILENO);
    if (error_fd >= 0) {
      posix_spawn_file_actions_adddup2(&actions_, error_fd, STDERR_FILENO);
    } else {
      posix_spawn_file_actions_adddup2(&actions_, output_fd, STDERR_FILENO);
    }
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
    // Descriptors another thread opened without O_CLOEXEC must not leak into the child.
    posix_spawn_file_actions_addclosefrom_np(&actions_, STDERR_FILENO + 1);
#endif
    if (working_dir) posix_spawn_file_actions_addchdir_np(&actions_, working_dir->c_str());
  }

  int start(pid_t* pid, const SpawnRequest& request) {
    auto args = c_strings(request.argv);
    std::vector<char*> envp = request.env ? c_strings(*request.env) : std::vector<char*>{};
    char** env = request.env ? envp.data() : environ;
    return request.search_path
               ? posix_spawnp(pid, request.program.c_str(), &actions_, &attr_, args.data(), env)
               : posix_spawn(pid, request.program.c_str(), &actions_, &attr_, args.data(), env);
  }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

}  // namespace

pid_t spawn(const SpawnRequest& request) {
  SpawnSetup setup;
  setup.redirect(request.output_fd, request.error_fd, request.working_dir);
  pid_t pid = 0;
  int error = setup.start(&pid, request);
  return error == 0 ? pid : -error;
}

int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

namespace {

// Runs argv with stdout (and stderr, unless `error_fd` names another descriptor) into a pipe
// read until EOF, `timeout` or `max_output` bytes.
ProcessResult capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                      size_t max_output, int error_fd) {
  if (argv.empty()) throw operational_error("cannot start a helper process: no program given");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw operational_error("cannot start a helper process: " + std::string(strerror(errno)));
  }
  SpawnRequest request{argv[0], true, argv, std::nullopt, fds[1], error_fd, std::nullopt};
  pid_t pid = spawn(request);
  close(fds[1]);
  if (pid < 0) {
    // Without this, waitpid(-1) below would reap (and wait for) any child of the process.
    close(fds[0]);
    // What a shell (and execvp in a forked child) reports for a program it cannot run.
    if (-pid == ENOENT || -pid == EACCES) return {127, false, ""};
    throw operational_error("cannot start " + argv[0] + ": " + strerror(-pid));
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
    if (result.output.size() > max_output) {
      result.output.resize(max_output + 1);
      kill(pid, SIGKILL);
      break;
    }
  }
  close(fds[0]);
  int status = wait_status(pid);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

ProcessResult run_and_capture(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout) {
  return capture(argv, timeout, std::numeric_limits<size_t>::max() - 1, -1);
}

ProcessResult run_for_stdout(const std::vector<std::string>& argv,
                             std::chrono::milliseconds timeout, size_t max_output) {
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) throw operational_error("cannot open /dev/null: " + std::string(strerror(errno)));
  try {
    ProcessResult result = capture(argv, timeout, max_output, null);
    close(null);
    return result;
  } catch (...) {
    close(null);
    throw;
  }
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
