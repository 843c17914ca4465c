// pipeline-bench: the main job at scale against the local Hub server: push N configurations in
// one commit, plan them from another machine (requests must not grow with N), prefetch them into
// an empty cache, and prefetch again (nothing may move). Then the warm no-op as users run it:
// `neuron-cache prefetch` and `ci` with WARM_CONFIGS configurations of one unpinned model, all
// complete locally: wall time, Hub requests, response bytes and stat calls (with strace).
//   pipeline-bench [CONFIGS=200] [MODULES_PER_CONFIG=3] [KIB_PER_NEFF=256] [WARM_CONFIGS=100]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <sstream>

#include "../unit/stores.h"
#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/transfer/prefetch.h"
#include "neuron_cache/transfer/push.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
namespace ai = artifact_index;
using Clock = std::chrono::steady_clock;

constexpr const char* kCompiler = "2.21.33363.0+82129205";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

plan::Target target(int i) {
  plan::Target t;
  t.inputs = {"acme/model-" + std::to_string(i % 7),
              "llama",
              "text-generation",
              "bf16",
              1 + i % 8,
              128L << (i % 6),
              kCompiler,
              8,
              "trn1",
              {},
              std::string(40, 'a'),
              "0.4.5",
              std::nullopt};
  t.inputs.batch_size = 1 + i;  // every configuration distinct
  t.key = cache_key::key_of(t.inputs);
  t.configuration.name = "config-" + std::to_string(i);
  t.configuration.model_id = t.inputs.model_id;
  return t;
}

// Lays out one compiled configuration's MODULE_ folders in the cache; the entry listing them.
ai::Entry fake_modules(const local::LocalIndex& index, const plan::Target& t, int modules,
                       size_t neff_bytes, std::mt19937_64& random) {
  ai::Entry entry{t.key,  t.inputs, t.configuration.name, {}, {},
                  1800.0, "bench",  ai::utc_now(),        {}};
  std::string compiler_dir = entry.compiler_dir();
  for (int m = 0; m < modules; ++m) {
    std::string name = "MODULE_" + t.key.substr(0, 16) + std::to_string(m) + "+d7517139";
    std::filesystem::path dir = index.cache().root() / compiler_dir / name;
    std::string neff(neff_bytes, '\0');
    for (auto& c : neff) c = static_cast<char>(random());
    testing::write_file(dir / "model.hlo_module.pb", neff.substr(0, 1024));
    testing::write_file(dir / "compile_flags.json", "[]");
    testing::write_file(dir / "model.neff", neff);
    testing::write_file(dir / "model.done", "");
    entry.modules.push_back(index.record_module(compiler_dir, name));
  }
  return entry;
}

// Lays out one compiled configuration in the cache and records it in the local index.
void compile_fake(const local::LocalIndex& index, const plan::Target& t, int modules,
                  size_t neff_bytes, std::mt19937_64& random) {
  index.write(fake_modules(index, t, modules, neff_bytes, random));
}

// The registry files optimum-neuron 0.4.5 writes for a configuration, listed in `entry`: the
// primary file and its alias, an absolute symlink (so a copied cache keeps links into the
// original's place).
void add_registry(const local::LocalIndex& index, ai::Entry& entry) {
  registry::Json record = {{"_entry_class", "SingleModelCacheEntry"},
                           {"_model_id", entry.inputs.model_id},
                           {"_task", "text-generation"},
                           {"model_type", "llama"},
                           {"neuron", {{"batch_size", entry.inputs.batch_size}}}};
  std::string text = registry::serialize(record);
  std::string hash = registry::entry_hash(text);
  std::filesystem::path compiler = index.cache().root() / entry.compiler_dir();
  std::string primary = registry::primary_path("0.4.5", registry::arch_digest(record), hash);
  std::string alias = registry::alias_path("0.4.5", "llama", entry.inputs.model_id, hash);
  testing::write_file(compiler / primary, text);
  std::filesystem::create_directories((compiler / alias).parent_path());
  std::filesystem::create_symlink(compiler / primary, compiler / alias);
  for (const auto& path : {primary, alias})
    entry.registry.push_back(index.record_registry_file(entry.compiler_dir(), path));
}

