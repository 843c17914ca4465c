// prefetch-bench: `neuron-cache prefetch` beside what a user would pick instead (issue 9, section
// 2). Generates a cache shaped like a real decoder export, pushes it with `neuron-cache push` to
// the project's Hub server (hub and CDN listeners on loopback), then times, interleaved in each
// round: A `neuron-cache prefetch` into an empty cache, B `curl --parallel` from the final URLs,
// C `cp -r` of the cache folder, D the official client's snapshotDownload into an empty HF cache.
// Every result is checked byte for byte (sha256 of every file) against the generated set; a
// method that did not deliver every file is reported FAILED and the exit code is 1.
//
//   prefetch-bench --node NODE --js-dir DIR [--scale S] [--rounds N] [--small-modules N]
//                  [--work DIR] [--curl CURL] [--tool NEURON_CACHE]
//
// Normally run through tests/bench/prefetch-bench.sh, which builds it and installs the official
// client (npm ci) into DIR. The set at --scale 1: one MODULE folder with a 1 GiB model.neff, eight
// with a 100 MiB one, and --small-modules (200) small folders (NEFFs of 4 KiB to 400 KiB); SCALE
// multiplies the nine large NEFFs only. Random bytes throughout, so nothing compresses or sparses.
// Wall time and peak RSS of each process come from measure-exec (tests/bench/measure_exec.cpp).
#include <fcntl.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/plan/targets.h"
#include "test_support.h"

extern char** environ;

namespace {

using namespace neuron_cache;
using nlohmann::json;
namespace ai = artifact_index;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kCompiler = "2.21.33363.0+82129205";
constexpr const char* kRepo = "acme/prefetch-bench";
constexpr const char* kModel = "acme/decoder-bench";
constexpr const char* kRevision = "4b1d5e7a9c0f2e3d6b8a1c4e7f9a2b5c8d0e3f61";
constexpr double kMiB = 1024.0 * 1024.0;

struct Options {
  double scale = 1.0;
  int rounds = 3;
  int small_modules = 200;
  std::string node;
  fs::path js_dir;
  std::optional<fs::path> work;
  std::string curl = "curl";
  std::string tool = NEURON_CACHE_TOOL;
};

// One file of the generated set: its path in the cache (and in the repo) and what it must hold.
struct SetFile {
  std::string path;  // neuronxcc-<ver>/MODULE_.../model.neff
  uint64_t size = 0;
  std::string sha256;
};

struct Set {
  fs::path root;      // the local cache that was pushed
  fs::path manifest;  // the manifest naming its configurations
  std::vector<SetFile> files;
  uint64_t bytes = 0;
  uint64_t largest = 0;
  size_t modules = 0;
  size_t configurations = 0;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "prefetch-bench: " << why
            << "\nusage: prefetch-bench --node NODE --js-dir DIR [--scale S] [--rounds N] "
               "[--small-modules N] [--work DIR] [--curl CURL] [--tool NEURON_CACHE]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) usage("missing value after " + arg);
    std::string value = argv[++i];
    if (arg == "--scale") {
      o.scale = std::stod(value);
    } else if (arg == "--rounds") {
      o.rounds = std::stoi(value);
    } else if (arg == "--small-modules") {
      o.small_modules = std::stoi(value);
    } else if (arg == "--node") {
      o.node = value;
    } else if (arg == "--js-dir") {
      o.js_dir = value;
    } else if (arg == "--work") {
      o.work = value;
    } else if (arg == "--curl") {
      o.curl = value;
    } else if (arg == "--tool") {
      o.tool = value;
    } else {
      usage("unknown option " + arg);
    }
  }
  if (!(o.scale > 0) || o.rounds < 1 || o.small_modules < 0) usage("bad --scale/--rounds");
  if (o.node.empty() || o.js_dir.empty()) usage("--node and --js-dir are required");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Interruptions (Ctrl-C, kill): a thread waits for the signal, stops the measured command and
// the Hub server, removes the temporary files (gigabytes at SCALE=1) and exits 128+N.

struct Interruption {
  std::mutex mutex;
  pid_t child_group = -1;  // measure-exec and the command it runs, in their own process group
  pid_t server = -1;
  std::vector<fs::path> temporary;
};
Interruption interruption;

void handle_interruptions(const sigset_t& signals) {
  std::thread([signals] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::lock_guard lock(interruption.mutex);
    if (interruption.child_group > 0) kill(-interruption.child_group, SIGTERM);
    if (interruption.server > 0) kill(interruption.server, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let them close their files
    std::error_code ignored;
    for (const auto& path : interruption.temporary) fs::remove_all(path, ignored);
    std::fprintf(stderr, "\nprefetch-bench: interrupted by signal %d\n", signal_number);
    _exit(128 + signal_number);
  }).detach();
}

// ---------------------------------------------------------------------------------------------
// Child processes, measured by measure-exec.

struct Run {
  int exit_code = -1;
  double seconds = 0;
  double max_rss_mib = 0;
};

// Runs `args` through measure-exec (tests/bench/measure_exec.cpp: wall time, peak RSS), with
// stdout and stderr to `output`, in an environment without the caller's HF_*/NEURON_* settings,
// so only what the benchmark sets reaches the tools.
Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        const fs::path& output) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string item = *e;
    std::string name = item.substr(0, item.find('='));
    bool settings = name.starts_with("HF_") || name.starts_with("HUGGING") ||
                    name.starts_with("NEURON_") || name == "CUSTOM_CACHE_REPO" ||
                    name == "XDG_CACHE_HOME";
    if (!settings) environment.push_back(item);
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  fs::path result_file = output;
  result_file += ".measured";
  std::vector<std::string> command = {MEASURE_EXEC, result_file.string()};
  command.insert(command.end(), args.begin(), args.end());
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
  // Its own process group (an interruption stops it and what it runs), with the signals we
  // block or ignore back to normal.
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
  if (error == 0) interruption.child_group = pid;
  lock.unlock();
  if (error != 0) {
    throw std::runtime_error(std::string("cannot start ") + MEASURE_EXEC + ": " +
                             std::strerror(error));
  }
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
      !(in >> result.seconds >> max_rss_kib >> result.exit_code)) {
    throw std::runtime_error("could not run " + args[0] + ":\n" + testing::read_file(output));
  }
  result.max_rss_mib = static_cast<double>(max_rss_kib) / 1024.0;
  return result;
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

