// Helpers shared by the tests: temporary folders and cache trees laid out as in the format spec.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace neuron_cache::testing {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, deleted with everything below it at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& relative) const { return path_ / relative; }

 private:
  fs::path path_;
};

void write_file(const fs::path& path, const std::string& content);
std::string read_file(const fs::path& path);

// Resident memory of this process in KiB (Linux): now (VmRSS), and its peak (VmHWM) since the
// last reset_peak_rss(), which sets the peak to what is resident now. What a call costs is the
// peak after it minus what was resident at the reset: the test's own data not counted.
long resident_kib();
long peak_resident_kib();
void reset_peak_rss();

// THE clean environment of every process a test starts: `env -i` and what keeps an AWS client on
// this machine (no request to the EC2 metadata address 169.254.169.254; tests of the credential
// sources point AWS_EC2_METADATA_SERVICE_ENDPOINT at a loopback stand-in after it: in `env`, the
// later NAME=value wins).
inline constexpr const char* kCleanEnv = "env -i AWS_EC2_METADATA_DISABLED=true";

inline constexpr const char* kCompilerDir = "neuronxcc-2.21.33363.0+82129205";

enum class Kind { Success, Failed, Locked, Empty, LegacySuccess, Traced };

// Creates <root>/<compiler_dir>/<module> with the files optimum-neuron's tests use for each state
// (success = hlo + compile_flags.json + neff + done, failed = hlo + flags + log, locked = hlo +
// model.hlo_module.pb.lock, empty = hlo only, legacy = model.hlo.pb + compile_flags.txt + neff +
// done, traced = an export folder with model.neuron and config.json). Returns the folder.
fs::path make_entry(const fs::path& root, const std::string& module, Kind kind,
                    const std::string& compiler_dir = kCompilerDir);

// Every node below `root` without following symlinks: relative path -> "file:<content>",
// "dir" or "link:<target>". Comparing two snapshots proves a folder was left untouched.
std::map<std::string, std::string> snapshot_tree(const fs::path& root);

// Runs a shell command line, returns its exit code and fills `output` with stdout+stderr.
int run_command(const std::string& command_line, std::string* output = nullptr);
// Starts args[0] (a path) with stdout and stderr into `log`, for the servers tests run (the test
// Hub, s3rver, the AWS stand-ins); throws naming the program when it cannot start.
pid_t spawn_logged(std::vector<std::string> args, const fs::path& log);

// What a command printed (stdout and stderr) and its exit code.
struct ToolRun {
  int code;
  std::string output;
};

// Whether `text` contains `part` (for checking command output).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Calls of the stat family (fstat, newfstatat, statx, ...) in an `strace -c` summary, and whether
// strace can trace here (it needs ptrace, which some containers refuse).
size_t stat_calls(const std::string& strace_summary);
bool strace_works();

// The neuron-cache binary built with the tests.
std::string tool_path();

}  // namespace neuron_cache::testing