hub::HubClient make_client(const testing::HubServer& server) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  return hub::HubClient(options);
}

void report(const char* label, double seconds, uint64_t requests, const std::string& detail) {
  std::printf("%-40s %7.3f s  %5llu requests  %s\n", label, seconds,
              static_cast<unsigned long long>(requests), detail.c_str());
}

// The warm no-op: a manifest of `configs` configurations of one unpinned model, laid out in a
// cache and pushed, so that the tool finds every one complete locally.
constexpr const char* kModel = "alice/bench-model";

// The key the tool makes for configuration `i` of warm_manifest().
plan::Target warm_target(int i, const std::string& revision) {
  plan::Target t;
  t.inputs = {kModel, "llama", "text-generation", "bf16",  i,           128, kCompiler, 2,
              "trn1", {},      revision,          "0.4.5", std::nullopt};
  t.key = cache_key::key_of(t.inputs);
  t.configuration.name = "c" + std::to_string(i);
  t.configuration.model_id = kModel;
  return t;
}

std::string warm_manifest(const std::string& repo, int configs) {
  std::string y = "cache_repo: " + repo + "\ncompiler_version: \"" + kCompiler +
                  "\"\noptimum_neuron_version: \"0.4.5\"\ninstance_type: trn1\nmodels:\n" +
                  "  - model_id: " + kModel + "\n    task: text-generation\n    configurations:\n";
  for (int i = 1; i <= configs; ++i) {
    y += "      - {name: c" + std::to_string(i) + ", batch_size: " + std::to_string(i) +
         ", sequence_length: 128, num_cores: 2, precision: bf16}\n";
  }
  return y;
}

struct Spawned {
  int code = -1;
  double seconds = 0;      // wall
  double cpu_seconds = 0;  // user + system: steadier than wall on a shared machine
};

double seconds_of(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// Runs `argv` with exactly `env`, output discarded.
Spawned spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  auto start = Clock::now();
  pid_t pid = -1;
  int status = -1;
  rusage usage{};
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) == 0) {
    wait4(pid, &status, 0, &usage);
  }
  Spawned out;
  out.seconds = seconds_since(start);
  out.cpu_seconds = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  posix_spawn_file_actions_destroy(&actions);
  return out;
}

struct WarmRun {
  double best = 1e9;
  double median = 0;
  double median_cpu = 0;
  size_t requests = 0;
  uint64_t bytes = 0;
  bool ok = true;
};

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// `runs` timed runs of the tool; requests and bytes of the last one (they are all alike).
WarmRun time_tool(const testing::HubServer& server, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, int runs) {
  WarmRun out;
  std::vector<double> times, cpu;
  for (int i = 0; i < runs; ++i) {
    server.clear_log();
    Spawned run = spawn(argv, env);
    out.ok = out.ok && run.code == 0;
    times.push_back(run.seconds);
    cpu.push_back(run.cpu_seconds);
  }
  nlohmann::json log = server.access_log();
  out.requests = log.size();
  for (const auto& e : log) out.bytes += e.value("bytes_out", uint64_t{0});
  out.best = *std::min_element(times.begin(), times.end());
  out.median = median_of(times);
  out.median_cpu = median_of(cpu);
  return out;
}

// The system calls of one run by kind, from an `strace -f -c` summary; empty when strace cannot
// trace here.
struct Syscalls {
  long stat = -1;  // the stat family (newfstatat, statx, fstat, ...)
  long open = -1;  // openat, open
  long link = -1;  // readlink, readlinkat: what resolving a symlink costs
  long all = -1;
};