// ---------------------------------------------------------------------------------------------
// The set: a neuron-cache local cache with its local index, as `neuron-cache ci` leaves it.

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

std::string manifest_text() {
  std::ostringstream text;
  text << "cache_repo: " << kRepo << "\n"
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

Set generate(const fs::path& work, const Options& o) {
  Set set;
  set.root = work / "source-cache";
  fs::remove_all(set.root);  // a --work folder used before: nothing extra for cp -r to copy
  set.manifest = work / "neuron-cache.yaml";
  testing::write_file(set.manifest, manifest_text());
  // The keys as the tool computes them (pinned revision and model type: nothing asks the Hub).
  manifest::Manifest manifest = manifest::load_manifest(set.manifest);
  plan::ModelResolver resolver(nullptr, work);
  plan::KeyContext context{kCompiler, {}, manifest.optimum_neuron_version};
  std::vector<plan::Target> targets = plan::make_targets(manifest, context, resolver);
  set.configurations = targets.size();

  // Module sizes: the nine large NEFFs first (1 GiB, 8 x 100 MiB, times SCALE), then the small.
  std::vector<uint64_t> neffs;
  neffs.push_back(static_cast<uint64_t>(std::llround(o.scale * 1024 * kMiB)));
  for (int i = 0; i < 8; ++i)
    neffs.push_back(static_cast<uint64_t>(std::llround(o.scale * 100 * kMiB)));
  std::mt19937_64 random(9);
  for (int i = 0; i < o.small_modules; ++i)
    neffs.push_back(log_uniform(random, 4 << 10, 400 << 10));

  local::LocalCache cache(set.root);
  local::LocalIndex index(cache);
  std::vector<ai::Entry> entries;
  for (const auto& t : targets) {
    entries.push_back(
        {t.key, t.inputs, t.configuration.name, {}, {}, 1800.0, "prefetch-bench", ai::utc_now()});
  }
  std::string flags =
      compile_flags_json({"--model-type=transformer", "--auto-cast=none", "--target=trn1",
                          "--enable-fast-loading-neuron-binaries"});
  std::string compiler_dir = entries.front().compiler_dir();
  for (size_t m = 0; m < neffs.size(); ++m) {
    std::string name = "MODULE_" + hex_id(random, 20) + "+" + flags_key(flags);
    fs::path dir = set.root / compiler_dir / name;
    uint64_t hlo =
        m < 9 ? log_uniform(random, 256 << 10, 2 << 20) : log_uniform(random, 1 << 10, 64 << 10);
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

// ---------------------------------------------------------------------------------------------
// Checking a result: every file of the set at root/<path>, same size, same sha256.

struct Check {
  size_t good = 0;
  size_t total = 0;
  std::vector<std::string> problems;
  bool ok() const { return good == total; }
};

Check verify(const fs::path& root, const std::vector<SetFile>& files) {
  Check check;
  check.total = files.size();
  for (const auto& f : files) {
    fs::path path = root / f.path;
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

// ---------------------------------------------------------------------------------------------
// The four methods.

// DurableCopy is cp -r followed by syncfs: the disk's ceiling for a copy that survives a power
// cut, which is what prefetch delivers (the others leave their bytes in the page cache).
enum Method { Prefetch, Curl, Copy, DurableCopy, Snapshot, kMethods };
const char* kNames[kMethods] = {"neuron-cache prefetch", "curl --parallel (8)", "cp -r",
                                "cp -r + sync -f", "snapshotDownload (JS)"};

struct Sample {
  Run run;
  size_t hub_requests = 0;
  size_t cdn_requests = 0;
  Check check;
  std::string note;  // what failed, for the report
};

class Bench {
 public:
  Bench(const Options& o, const fs::path& work, const Set& set, const testing::HubServer& server)
      : o_(o), work_(work), set_(set), server_(server) {}

  static std::vector<std::string> wrap_words() {
    std::vector<std::string> words;
    const char* wrap = std::getenv("PREFETCH_BENCH_WRAP");
    std::istringstream in(wrap ? wrap : "");
    for (std::string word; in >> word;) words.push_back(word);
    return words;
  }

  Sample measure(Method method, int round) {
    fs::path out = work_ / ("round-" + std::to_string(round)) / ("out-" + std::to_string(method));
    fs::path log = work_ / ("round-" + std::to_string(round)) / ("log-" + std::to_string(method));
    fs::remove_all(out);
    fs::create_directories(out.parent_path());
    std::vector<std::string> args;
    std::map<std::string, std::string> env = {{"HOME", (work_ / "home").string()}};
    fs::path result_root = out;
    switch (method) {
      case Prefetch:
        fs::create_directories(out);
        args = wrap_words();  // PREFETCH_BENCH_WRAP="strace -f -c -o FILE": profile by hand
        args.insert(args.end(),
                    {o_.tool, "prefetch", set_.manifest.string(), "--cache-dir", out.string()});
        env["HF_ENDPOINT"] = server_.url();
        env["HF_TOKEN"] = testing::kHubReadToken;
        env["HF_HOME"] = (work_ / ("hf-home-prefetch-" + std::to_string(round))).string();
        break;
      case Curl:
        args = {
            o_.curl,    "--parallel",   "--parallel-max", "8",        "--fail",
            "--silent", "--show-error", "--create-dirs",  "--config", curl_config(out).string()};
        break;
      case Copy:
        args = {"cp", "-r", set_.root.string(), out.string()};
        break;
      case DurableCopy:
        args = {"/bin/sh", "-c", "cp -r \"$0\" \"$1\" && sync -f \"$1\"", set_.root.string(),
                out.string()};
        break;
      case Snapshot:
        args = {o_.node, (o_.js_dir / "snapshot-download.mjs").string(), server_.url(), kRepo,
                out.string()};
        env["HF_TOKEN"] = testing::kHubReadToken;
        break;
      default:
        break;
    }
    // Nothing dirty left by the previous method: its writeback must not land on this one.
    ::sync();
    server_.clear_log();
    Sample sample;
    sample.run = run(args, env, log);
    json access = server_.access_log();
    sample.hub_requests = testing::count_requests(
        access, [](const json& e) { return e.value("listener", "") == "hub"; });
    sample.cdn_requests = testing::count_requests(
        access, [](const json& e) { return e.value("listener", "") == "cdn"; });
    if (method == Snapshot) result_root = snapshot_folder(out);
    sample.check = verify(result_root, set_.files);
    if (sample.run.exit_code != 0) {
      sample.note = "exit code " + std::to_string(sample.run.exit_code);
    }
    if (!sample.check.ok() || sample.run.exit_code != 0) {
      std::string detail = sample.note.empty() ? "" : sample.note + "; ";
      detail += std::to_string(sample.check.good) + " of " + std::to_string(sample.check.total) +
                " files delivered byte for byte";
      for (const auto& p : sample.check.problems) detail += "\n      " + p;
      detail += "\n    its output (" + log.string() + (o_.work ? "" : ", kept with --work DIR") +
                "), last lines:\n" + tail_of(log, 8);
      sample.note = detail;
    } else if (method == Prefetch) {
      sample.note = first_line_with(log, "prefetched ");
    }
    fs::remove_all(out);  // outside the timing; the next method starts from a clean disk
    return sample;
  }

 private:
  // The final URL of every file, asked outside the timing: the hub's own URL for a regular file,
  // the signed CDN URL its 302 points to for an LFS file (valid 1 h; asked again every round).
  fs::path curl_config(const fs::path& out) {
    httplib::Client hub(server_.url());
    std::string config;
    for (const auto& f : set_.files) {
      std::string resolve = std::string("/") + kRepo + "/resolve/main/" + f.path;
      httplib::Result r = hub.Head(resolve);
      if (!r) throw std::runtime_error("HEAD " + resolve + " failed");
      std::string url;
      if (r->status == 302) {
        url = r->get_header_value("Location");
      } else if (r->status == 200) {
        url = server_.url() + resolve;
      } else {
        throw std::runtime_error("HEAD " + resolve + ": HTTP " + std::to_string(r->status));
      }
      config += "url = \"" + url + "\"\noutput = \"" + (out / f.path).string() + "\"\n";
    }
    fs::path file = work_ / "curl.config";
    testing::write_file(file, config);
    return file;
  }

  static fs::path snapshot_folder(const fs::path& cache) {
    std::string folder = std::string("models--") + kRepo;
    folder.replace(folder.find('/'), 1, "--");
    std::error_code error;
    for (const auto& item : fs::directory_iterator(cache / folder / "snapshots", error)) {
      return item.path();
    }
    return cache / "no-snapshot-folder";
  }

  static std::string first_line_with(const fs::path& file, const std::string& part) {
    std::istringstream in(tail_of(file, 50));
    for (std::string line; std::getline(in, line);) {
      if (line.find(part) != std::string::npos) return line;
    }
    return "";
  }

  const Options& o_;
  fs::path work_;
  const Set& set_;
  const testing::HubServer& server_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

json bench_config() {
  json config = testing::HubServer::example_config();
  config["repos"].push_back({{"id", kRepo}, {"private", false}});
  return config;
}

int bench(const Options& o, const fs::path& work) {
  auto start = Clock::now();
  Set set = generate(work, o);
  std::printf(
      "prefetch-bench: SCALE=%g, %d rounds; set: %zu configurations, %zu MODULE folders, %zu "
      "files, %.1f MiB, largest file %.1f MiB (generated in %.1f s)\n",
      o.scale, o.rounds, set.configurations, set.modules, set.files.size(), set.bytes / kMiB,
      set.largest / kMiB, seconds_since(start));

  testing::HubServer server(bench_config());
  {
    std::lock_guard lock(interruption.mutex);
    fs::path server_dir = server.data_dir().parent_path();
    interruption.server = json::parse(testing::read_file(server_dir / "ready.json")).at("pid");
    interruption.temporary.push_back(server_dir);
  }
  fs::path push_log = work / "push.log";
  Run pushed = run({o.tool, "push", set.manifest.string(), "--cache-dir", set.root.string()},
                   {{"HF_ENDPOINT", server.url()},
                    {"HF_TOKEN", testing::kHubWriteToken},
                    {"HF_HOME", (work / "hf-home-push").string()},
                    {"HOME", (work / "home").string()}},
                   push_log);
  std::printf("push: neuron-cache push, %.1f s, exit code %d: %s\n", pushed.seconds,
              pushed.exit_code, tail_of(push_log, 1).c_str());
  if (pushed.exit_code != 0) {
    std::printf("FAILED: the push failed, nothing to measure:\n%s\n",
                tail_of(push_log, 20).c_str());
    return 1;
  }
  std::printf(
      "each round runs A B C D in this order, from an empty destination, after sync(2); the page\n"
      "cache is not dropped (the source of cp -r and the server's blobs are likely in memory)\n");

  Bench runner(o, work, set, server);
  std::vector<Sample> samples[kMethods];
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d:", round);
    std::fflush(stdout);
    for (int m = 0; m < kMethods; ++m) {
      Sample s = runner.measure(static_cast<Method>(m), round);
      std::printf("  %s %.2f s%s", kNames[m], s.run.seconds,
                  s.check.ok() && s.run.exit_code == 0 ? "" : " FAILED");
      std::fflush(stdout);
      samples[m].push_back(std::move(s));
    }
    std::printf("\n");
  }
  Run floor = run({"true"}, {}, work / "true.log");  // after the rounds: our largest state

  bool failed[kMethods] = {};
  double seconds[kMethods], rss[kMethods], hub[kMethods], cdn[kMethods];
  size_t verified[kMethods];
  for (int m = 0; m < kMethods; ++m) {
    std::vector<double> times;
    verified[m] = 0;
    rss[m] = hub[m] = cdn[m] = 0;
    for (const auto& s : samples[m]) {
      times.push_back(s.run.seconds);
      bool ok = s.check.ok() && s.run.exit_code == 0;
      verified[m] += ok ? 1 : 0;
      failed[m] = failed[m] || !ok;
      rss[m] = std::max(rss[m], s.run.max_rss_mib);
      hub[m] = std::max(hub[m], static_cast<double>(s.hub_requests) / set.files.size());
      cdn[m] = std::max(cdn[m], static_cast<double>(s.cdn_requests) / set.files.size());
    }
    seconds[m] = median(times);
  }

  std::printf("\n%-24s %9s %8s %8s %10s %9s %9s %9s %9s\n", "method (median of rounds)", "seconds",
              "MiB/s", "x curl", "x snapshot", "Hub req", "CDN req", "peak RSS", "verified");
  std::printf("%-24s %9s %8s %8s %10s %9s %9s %9s %9s\n", "", "", "", "", "", "per file",
              "per file", "MiB", "rounds");
  for (int m = 0; m < kMethods; ++m) {
    std::printf("%-24s %9.3f %8.1f %8.2f %10.2f %9.2f %9.2f %9.1f %6zu/%zu%s\n", kNames[m],
                seconds[m], set.bytes / kMiB / seconds[m], seconds[m] / seconds[Curl],
                seconds[m] / seconds[Snapshot], hub[m], cdn[m], rss[m], verified[m],
                samples[m].size(), failed[m] ? "  FAILED" : "");
  }
  std::printf(
      "(MiB/s: the set's %.1f MiB over the median time; requests per file: the most in a round,\n"
      "over the set's %zu files; peak RSS: ru_maxrss of the process, the most in a round, whose\n"
      "floor is %.1f MiB (what `true` measures); curl gets the final URLs, CDN ones for LFS\n"
      "files, resolved before its timing)\n",
      set.bytes / kMiB, set.files.size(), floor.max_rss_mib);

  std::printf("prefetch x (cp -r + sync -f), the durable disk ceiling: %.2f\n",
              seconds[Prefetch] / seconds[DurableCopy]);
  double x_curl = seconds[Prefetch] / seconds[Curl];
  double x_snapshot = seconds[Prefetch] / seconds[Snapshot];
  struct Target {
    const char* what;
    double value;
    double limit;
  } targets[] = {{"prefetch <= 1.2 x curl --parallel", x_curl, 1.2},
                 {"prefetch <= 0.25 x snapshotDownload", x_snapshot, 0.25},
                 {"Hub requests per file <= 1.0", hub[Prefetch], 1.0},
                 {"peak RSS of prefetch <= 64 MiB", rss[Prefetch], 64}};
  std::printf("\ntargets (issue 25; set for SCALE=1, with and without --small-modules):\n");
  for (const auto& t : targets) {
    const char* verdict = failed[Prefetch]     ? "not met (prefetch FAILED)"
                          : t.value <= t.limit ? "met"
                                               : "not met";
    std::printf("  %-38s %8.2f  %s\n", t.what, t.value, verdict);
  }

  bool any_failed = false;
  for (int m = 0; m < kMethods; ++m) {
    for (size_t r = 0; r < samples[m].size(); ++r) {
      const Sample& s = samples[m][r];
      bool ok = s.check.ok() && s.run.exit_code == 0;
      if (m == Prefetch && ok && r == 0 && !s.note.empty()) {
        std::printf("\nneuron-cache said (round 1): %s\n", s.note.c_str());
      }
      if (ok) continue;
      any_failed = true;
      std::printf("\nFAILED: %s, round %zu: %s\n", kNames[m], r + 1, s.note.c_str());
    }
  }
  if (any_failed) {
    std::printf(
        "\n*** FAILED: at least one method did not deliver every file byte for byte; its "
        "timings measure a failing run. ***\n");
    return 1;
  }
  std::printf("\nall methods delivered all %zu files byte for byte in every round\n",
              set.files.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed pipe (`| head`) must not leave the server running
  handle_interruptions(signals);
  try {
    if (options.work) {
      fs::create_directories(*options.work);
      return bench(options, *options.work);
    }
    testing::TempDir work;
    {
      std::lock_guard lock(interruption.mutex);
      interruption.temporary.push_back(work.path());
    }
    return bench(options, work.path());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "prefetch-bench: %s\n", error.what());
    return 1;
  }
}
