// What the set benchmarks share (prefetch-bench against the Hub, store-bench against S3 and a
// shared folder): the generated set shaped like a decoder export, measured child processes
// (measure-exec: wall time, peak RSS), the byte-for-byte check of a result, and the clean-up
// after Ctrl-C (the sets are gigabytes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::bench_support {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr const char* kCompiler = "2.21.33363.0+82129205";

double seconds_since(Clock::time_point start);
double median(std::vector<double> values);

// ---------------------------------------------------------------------------------------------
// Interruptions (Ctrl-C, kill): a thread waits for the signal, stops the measured command and
// the servers, removes the temporary files and exits 128+N.

// Blocks SIGINT/SIGTERM/SIGHUP in every thread and starts the thread that handles them; call
// first in main. `program` prefixes the message.
void handle_interruptions(const std::string& program);
void remove_when_interrupted(const fs::path& path);
void stop_when_interrupted(pid_t server);
// A process group of the benchmark's own children (fleet-bench's jobs), sent SIGTERM on an
// interruption until it is forgotten (its processes waited for).
void stop_group_when_interrupted(pid_t group);
void forget_group_when_interrupted(pid_t group);

// ---------------------------------------------------------------------------------------------
// A benchmark's command line and main.

// Sets the options of "--name value" pairs through `setters`; an unknown name, a missing value
// or a value its setter refuses (std::stoi's exceptions) goes to `usage`, which must not return.
using OptionSetters = std::map<std::string, std::function<void(const std::string&)>>;
void parse_options(int argc, char** argv, const OptionSetters& setters,
                   const std::function<void(const std::string&)>& usage);
// Setters of a number option.
std::function<void(const std::string&)> set_int(int& field);
std::function<void(const std::string&)> set_double(double& field);

// Runs `bench` in `work` (created) or in a temporary folder removed at the end or on an
// interruption; an exception is printed after `program` and exits 1.
int run_bench(const std::string& program, const std::optional<fs::path>& work,
              const std::function<int(const fs::path&)>& bench);

// ---------------------------------------------------------------------------------------------
// Child processes, measured by measure-exec.

struct Run {
  int exit_code = -1;
  double seconds = 0;
  double max_rss_mib = 0;
  double cpu_seconds = 0;  // user + system, with the children it waited for
};

// Runs `args` through measure-exec (tests/bench/measure_exec.cpp: wall time, peak RSS), with
// stdout and stderr to `output`, in an environment without the caller's HF_*/NEURON_*/AWS_*
// settings, so only what the benchmark sets reaches the tools.
Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        const fs::path& output);

// The words of the environment variable `name` (e.g. "strace -f -c -o FILE"), to put before the
// tool's command line when profiling by hand; none when it is unset.
std::vector<std::string> wrap_words(const char* name);

// The last `lines` lines of a file ("" when it cannot be read).
std::string tail_of(const fs::path& file, size_t lines);
// The first line among the last 50 of `file` that contains `part`.
std::string first_line_with(const fs::path& file, const std::string& part);

// ---------------------------------------------------------------------------------------------
// The set: a neuron-cache local cache with its local index, as `neuron-cache ci` leaves it, of
// one model's four configurations (bs1..bs8) whose keys ask nothing of the Hub.

struct Shape {
  std::string cache_repo;          // the manifest's cache_repo
  std::vector<uint64_t> large;     // the large NEFFs' sizes, one MODULE folder each
  int small_modules = 200;         // folders with a NEFF of 4 to 400 KiB
  std::string producer = "bench";  // the index entries' tool field
};

// One file of the generated set: its path in the cache (and in every store) and what it holds.
struct SetFile {
  std::string path;  // neuronxcc-<ver>/MODULE_.../model.neff
  uint64_t size = 0;
  std::string sha256;
};

struct Set {
  fs::path root;      // the local cache that is pushed
  fs::path manifest;  // the manifest naming its configurations
  std::vector<SetFile> files;
  uint64_t bytes = 0;
  uint64_t largest = 0;
  size_t modules = 0;
  size_t configurations = 0;
};

// Random bytes throughout (nothing compresses or sparses), the same for the same shape.
Set generate(const fs::path& work, const Shape& shape);

// Writes "<sha256>  <path>" of every file of the set to `file`, for `sha256sum -c` run in a
// copy of the set (the usual tools checking every byte, beside what neuron-cache does).
fs::path write_sha256sums(const Set& set, const fs::path& file);

// Every file of the set at root/<path>, same size, same sha256.
struct Check {
  size_t good = 0;
  size_t total = 0;
  std::vector<std::string> problems;  // the first five
  bool ok() const { return good == total; }
};
Check verify(const fs::path& root, const std::vector<SetFile>& files,
             const std::string& suffix = "");

// One method's run in one round.
struct Sample {
  Run run;
  Check check;
  std::string note;          // what failed (failure_detail), or what the tool said
  double requests = -1;      // requests to the store (prefetch-bench: the Hub listener); -1: n/a
  double cdn_requests = -1;  // prefetch-bench: the CDN listener
  bool ok() const { return run.exit_code == 0 && check.ok(); }
};

// One method over the rounds: the median time, the most memory and requests per file in a round.
struct Summary {
  double seconds = 0;
  double cpu_seconds = 0;  // median
  double rss = 0;
  double requests = -1;  // per file
  double cdn_requests = -1;
  size_t verified = 0;
  size_t rounds = 0;
  bool failed() const { return verified != rounds; }
};
Summary summarize(const std::vector<Sample>& samples, size_t files);

// Prints every failed sample (name, round, note); true when there was one.
bool print_failures(const std::vector<std::string>& names,
                    const std::vector<std::vector<Sample>>& samples);

// "exit code N; 3 of 5 files delivered byte for byte" with the problems and the log's tail.
std::string failure_detail(const Run& run, const Check& check, const fs::path& log);

}  // namespace neuron_cache::bench_support