Syscalls syscalls_of(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const std::filesystem::path& summary) {
  Syscalls out;
  if (!testing::strace_works()) return out;
  std::vector<std::string> traced = {"/usr/bin/strace", "-f", "-c", "-o", summary.string()};
  traced.insert(traced.end(), argv.begin(), argv.end());
  spawn(traced, env);
  std::string text = testing::read_file(summary);
  out = {static_cast<long>(testing::stat_calls(text)), 0, 0, 0};
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // "% time  seconds  usecs/call  calls  [errors]  syscall"
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.size() < 5 || !std::isdigit(static_cast<unsigned char>(w[3][0]))) continue;
    long calls = std::stol(w[3]);
    const std::string& name = w.back();
    if (name == "total") out.all = calls;
    if (name == "openat" || name == "open") out.open += calls;
    if (name.starts_with("readlink")) out.link += calls;
  }
  return out;
}

// How many configurations `plan --json` finds complete locally.
size_t local_rows(const std::vector<std::string>& env, const std::string& manifest) {
  std::string command = testing::kCleanEnv;
  for (const auto& e : env) command += " '" + e + "'";
  std::string out;
  testing::run_command(command + " " + testing::tool_path() + " plan --json '" + manifest + "'",
                       &out);
  size_t json_start = out.find('{');
  auto plan = nlohmann::json::parse(json_start == std::string::npos ? "" : out.substr(json_start),
                                    nullptr, false);
  if (plan.is_discarded() || !plan.contains("configurations")) return 0;
  size_t local = 0;
  for (const auto& row : plan["configurations"]) local += row["status"] == "local" ? 1 : 0;
  return local;
}

// A cache holding `configs` configurations of one unpinned model, all pushed, and the manifest
// declaring them: what the warm runs find.
struct WarmSetup {
  testing::TempDir dir;
  std::vector<std::string> env;
  std::string manifest;
};

void prepare_warm(WarmSetup& setup, const testing::HubServer& server, hub::HubClient& client,
                  const std::string& repo, int configs, int modules, size_t kib) {
  const testing::TempDir& dir = setup.dir;
  std::string model = client.create_repo("bench-model", "", false);
  testing::write_file(dir / "config.json", R"({"model_type": "llama"})");
  client.commit(model, {{hub::CommitOperation::Kind::Add, "config.json", dir / "config.json"}},
                "config", std::nullopt);
  std::string revision = client.repo_info(model).sha;
  local::LocalCache cache(dir / "cache");
  local::LocalIndex index(cache);
  std::mt19937_64 random(11);
  std::vector<ai::Entry> entries;
  for (int i = 1; i <= configs; ++i) {
    ai::Entry entry = fake_modules(index, warm_target(i, revision), modules, kib << 10, random);
    add_registry(index, entry);
    index.write(entry);
    entries.push_back(entry);
  }
  transfer::push(*testing::hub_store(client, repo), index, entries);
  testing::write_file(dir / "m.yaml", warm_manifest(repo, configs));
  setup.manifest = (dir / "m.yaml").string();
  setup.env = {"PATH=/usr/bin:/bin",
               "HOME=" + dir.path().string(),
               "HF_HOME=" + (dir / "hf").string(),
               "HF_ENDPOINT=" + server.url(),
               "HF_TOKEN=" + std::string(testing::kHubWriteToken),
               "NEURON_COMPILE_CACHE_URL=" + cache.root().string()};
}

// With PIPELINE_BENCH_PERF=<folder>: 20 runs of `argv` under `perf record -g` into
// <folder>/<label>.data, for finding where a warm run's CPU goes.
void profile(const std::string& label, const std::vector<std::string>& argv,
             const std::vector<std::string>& env) {
  const char* folder = std::getenv("PIPELINE_BENCH_PERF");
  if (folder == nullptr || label == "--version") return;
  std::string loop = "for i in $(seq 20); do";
  for (const auto& word : argv) loop += " '" + word + "'";
  loop += " >/dev/null; done";
  std::string file = label;
  std::replace(file.begin(), file.end(), ' ', '-');
  spawn({"/usr/bin/perf", "record", "-q", "-F", "5000", "--call-graph", "dwarf,16384", "-o",
         std::string(folder) + "/" + file + ".data", "--", "/bin/sh", "-c", loop},
        env);
}

double load_average() {
  double load[1] = {-1};
  getloadavg(load, 1);
  return load[0];
}

