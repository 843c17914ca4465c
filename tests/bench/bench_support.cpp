#include "bench_support.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/plan/targets.h"
#include "test_support.h"

extern char** environ;

namespace neuron_cache::bench_support {
namespace {

namespace ai = artifact_index;

constexpr const char* kModel = "acme/decoder-bench";
constexpr const char* kRevision = "4b1d5e7a9c0f2e3d6b8a1c4e7f9a2b5c8d0e3f61";

struct Interruption {
  std::mutex mutex;
  pid_t child_group = -1;  // measure-exec and the command it runs, in their own process group
  std::vector<pid_t> servers;
  std::vector<pid_t> groups;  // stop_group_when_interrupted's
  std::vector<fs::path> temporary;
};
Interruption interruption;

}  // namespace

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// ---------------------------------------------------------------------------------------------
// Interruptions.

void handle_interruptions(const std::string& program) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed pipe (`| head`) must not leave a server running
  std::thread([signals, program] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::lock_guard lock(interruption.mutex);
    if (interruption.child_group > 0) kill(-interruption.child_group, SIGTERM);
    for (pid_t group : interruption.groups) kill(-group, SIGTERM);
    for (pid_t server : interruption.servers) kill(server, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let them close their files
    std::error_code ignored;
    for (const auto& path : interruption.temporary) fs::remove_all(path, ignored);
    std::fprintf(stderr, "\n%s: interrupted by signal %d\n", program.c_str(), signal_number);
    _exit(128 + signal_number);
  }).detach();
}

void remove_when_interrupted(const fs::path& path) {
  std::lock_guard lock(interruption.mutex);
  interruption.temporary.push_back(path);
}

void stop_when_interrupted(pid_t server) {
  std::lock_guard lock(interruption.mutex);
  interruption.servers.push_back(server);
}

void stop_group_when_interrupted(pid_t group) {
  std::lock_guard lock(interruption.mutex);
  interruption.groups.push_back(group);
}

void forget_group_when_interrupted(pid_t group) {
  std::lock_guard lock(interruption.mutex);
  auto& groups = interruption.groups;
  groups.erase(std::remove(groups.begin(), groups.end(), group), groups.end());
}

void parse_options(int argc, char** argv, const OptionSetters& setters,
                   const std::function<void(const std::string&)>& usage) {
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    auto setter = setters.find(name);
    if (setter == setters.end()) usage("unknown option " + name);
    if (i + 1 >= argc) usage("missing value after " + name);
    std::string value = argv[++i];
    try {
      setter->second(value);
    } catch (const std::logic_error&) {  // std::stoi/stod: not a number, out of range
      usage("bad value for " + name + ": " + value);
    }
  }
}

std::function<void(const std::string&)> set_int(int& field) {
  return [&field](const std::string& value) { field = std::stoi(value); };
}

std::function<void(const std::string&)> set_double(double& field) {
  return [&field](const std::string& value) { field = std::stod(value); };
}

int run_bench(const std::string& program, const std::optional<fs::path>& work,
              const std::function<int(const fs::path&)>& bench) {
  try {
    if (work) {
      fs::create_directories(*work);
      return bench(*work);
    }
    testing::TempDir temporary;
    remove_when_interrupted(temporary.path());
    return bench(temporary.path());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
    return 1;
  }
}

// ---------------------------------------------------------------------------------------------
// Child processes.

namespace {

std::vector<std::string> clean_environment(const std::map<std::string, std::string>& env) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string item = *e;
    std::string name = item.substr(0, item.find('='));
    bool settings = name.starts_with("HF_") || name.starts_with("HUGGING") ||
                    name.starts_with("NEURON_") || name.starts_with("AWS_") ||
                    name == "CUSTOM_CACHE_REPO" || name == "XDG_CACHE_HOME";
    if (!settings) environment.push_back(item);
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  return environment;
}

