#include "neuron_cache/compile/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/process/process.h"
#include "neuron_cache/sys/safe_dir.h"

extern char** environ;

namespace neuron_cache::compile {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr size_t kTailBytes = 256 << 10;

struct ChildEnv {
  std::vector<std::string> entries;  // "NAME=value"
  std::string path = kDefaultPath;   // the child's PATH, for finding argv[0]
};

ChildEnv child_environment(const CommandRun& run) {
  ChildEnv env;
  for (char** item = environ; item != nullptr && *item != nullptr; ++item) {
    std::string entry = *item;
    std::string name = entry.substr(0, entry.find('='));
    bool replaced =
        run.set_env.count(name) > 0 ||
        std::find(run.unset_env.begin(), run.unset_env.end(), name) != run.unset_env.end();
    if (replaced) continue;
    if (name == "PATH") env.path = entry.substr(5);
    env.entries.push_back(std::move(entry));
  }
  for (const auto& [name, value] : run.set_env) {
    if (name == "PATH") env.path = value;
    env.entries.push_back(name + "=" + value);
  }
  return env;
}

// Where argv[0] is: a name with a '/' is used as given (relative to the working directory).
std::optional<std::string> resolve_program(const std::string& program, const ChildEnv& env) {
  if (program.find('/') != std::string::npos) return program;
  return process::find_on_path(program, env.path);
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk or a closed stdout must not stop the command
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// The secrets the tool knows, and the value of every variable of the child's environment named
// like a secret (config::is_secret_name), inherited or set for this run: what the child prints of
// them must not reach the log or our stdout.
config::Redactor redactor_for(const ChildEnv& env) {
  config::Redactor known = config::known_secrets();
  std::vector<std::string> secrets = known.secrets();
  std::map<std::string, std::string> labels = known.labels();
  for (const auto& entry : env.entries) {
    size_t equals = entry.find('=');
    if (equals != std::string::npos && config::is_secret_name(entry.substr(0, equals))) {
      secrets.push_back(entry.substr(equals + 1));
      labels.emplace(secrets.back(), config::label_of_variable(entry.substr(0, equals)));
    }
  }
  return config::Redactor(std::move(secrets), std::move(labels));
}

using Clock = std::chrono::steady_clock;

// run.heartbeat every run.heartbeat_every since the command started.
class Heartbeat {
 public:
  Heartbeat(const CommandRun& run, Clock::time_point start)
      : run_(run), start_(start), next_(start + run.heartbeat_every) {}

  // Calls the heartbeat when one is due; checked at least every poll timeout.
  void beat_if_due() {
    if (!run_.heartbeat || run_.heartbeat_every <= Clock::duration::zero()) return;
    Clock::time_point now = Clock::now();
    if (now < next_) return;
    run_.heartbeat(std::chrono::duration<double>(now - start_).count());
    while (next_ <= now) next_ += run_.heartbeat_every;
  }

 private:
  const CommandRun& run_;
  Clock::time_point start_;
  Clock::time_point next_;
};

// Copies the child's output, redacted, to the log (and our stdout when teeing) until it exits.
// A grandchild that keeps the pipe open (a daemon) must not hang us, so the child's exit also
// ends the copy.
int copy_output_until_exit(pid_t pid, int read_fd, int log_fd, const CommandRun& run,
                           const ChildEnv& env, Heartbeat& heartbeat) {
  char buffer[65536];
  config::StreamRedactor redactor(redactor_for(env));
  auto write_out = [&](const std::string& text) {
    write_all(log_fd, text.data(), text.size());
    if (run.tee) write_all(STDOUT_FILENO, text.data(), text.size());
  };
  auto copy = [&](ssize_t n) {
    write_out(redactor.feed(std::string_view(buffer, static_cast<size_t>(n))));
  };
  while (true) {
    heartbeat.beat_if_due();
    pollfd poll_fd{read_fd, POLLIN, 0};
    int ready = poll(&poll_fd, 1, 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      ssize_t n = read(read_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        copy(n);
        continue;
      }
      write_out(redactor.finish());
      return process::wait_status(pid);  // end of output
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      fcntl(read_fd, F_SETFL, fcntl(read_fd, F_GETFL) | O_NONBLOCK);
      ssize_t n = 0;
      while ((n = read(read_fd, buffer, sizeof buffer)) > 0) copy(n);
      write_out(redactor.finish());
      return status;
    }
  }
}

void fill_exit(RunOutcome& outcome, int status) {
  if (WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    outcome.signal = WTERMSIG(status);
  }
}

std::string start_failure(const std::string& program, int error) {
  std::string message = "cannot run " + program + ": " + std::strerror(error);
  if (error == EACCES) message += " (is it an executable file?)";
  if (error == ENOENT) message += " (check the program path and the working directory)";
  return message;
}

}  // namespace

RunOutcome run_command(const CommandRun& run) {
  RunOutcome outcome;
  if (run.argv.empty() || run.argv[0].empty()) {
    outcome.start_error = "no command given: nothing to run";
    return outcome;
  }
  ChildEnv env = child_environment(run);
  auto program = resolve_program(run.argv[0], env);
  if (!program) {
    outcome.start_error = "cannot run " + run.argv[0] + ": not found in the PATH of the command (" +
                          env.path + "); install it or give its full path";
    return outcome;
  }
  int log = ::open(run.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) {
    outcome.start_error =
        "cannot create the log file " + run.log_file.string() + ": " + std::strerror(errno);
    return outcome;
  }
  sys::UniqueFd log_fd(log);
  // Always through a pipe, never straight to the log: the output is redacted on its way.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    outcome.start_error = "cannot start " + run.argv[0] + ": " + std::strerror(errno);
    return outcome;
  }
  sys::UniqueFd read_end(fds[0]);
  sys::UniqueFd write_end(fds[1]);
  auto start = Clock::now();
  pid_t pid = process::spawn(
      {*program, false, run.argv, env.entries, write_end.get(), -1, run.working_dir});
  if (pid < 0) {
    outcome.start_error = start_failure(*program, -pid);
    return outcome;
  }
  outcome.started = true;
  write_end = sys::UniqueFd();  // only the child writes now: its exit closes the pipe
  Heartbeat heartbeat(run, start);
  int status = copy_output_until_exit(pid, read_end.get(), log_fd.get(), run, env, heartbeat);
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fill_exit(outcome, status);
  return outcome;
}

std::string log_tail(const fs::path& log_file, size_t lines) {
  int fd = ::open(log_file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  sys::UniqueFd guard(fd);
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return "";
  off_t size = info.st_size;
  off_t from = size > static_cast<off_t>(kTailBytes) ? size - static_cast<off_t>(kTailBytes) : 0;
  std::string text(static_cast<size_t>(size - from), '\0');
  ssize_t n = pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (lines == 0 || text.empty()) return "";
  // Count newlines back from the end; the final newline ends the last line, it starts none.
  size_t end = text.back() == '\n' ? text.size() - 1 : text.size();
  size_t begin = end;
  for (size_t found = 0; begin > 0; --begin) {
    if (text[begin - 1] == '\n' && ++found == lines) break;
  }
  // The log was redacted as it was written; a log another tool wrote may not be.
  return config::redact(text.substr(begin));
}

}  // namespace neuron_cache::compile