// Seven timed runs of `argv` after one untimed (the first run after a push reads the new
// index once), then one under strace for the system calls. `floor`, the median of `--version`,
// is what starting the binary costs: the run's time is printed as a multiple of it. Returns the
// median.
double report_warm(const testing::HubServer& server, const std::string& label,
                   const std::vector<std::string>& argv, const WarmSetup& setup, int configs,
                   double floor) {
  spawn(argv, setup.env);
  WarmRun run = time_tool(server, argv, setup.env, 7);
  profile(label, argv, setup.env);
  Syscalls calls = syscalls_of(argv, setup.env, setup.dir / "strace.txt");
  char detail[300];
  std::snprintf(detail, sizeof detail, "best %.3f s, cpu %.3f s, %llu response bytes%s", run.best,
                run.median_cpu, static_cast<unsigned long long>(run.bytes),
                run.ok ? "" : ", FAILED");
  report(("  " + label + " (median of 7)").c_str(), run.median, run.requests, detail);
  if (floor > 0) {
    std::printf("  %-38s %5.1fx --version, %.1f ms over it\n", "", run.median / floor,
                (run.median - floor) * 1e3);
  }
  if (calls.all >= 0 && floor <= 0) {
    std::printf("  %-38s %ld stat, %ld open, %ld readlink, %ld in all (the floor)\n", "",
                calls.stat, calls.open, calls.link, calls.all);
  } else if (calls.all >= 0) {
    double n = configs;
    std::printf(
        "  %-38s %ld stat, %ld open, %ld readlink, %ld in all: %.1f, %.1f, %.1f, %.1f "
        "per configuration\n",
        "", calls.stat, calls.open, calls.link, calls.all, calls.stat / n, calls.open / n,
        calls.link / n, calls.all / n);
  }
  return run.median;
}

// The warm runs in `setup`: prefetch and ci, beside the floor of any run.
void report_warm_runs(const testing::HubServer& server, const WarmSetup& setup, int configs,
                      const std::string& cache_label) {
  std::printf("warm no-op, %s, load average %.2f:\n", cache_label.c_str(), load_average());
  // What any run of the tool costs on this machine: starting it (43 shared libraries).
  double floor =
      report_warm(server, "--version", {testing::tool_path(), "--version"}, setup, configs, 0);
  report_warm(server, "prefetch " + cache_label,
              {testing::tool_path(), "prefetch", setup.manifest, "--quiet"}, setup, configs, floor);
  std::string out = (setup.dir / "out").string();
  report_warm(server, "ci " + cache_label,
              {testing::tool_path(), "ci", setup.manifest, "--quiet", "--output-dir", out}, setup,
              configs, floor);
}

// With PIPELINE_BENCH_HOLD=<seconds>: prints the warm run's environment and command, then
// waits, so that the run can be traced or profiled by hand while the Hub server is up.
void hold(const WarmSetup& setup) {
  const char* seconds = std::getenv("PIPELINE_BENCH_HOLD");
  if (seconds == nullptr) return;
  std::string line = "env -i";
  for (const auto& e : setup.env) line += " '" + e + "'";
  std::printf("%s %s prefetch '%s' --quiet\n", line.c_str(), testing::tool_path().c_str(),
              setup.manifest.c_str());
  std::fflush(stdout);
  sleep(static_cast<unsigned>(std::atoi(seconds)));
}

void warm_no_op(const testing::HubServer& server, hub::HubClient& client, const std::string& repo,
                int configs, int modules, size_t kib) {
  WarmSetup setup;
  prepare_warm(setup, server, client, repo, configs, modules, kib);
  if (size_t local = local_rows(setup.env, setup.manifest); local != size_t(configs)) {
    std::printf(
        "warm no-op: only %zu of %d configurations are local: the bench's keys are not "
        "the tool's\n",
        local, configs);
    return;
  }
  std::printf(
      "warm no-op, %d configurations complete locally (%d modules each, a registry file and "
      "its absolute alias):\n",
      configs, modules);
  hold(setup);
  report_warm_runs(server, setup, configs, "here");
  // The same cache copied elsewhere, the original left in place: every alias still points into
  // the original, and is read below the copy instead.
  std::filesystem::path copy = setup.dir / "copy";
  testing::run_command("cp -a '" + (setup.dir / "cache").string() + "' '" + copy.string() + "'");
  for (auto& e : setup.env) {
    if (e.starts_with("NEURON_COMPILE_CACHE_URL=")) e = "NEURON_COMPILE_CACHE_URL=" + copy.string();
  }
  report_warm_runs(server, setup, configs, "copied");
}

}  // namespace