// Starts argv with stdout and stderr to `output`, in its own process group (an interruption
// stops it and what it runs), with the signals we block or ignore back to normal.
pid_t spawn(std::vector<std::string>& command, std::vector<std::string>& environment,
            const fs::path& output) {
  std::vector<char*> envp, argv;
  for (auto& item : environment) envp.push_back(item.data());
  envp.push_back(nullptr);
  for (auto& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, broken_pipe;
  sigemptyset(&none);
  sigemptyset(&broken_pipe);
  sigaddset(&broken_pipe, SIGPIPE);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &broken_pipe);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  std::unique_lock lock(interruption.mutex);
  int error = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw std::runtime_error(std::string("cannot start ") + argv[0] + ": " + std::strerror(error));
  }
  interruption.child_group = pid;
  return pid;
}

}  // namespace

Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        const fs::path& output) {
  std::vector<std::string> environment = clean_environment(env);
  fs::path result_file = output;
  result_file += ".measured";
  std::vector<std::string> command = {MEASURE_EXEC, result_file.string()};
  command.insert(command.end(), args.begin(), args.end());
  pid_t pid = spawn(command, environment, output);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed for " + args[0]);
  }
  {
    std::lock_guard done(interruption.mutex);
    interruption.child_group = -1;
  }
  Run result;
  long max_rss_kib = 0;
  std::ifstream in(result_file);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      !(in >> result.seconds >> max_rss_kib >> result.exit_code >> result.cpu_seconds)) {
    throw std::runtime_error("could not run " + args[0] + ":\n" + testing::read_file(output));
  }
  result.max_rss_mib = static_cast<double>(max_rss_kib) / 1024.0;
  return result;
}

std::vector<std::string> wrap_words(const char* name) {
  std::vector<std::string> words;
  const char* wrap = std::getenv(name);
  std::istringstream in(wrap ? wrap : "");
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::string tail_of(const fs::path& file, size_t lines) {
  std::string text;
  try {
    text = testing::read_file(file);
  } catch (const std::exception&) {
    return "";
  }
  size_t pos = text.size();
  for (size_t n = 0; n <= lines && pos != std::string::npos && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

std::string first_line_with(const fs::path& file, const std::string& part) {
  std::istringstream in(tail_of(file, 50));
  for (std::string line; std::getline(in, line);) {
    if (line.find(part) != std::string::npos) return line;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// The set.

namespace {

void write_random(const fs::path& path, uint64_t size, std::mt19937_64& random) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB
  while (size > 0) {
    for (auto& word : block) word = random();
    uint64_t n = std::min<uint64_t>(size, block.size() * sizeof(uint64_t));
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    size -= n;
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

// A size drawn log-uniformly in [low, high]: many small files, a few larger ones.
uint64_t log_uniform(std::mt19937_64& random, double low, double high) {
  std::uniform_real_distribution<double> d(std::log(low), std::log(high));
  return static_cast<uint64_t>(std::exp(d(random)));
}

std::string hex_id(std::mt19937_64& random, size_t digits) {
  static const char* hex = "0123456789abcdef";
  std::string id;
  for (size_t i = 0; i < digits; ++i) id += hex[random() % 16];
  return id;
}

std::string manifest_text(const std::string& cache_repo) {
  std::ostringstream text;
  text << "cache_repo: " << cache_repo << "\n"
       << "compiler_version: " << kCompiler << "\n"
       << "optimum_neuron_version: 0.4.5\n"
       << "instance_type: trn1\n"
       << "models:\n"
       << "  - model_id: " << kModel << "\n"
       << "    revision: " << kRevision << "\n"
       << "    model_type: llama\n"
       << "    task: text-generation\n"
       << "    configurations:\n";
  for (int batch : {1, 2, 4, 8}) {
    text << "      - {name: bs" << batch << ", batch_size: " << batch
         << ", sequence_length: 4096, num_cores: 8, precision: bf16}\n";
  }
  return text.str();
}

// One index entry per configuration of the manifest, with no modules yet.
std::vector<ai::Entry> empty_entries(const Set& set, const fs::path& work,
                                     const std::string& producer) {
  // The keys as the tool computes them (pinned revision and model type: nothing asks the Hub).
  manifest::Manifest manifest = manifest::load_manifest(set.manifest);
  plan::ModelResolver resolver(nullptr, work);
  plan::KeyContext context{kCompiler, {}, manifest.optimum_neuron_version};
  std::vector<ai::Entry> entries;
  for (const auto& t : plan::make_targets(manifest, context, resolver)) {
    entries.push_back(
        {t.key, t.inputs, t.configuration.name, {}, {}, 1800.0, producer, ai::utc_now(), {}});
  }
  return entries;
}

}  // namespace

Set generate(const fs::path& work, const Shape& shape) {
  Set set;
  set.root = work / "source-cache";
  fs::remove_all(set.root);  // a --work folder used before: nothing extra for cp -r to copy
  set.manifest = work / "neuron-cache.yaml";
  testing::write_file(set.manifest, manifest_text(shape.cache_repo));
  std::vector<ai::Entry> entries = empty_entries(set, work, shape.producer);
  set.configurations = entries.size();

  // Module sizes: the large NEFFs first, then the small.
  std::vector<uint64_t> neffs = shape.large;
  std::mt19937_64 random(9);
  for (int i = 0; i < shape.small_modules; ++i)
    neffs.push_back(log_uniform(random, 4 << 10, 400 << 10));

  local::LocalCache cache(set.root);
  local::LocalIndex index(cache);
  std::string flags =
      compile_flags_json({"--model-type=transformer", "--auto-cast=none", "--target=trn1",
                          "--enable-fast-loading-neuron-binaries"});
  std::string compiler_dir = entries.front().compiler_dir();
  for (size_t m = 0; m < neffs.size(); ++m) {
    std::string name = "MODULE_" + hex_id(random, 20) + "+" + flags_key(flags);
    fs::path dir = set.root / compiler_dir / name;
    uint64_t hlo = m < shape.large.size() ? log_uniform(random, 256 << 10, 2 << 20)
                                          : log_uniform(random, 1 << 10, 64 << 10);
    write_random(dir / "model.hlo_module.pb", hlo, random);
    testing::write_file(dir / "compile_flags.json", flags);
    write_random(dir / "model.neff", neffs[m], random);
    testing::write_file(dir / "model.done", "");
    ai::ModuleRecord record = index.record_module(compiler_dir, name);
    for (const auto& f : record.files) {
      set.files.push_back({compiler_dir + "/" + name + "/" + f.name, f.size, f.sha256});
      set.bytes += f.size;
      set.largest = std::max(set.largest, f.size);
    }
    // The large modules spread over the configurations, as do the small ones.
    entries[m % entries.size()].modules.push_back(std::move(record));
  }
  set.modules = neffs.size();
  for (const auto& entry : entries) index.write(entry);
  return set;
}

Check verify(const fs::path& root, const std::vector<SetFile>& files, const std::string& suffix) {
  Check check;
  check.total = files.size();
  for (const auto& f : files) {
    fs::path path = root / (f.path + suffix);
    std::error_code error;
    uint64_t size = fs::file_size(path, error);  // follows symlinks (the HF cache's blobs)
    std::string problem;
    if (error) {
      problem = "missing";
    } else if (size != f.size) {
      problem = std::to_string(size) + " bytes instead of " + std::to_string(f.size);
    } else if (sha256_of_file(path) != f.sha256) {
      problem = "different content (sha256)";
    }
    if (problem.empty()) {
      ++check.good;
    } else if (check.problems.size() < 5) {
      check.problems.push_back(f.path + ": " + problem);
    }
  }
  return check;
}

std::string failure_detail(const Run& run, const Check& check, const fs::path& log) {
  std::string detail =
      run.exit_code != 0 ? "exit code " + std::to_string(run.exit_code) + "; " : "";
  detail += std::to_string(check.good) + " of " + std::to_string(check.total) +
            " files delivered byte for byte";
  for (const auto& p : check.problems) detail += "\n      " + p;
  detail += "\n    its output (" + log.string() + "), last lines:\n" + tail_of(log, 8);
  return detail;
}

fs::path write_sha256sums(const Set& set, const fs::path& file) {
  std::string text;
  for (const auto& f : set.files) text += f.sha256 + "  " + f.path + "\n";
  testing::write_file(file, text);
  return file;
}

Summary summarize(const std::vector<Sample>& samples, size_t files) {
  Summary summary;
  std::vector<double> times, cpu;
  for (const auto& s : samples) {
    times.push_back(s.run.seconds);
    cpu.push_back(s.run.cpu_seconds);
    summary.verified += s.ok() ? 1 : 0;
    summary.rss = std::max(summary.rss, s.run.max_rss_mib);
    if (s.requests >= 0) summary.requests = std::max(summary.requests, s.requests / files);
    if (s.cdn_requests >= 0) {
      summary.cdn_requests = std::max(summary.cdn_requests, s.cdn_requests / files);
    }
  }
  summary.rounds = samples.size();
  summary.seconds = median(times);
  summary.cpu_seconds = median(cpu);
  return summary;
}

bool print_failures(const std::vector<std::string>& names,
                    const std::vector<std::vector<Sample>>& samples) {
  bool any = false;
  for (size_t m = 0; m < samples.size(); ++m) {
    for (size_t r = 0; r < samples[m].size(); ++r) {
      if (samples[m][r].ok()) continue;
      any = true;
      std::printf("\nFAILED: %s, round %zu: %s\n", names[m].c_str(), r + 1,
                  samples[m][r].note.c_str());
    }
  }
  if (any) {
    std::printf(
        "\n*** FAILED: at least one method did not deliver every file byte for byte; its "
        "timings measure a failing run. ***\n");
  }
  return any;
}

}  // namespace neuron_cache::bench_support