int main(int argc, char** argv) {
  int configs = argc > 1 ? std::atoi(argv[1]) : 200;
  int modules = argc > 2 ? std::atoi(argv[2]) : 3;
  size_t kib = argc > 3 ? static_cast<size_t>(std::atoi(argv[3])) : 256;
  int warm_configs = argc > 4 ? std::atoi(argv[4]) : 100;
  testing::HubServer server;
  testing::TempDir first, second;
  std::mt19937_64 random(7);
  std::vector<plan::Target> targets;
  for (int i = 0; i < configs; ++i) targets.push_back(target(i));

  local::LocalCache first_cache(first.path());
  local::LocalIndex first_index(first_cache);
  std::vector<ai::Entry> entries;
  for (const auto& t : targets) {
    compile_fake(first_index, t, modules, kib << 10, random);
    entries.push_back(*first_index.find(kCompiler, t.key));
  }
  uint64_t total = static_cast<uint64_t>(configs) * modules * (kib << 10);
  std::printf("%d configurations x %d modules x %zu KiB NEFF = %.1f MiB\n", configs, modules, kib,
              static_cast<double>(total) / (1 << 20));

  hub::HubClient client = make_client(server);
  std::string repo = client.create_repo("bench-cache", "", true);
  auto start = Clock::now();
  transfer::PushResult pushed =
      transfer::push(*testing::hub_store(client, repo), first_index, entries);
  report("push (one commit)", seconds_since(start), client.http().stats().requests,
         std::to_string(pushed.pushed.size()) + " configurations, " +
             std::to_string(pushed.commit.bytes_sent >> 20) + " MiB sent");

  local::LocalCache second_cache(second.path());
  local::LocalIndex second_index(second_cache);
  for (int n : {1, configs / 10, configs}) {
    if (n < 1) continue;
    hub::HubClient fresh = make_client(server);
    std::vector<plan::Target> some(targets.begin(), targets.begin() + n);
    start = Clock::now();
    auto index_store = testing::hub_store(fresh, repo);
    remote::RemoteIndex remote = remote::RemoteIndex::open(*index_store);
    plan::Plan plan = plan::make_plan(some, second_index, &remote, "", {});
    std::string label = "plan, " + std::to_string(n) + " configurations";
    report(label.c_str(), seconds_since(start), fresh.http().stats().requests,
           std::to_string(plan.count(plan::Status::Store)) + " on the Hub");
  }

  for (const char* label : {"prefetch into an empty cache", "prefetch again"}) {
    hub::HubClient fresh = make_client(server);
    start = Clock::now();
    auto index_store = testing::hub_store(fresh, repo);
    remote::RemoteIndex remote = remote::RemoteIndex::open(*index_store);
    plan::Plan plan = plan::make_plan(targets, second_index, &remote, "", {});
    std::vector<ai::Entry> hits;
    for (const auto& row : plan.rows) {
      if (row.status == plan::Status::Store) hits.push_back(*row.entry);
    }
    transfer::PrefetchResult fetched =
        transfer::prefetch(*testing::hub_store(fresh, repo), remote.revision(), second_index, hits);
    double seconds = seconds_since(start);
    char detail[160];
    std::snprintf(
        detail, sizeof detail, "%zu modules, %.1f MiB, %.1f MiB/s, %zu failed",
        fetched.modules_installed, static_cast<double>(fetched.bytes_downloaded) / (1 << 20),
        static_cast<double>(fetched.bytes_downloaded) / (1 << 20) / seconds, fetched.failed.size());
    report(label, seconds, fresh.http().stats().requests, detail);
  }
  warm_no_op(server, client, repo, warm_configs, modules, kib);
  return 0;
}
