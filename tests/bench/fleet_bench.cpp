// fleet-bench: issue 26's "Done when": a CI matrix of --jobs jobs that all miss the same
// --configurations new configurations at the same moment, each job its own machine (its own
// local cache and HF_HOME, RUNNER_NAME=job-N), sharing one store. Two scenarios, each on a fresh
// store and fresh caches:
//   today        `neuron-cache ci --no-wait`: every job compiles every configuration (what
//                happened before compile leases: jobs x configurations compiles)
//   with leases  `neuron-cache ci`: one job holds each configuration's lease and compiles it,
//                the others wait for its push and fetch it (one compile per configuration)
//   signed       the same with signed entries (docs/signing.md): each job signs its push with
//                NEURON_CACHE_SIGNING_KEY, and its manifest trusts that key and requires
//                signatures, so every fetch is verified; the cost of signing and verifying is
//                this row beside the one above
// Measured per scenario: the wall time of the whole matrix (first start to last exit), the
// compiles the stand-in compiler logged (STAND_IN_CALL_LOG lines whose "compiled" is not empty),
// the compile time they stand for (compiles x --compile-seconds), the CPU time of the fleet's
// processes, the jobs' exit codes, and how each job's report says each configuration's lease
// went (held, waited_then_fetched, took_over, not_waited, wait_timed_out, no_lease).
//
//   fleet-bench [--jobs 8] [--configurations 4] [--compile-seconds 3] [--store hub|folder|s3|all]
//               [--rounds 1] [--work DIR]
//               [--commit-quota N --commit-window S --api-quota N --quota-window S]
//
// With a quota (issue 42, the Hub's commit quota): the test Hub server enforces it (commits per
// repo per commit window, api requests per token per window, 429 with Retry-After past them) and
// only the leases scenario runs, on the Hub: every configuration must still be compiled once and
// no job fail; the commits and requests the fleet made are printed beside the quotas.
//
// Stores: the test Hub server (tests/hub_server) on loopback, a shared folder (file://, made a
// store with `neuron-cache create -n`), and S3 through the in-process S3 stand-in
// (tests/unit/s3_stand_in.h, conditional writes enforced as S3 does). Exit 1 when a job fails
// or when, with leases, the compiles are not exactly --configurations.
//
// What the numbers mean: the compiler is tests/tools/stand-in-export, whose compile of a
// configuration (two graphs) sleeps --compile-seconds. On a 2-core machine the jobs' processes
// (the tool, Python starting the stand-in, the servers) share two cores, so "today"'s many
// compiles also slow each other and the wall times are those of this machine, not of a fleet.
// The column that matters is the compile time spent: on real Trainium instances each compile
// occupies an expensive machine for 30 to 60 minutes, so "today" pays jobs x configurations of
// them and leases pay one per configuration, while the matrix's wall time stays about one
// compile of each configuration plus the fetch.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench_support.h"
#include "hub_fixture.h"
#include "s3_stand_in.h"
#include "test_support.h"
#include "tool_runner.h"

namespace {

using namespace neuron_cache;
using namespace neuron_cache::bench_support;
using nlohmann::json;

constexpr const char* kModel = "meta-llama/Llama-3.2-1B";
// The stand-in compiles two graphs per configuration (context and token), each sleeping
// STAND_IN_DELAY.
constexpr double kGraphsPerConfiguration = 2;
// The lease outcomes of a report, in the table's order.
const std::vector<std::pair<std::string, std::string>> kOutcomes = {
    {"held", "held"},
    {"waited_then_fetched", "fetched"},
    {"took_over", "took over"},
    {"not_waited", "not waited"},
    {"wait_timed_out", "timed out"},
    {"no_lease", "no lease"}};

struct Options {
  int jobs = 8;
  int configurations = 4;
  double compile_seconds = 3;
  std::string store = "all";
  int rounds = 1;
  std::optional<fs::path> work;
  // The test Hub server's quotas (tests/README.md); 0: none.
  int commit_quota = 0;
  int commit_window = 3600;
  int api_quota = 0;
  int quota_window = 300;
  bool quotas() const { return commit_quota > 0 || api_quota > 0; }
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "fleet-bench: " << why
            << "\nusage: fleet-bench [--jobs 8] [--configurations 4] [--compile-seconds 3] "
               "[--store hub|folder|s3|all] [--rounds 1] [--work DIR] [--commit-quota N "
               "--commit-window S --api-quota N --quota-window S]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  parse_options(argc, argv,
                {{"--jobs", set_int(o.jobs)},
                 {"--configurations", set_int(o.configurations)},
                 {"--compile-seconds", set_double(o.compile_seconds)},
                 {"--store", [&](const std::string& v) { o.store = v; }},
                 {"--rounds", set_int(o.rounds)},
                 {"--work", [&](const std::string& v) { o.work = v; }},
                 {"--commit-quota", set_int(o.commit_quota)},
                 {"--commit-window", set_int(o.commit_window)},
                 {"--api-quota", set_int(o.api_quota)},
                 {"--quota-window", set_int(o.quota_window)}},
                usage);
  if (o.jobs < 2 || o.configurations < 1 || !(o.compile_seconds >= 0) || o.rounds < 1)
    usage("bad --jobs (2 or more), --configurations, --compile-seconds or --rounds");
  if (o.store != "hub" && o.store != "folder" && o.store != "s3" && o.store != "all")
    usage("--store must be hub, folder, s3 or all");
  if (o.commit_quota < 0 || o.api_quota < 0 || o.commit_window < 1 || o.quota_window < 1)
    usage("bad --commit-quota, --api-quota (0: none) or window (1 s or more)");
  if (o.quotas() && o.store != "hub") usage("quotas are the Hub's: --store hub");
  return o;
}

std::vector<std::string> stores_of(const Options& o) {
  if (o.store == "all") return {"hub", "folder", "s3"};
  return {o.store};
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// The Hub repo of one scenario's store (each scenario starts from an empty one).
std::string hub_repo(bool leases, int round, bool signs = false) {
  return std::string("acme/fleet-") +
         (signs    ? "signed"
          : leases ? "leases"
                   : "today") +
         "-r" + std::to_string(round);
}

// One Hub server for the whole run: the model's config.json (every store's jobs resolve the
// model there) and an empty cache repo per Hub scenario.
json hub_config(const Options& o) {
  json config = testing::cache_hub_config(
      testing::kTestCacheRepo, {{kModel, {{"config.json", R"({"model_type": "llama"})"}}}});
  for (int round = 1; round <= o.rounds; ++round) {
    for (const std::string& repo :
         {hub_repo(false, round), hub_repo(true, round), hub_repo(true, round, true)})
      config["repos"].push_back(
          {{"id", repo}, {"private", false}, {"files", {{"README.md", "# fleet-bench\n"}}}});
  }
  return config;
}

// What one scenario measured.
struct Scenario {
  double wall = 0;         // first start to last exit
  double cpu = 0;          // user + system of every job, with the children it waited for
  std::vector<int> codes;  // by job
  std::vector<double> job_seconds;
  int compiles = 0;
  std::map<std::string, int> compiles_by_batch;
  std::map<std::string, int> outcomes;  // lease outcome -> configurations, over the jobs
  std::map<std::string, int> held_by;   // job -> leases held or taken over
  std::vector<std::string> problems;    // failed jobs, missing reports
  bool failed() const { return !problems.empty(); }
};

double seconds_of(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// Starts the jobs' command lines at once, each with stdout and stderr to its log, in one process
// group that an interruption stops; waits for every one.
void run_jobs(const std::vector<std::string>& lines, const std::vector<fs::path>& logs,
              Scenario& s) {
  size_t n = lines.size();
  s.codes.assign(n, -1);
  s.job_seconds.assign(n, 0);
  std::vector<pid_t> pids(n, -1);
  pid_t group = 0;
  auto start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    const char* line = lines[i].c_str();
    const char* log = logs[i].c_str();
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {  // only async-signal-safe calls until exec
      setpgid(0, group);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      execl("/bin/sh", "sh", "-c", line, static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, group);  // as the child does: whichever runs first
    if (group == 0) {
      group = pid;
      stop_group_when_interrupted(group);
    }
    pids[i] = pid;
  }
  for (size_t left = n; left > 0;) {
    int status = 0;
    rusage usage{};
    pid_t pid = wait4(-group, &status, 0, &usage);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("wait4 failed");
    }
    auto job = std::find(pids.begin(), pids.end(), pid);
    if (job == pids.end()) continue;
    size_t i = static_cast<size_t>(job - pids.begin());
    s.codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    s.job_seconds[i] = seconds_since(start);
    s.cpu += seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
    --left;
  }
  s.wall = seconds_since(start);
  forget_group_when_interrupted(group);
}

// The compiles the stand-in finished (a call whose "compiled" list is not empty), by batch size.
void count_compiles(const fs::path& call_log, Scenario& s) {
  std::ifstream in(call_log);
  for (std::string line; std::getline(in, line);) {
    json call = json::parse(line, nullptr, false);
    if (call.is_discarded() || !call.contains("compiled") || call["compiled"].empty()) continue;
    ++s.compiles;
    const json& argv = call["argv"];
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--batch_size") ++s.compiles_by_batch[argv[i + 1].get<std::string>()];
    }
  }
}

// One scenario on a fresh store: `jobs` concurrent `ci` runs of one manifest.
// A signing key for the signed scenario, made with `neuron-cache key generate`: the manifest's
// trusted_keys line and the environment that signs with it.
struct Signing {
  std::string trusted;  // "trusted_keys: [...]\nrequire_signatures: true\n"
  std::string env;
};

Signing make_signing(const testing::HubServer& hub, const fs::path& dir) {
  fs::create_directories(dir / "keys");
  testing::ToolRunner keys(dir / "keys", dir / "keys", hub.url(), dir / "keys" / "c");
  fs::path secret = dir / "keys" / "fleet-1.secret";
  testing::ToolResult made = keys.run("key generate fleet-1 --secret-file " + quoted(secret));
  if (made.code != 0) throw std::runtime_error("neuron-cache key generate failed:\n" + made.all());
  std::string line = made.out.substr(0, made.out.find('\n'));
  return {"trusted_keys: [\"" + line + "\"]\nrequire_signatures: true\n",
          " NEURON_CACHE_SIGNING_KEY=" + secret.string()};
}

Scenario run_scenario(const Options& o, const testing::HubServer& hub, const std::string& store,
                      bool leases, int round, const fs::path& dir, bool signs = false) {
  fs::create_directories(dir);
  std::optional<testing::S3StandIn> s3;
  std::string repo;
  std::string store_env;
  if (store == "hub") {
    repo = hub_repo(leases, round, signs);
  } else if (store == "folder") {
    fs::create_directories(dir / "share");
    repo = "file://" + (dir / "share").string();
    fs::create_directories(dir / "create");
    testing::ToolRunner creator(dir / "create", dir / "create", hub.url(), dir / "create" / "c");
    testing::ToolResult made = creator.run("create -n " + repo);
    if (made.code != 0) throw std::runtime_error("neuron-cache create -n failed:\n" + made.all());
  } else {
    s3.emplace();
    repo = "s3://bucket/fleet";
    store_env =
        "AWS_ACCESS_KEY_ID=KEY AWS_SECRET_ACCESS_KEY=SECRET AWS_REGION=us-east-1 "
        "AWS_ENDPOINT_URL=" +
        s3->access().endpoint;
  }
  testing::StandInModel model{kModel, {}};
  for (int i = 1; i <= o.configurations; ++i)
    model.configurations.push_back({"c" + std::to_string(i), i});
  fs::path manifest = dir / "neuron-cache.yaml";
  Signing signing = signs ? make_signing(hub, dir) : Signing{};
  testing::write_file(manifest, signing.trusted + testing::stand_in_manifest({model}));

  char delay[32];
  std::snprintf(delay, sizeof delay, "%g", o.compile_seconds / kGraphsPerConfiguration);
  std::vector<std::string> lines;
  std::vector<fs::path> logs;
  fs::path call_log = dir / "calls.jsonl";
  for (int job = 1; job <= o.jobs; ++job) {
    fs::path machine = dir / ("job-" + std::to_string(job));
    fs::create_directories(machine / "hf-home");
    testing::ToolRunner runner(machine, machine / "hf-home", hub.url(), machine / "cache");
    runner.call_log = call_log;
    std::string args = "ci " + quoted(manifest) + " --repo " + repo + " --report " +
                       quoted(machine / "report.json") + (leases ? "" : " --no-wait");
    // After ToolRunner's STAND_IN_DELAY=0: in `env`, the later NAME=value wins.
    std::string env = store_env + " NEURON_CACHE_LEASE_POLL_MS=200 RUNNER_NAME=job-" +
                      std::to_string(job) + " STAND_IN_DELAY=" + delay + signing.env;
    lines.push_back(runner.command(args, env));
    logs.push_back(machine / "ci.log");
  }

  Scenario s;
  run_jobs(lines, logs, s);
  count_compiles(call_log, s);
  for (int job = 1; job <= o.jobs; ++job) {
    std::string name = "job-" + std::to_string(job);
    fs::path machine = dir / name;
    if (s.codes[job - 1] != 0) {
      s.problems.push_back(name + " exited with " + std::to_string(s.codes[job - 1]) + ":\n" +
                           tail_of(machine / "ci.log", 15));
    }
    json report = json::parse(fs::exists(machine / "report.json")
                                  ? testing::read_file(machine / "report.json")
                                  : std::string(),
                              nullptr, false);
    if (report.is_discarded() || !report.contains("configurations")) {
      s.problems.push_back(name + " wrote no readable report (" +
                           (machine / "report.json").string() + ")");
      continue;
    }
    for (const auto& row : report["configurations"]) {
      if (!row.contains("lease")) continue;
      std::string outcome = row["lease"].value("outcome", "");
      ++s.outcomes[outcome];
      if (outcome == "held" || outcome == "took_over") ++s.held_by[name];
    }
  }
  return s;
}

// "4" when every round had 4, else "4-5".
std::string spread(const std::vector<int>& values) {
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  return *low == *high ? std::to_string(*low) : std::to_string(*low) + "-" + std::to_string(*high);
}

std::vector<int> each(const std::vector<Scenario>& rounds,
                      const std::function<int(const Scenario&)>& value) {
  std::vector<int> values;
  for (const auto& s : rounds) values.push_back(value(s));
  return values;
}

std::vector<double> each_double(const std::vector<Scenario>& rounds,
                                const std::function<double(const Scenario&)>& value) {
  std::vector<double> values;
  for (const auto& s : rounds) values.push_back(value(s));
  return values;
}

void print_row(const char* label, const std::vector<Scenario>& rounds, const Options& o) {
  std::vector<int> compiles = each(rounds, [](const Scenario& s) { return s.compiles; });
  double compiles_median = median(std::vector<double>(compiles.begin(), compiles.end()));
  int ok = 0, total = 0;
  for (const auto& s : rounds) {
    for (int code : s.codes) ok += code == 0 ? 1 : 0;
    total += static_cast<int>(s.codes.size());
  }
  std::printf("%-22s %7.1f %9s %10.0f %8.1f", label,
              median(each_double(rounds, [](const Scenario& s) { return s.wall; })),
              spread(compiles).c_str(), compiles_median * o.compile_seconds,
              median(each_double(rounds, [](const Scenario& s) { return s.cpu; })));
  for (const auto& [key, name] : kOutcomes) {
    std::string counts = spread(each(rounds, [&key](const Scenario& s) {
      auto found = s.outcomes.find(key);
      return found == s.outcomes.end() ? 0 : found->second;
    }));
    std::printf(" %*s", static_cast<int>(std::max<size_t>(name.size(), 4)), counts.c_str());
  }
  std::printf("  %d/%d\n", ok, total);
}

// The test Hub server's options for the quotas asked for.
std::vector<std::string> quota_args(const Options& o) {
  return {"--commit-quota",  std::to_string(o.commit_quota),
          "--commit-window", std::to_string(o.commit_window),
          "--api-quota",     std::to_string(o.api_quota),
          "--quota-window",  std::to_string(o.quota_window)};
}

// The most a quota of `quota` per `window` s lets through in `seconds` (fixed windows).
long most_allowed(int quota, int window, double seconds) {
  return static_cast<long>(quota) * (static_cast<long>(seconds) / window + 1);
}

// The leases scenario on the Hub under its quotas: every configuration compiled once, no job
// failed, and what the fleet asked of the Hub beside what the quotas allow.
int quota_bench(const Options& o, const fs::path& work, const testing::HubServer& hub) {
  std::printf(
      "fleet-bench: %d jobs, %d new configurations, %g s per compile (stand-in-export), on the "
      "test Hub server with quotas: %d commits per repo per %d s, %d api requests per token per "
      "%d s (0: none)\n",
      o.jobs, o.configurations, o.compile_seconds, o.commit_quota, o.commit_window, o.api_quota,
      o.quota_window);
  hub.clear_log();
  Scenario s = run_scenario(o, hub, "hub", true, 1, work / "hub-quotas");
  json log = hub.access_log();
  auto count = [&](const std::function<bool(const json&)>& wanted) {
    return testing::count_requests(log, wanted);
  };
  auto is_commit = [](const json& e) {
    return e["method"] == "POST" &&
           e["path"].get<std::string>().find("/commit/") != std::string::npos;
  };
  auto is_api = [](const json& e) {
    std::string path = e["path"];
    return e["listener"] == "hub" && path.find("/resolve/") == std::string::npos &&
           !path.starts_with("/api/resolve-cache/");
  };
  size_t commits = count([&](const json& e) { return is_commit(e) && e["status"] == 200; });
  size_t commits_refused = count([&](const json& e) { return is_commit(e) && e["status"] == 429; });
  size_t api = count(is_api);
  size_t refused = count([](const json& e) { return e["status"] == 429; });
  size_t hub_requests = count([](const json& e) { return e["listener"] == "hub"; });
  int ok = static_cast<int>(std::count(s.codes.begin(), s.codes.end(), 0));
  std::printf("wall %.1f s, CPU %.1f s, compiles %d (expected %d), jobs ok %d/%d\n", s.wall, s.cpu,
              s.compiles, o.configurations, ok, o.jobs);
  for (const auto& [key, name] : kOutcomes) {
    auto found = s.outcomes.find(key);
    std::printf("  %s %d", name.c_str(), found == s.outcomes.end() ? 0 : found->second);
  }
  std::printf("\ncommits: %zu landed, %zu refused with 429", commits, commits_refused);
  if (o.commit_quota > 0)
    std::printf(" (quota %d per %d s: at most %ld in %.0f s)", o.commit_quota, o.commit_window,
                most_allowed(o.commit_quota, o.commit_window, s.wall), s.wall);
  std::printf(
      "\napi requests: %zu of %zu to the hub, all jobs with one token; 429 answers in all: %zu",
      api, hub_requests, refused);
  if (o.api_quota > 0)
    std::printf(" (quota %d per %d s: at most %ld in %.0f s)", o.api_quota, o.quota_window,
                most_allowed(o.api_quota, o.quota_window, s.wall), s.wall);
  std::printf("\n");
  bool failed = !s.problems.empty() || s.compiles != o.configurations;
  for (const auto& problem : s.problems) std::printf("FAILED: %s\n", problem.c_str());
  if (s.compiles != o.configurations)
    std::printf("WRONG: %d compiles, expected exactly %d\n", s.compiles, o.configurations);
  return failed ? 1 : 0;
}

std::string describe_store(const std::string& store) {
  if (store == "hub") return "hub (the test Hub server on loopback)";
  if (store == "folder") return "folder (file://, a local folder as the shared one)";
  return "s3 (the in-process S3 stand-in, conditional writes enforced)";
}

int bench(const Options& o, const fs::path& work, const testing::HubServer& hub) {
  std::printf(
      "fleet-bench: %d jobs, %d new configurations, %g s per compile (stand-in-export), %d "
      "round%s; each scenario on a fresh store and fresh caches\n",
      o.jobs, o.configurations, o.compile_seconds, o.rounds, o.rounds == 1 ? "" : "s");
  bool failed = false;
  for (const std::string& store : stores_of(o)) {
    std::vector<Scenario> today, leased, signed_leases;
    for (int round = 1; round <= o.rounds; ++round) {
      std::string tag = store + "-r" + std::to_string(round);
      today.push_back(run_scenario(o, hub, store, false, round, work / (tag + "-today")));
      leased.push_back(run_scenario(o, hub, store, true, round, work / (tag + "-leases")));
      signed_leases.push_back(
          run_scenario(o, hub, store, true, round, work / (tag + "-signed"), true));
    }
    std::printf("\nstore: %s%s\n", describe_store(store).c_str(),
                o.rounds > 1 ? " (wall and CPU: median of rounds; counts: min-max)" : "");
    std::printf("%-22s %7s %9s %10s %8s", "scenario", "wall s", "compiles", "compile s", "CPU s");
    for (const auto& [key, name] : kOutcomes)
      std::printf(" %*s", static_cast<int>(std::max<size_t>(name.size(), 4)), name.c_str());
    std::printf("  jobs ok\n");
    print_row("today (ci --no-wait)", today, o);
    print_row("with leases (ci)", leased, o);
    print_row("signed, verified", signed_leases, o);

    double wall_today = median(each_double(today, [](const Scenario& s) { return s.wall; }));
    double wall_leases = median(each_double(leased, [](const Scenario& s) { return s.wall; }));
    std::vector<int> today_compiles = each(today, [](const Scenario& s) { return s.compiles; });
    std::vector<int> leased_compiles = each(leased, [](const Scenario& s) { return s.compiles; });
    std::printf("leases: %s compiles vs %s, wall %.2fx of today's (%.1f s vs %.1f s)\n",
                spread(leased_compiles).c_str(), spread(today_compiles).c_str(),
                wall_today > 0 ? wall_leases / wall_today : 0.0, wall_leases, wall_today);
    double wall_signed =
        median(each_double(signed_leases, [](const Scenario& s) { return s.wall; }));
    double cpu_leases = median(each_double(leased, [](const Scenario& s) { return s.cpu; }));
    double cpu_signed = median(each_double(signed_leases, [](const Scenario& s) { return s.cpu; }));
    std::printf(
        "signed: wall %.2fx of unsigned leases' (%.1f s vs %.1f s), CPU %+.1f s (%.1f s vs "
        "%.1f s)\n",
        wall_leases > 0 ? wall_signed / wall_leases : 0.0, wall_signed, wall_leases,
        cpu_signed - cpu_leases, cpu_signed, cpu_leases);
    std::string holders;
    for (const auto& [job, count] : leased.back().held_by)
      holders += (holders.empty() ? "" : ", ") + job + " " + std::to_string(count);
    std::string by_batch;
    for (const auto& [batch, count] : leased.back().compiles_by_batch)
      by_batch +=
          (by_batch.empty() ? "" : ", ") + std::string("c") + batch + " " + std::to_string(count);
    std::printf("  leases held (last round): %s; compiles by configuration: %s\n",
                holders.empty() ? "none" : holders.c_str(),
                by_batch.empty() ? "none" : by_batch.c_str());
    for (const auto* rounds : {&today, &leased}) {
      const std::vector<double>& ends = rounds->back().job_seconds;
      auto [first, last] = std::minmax_element(ends.begin(), ends.end());
      std::printf("  %s (last round): jobs ended between %.1f s and %.1f s\n",
                  rounds == &today ? "today" : "with leases", *first, *last);
    }

    for (const auto* rounds : {&today, &leased, &signed_leases}) {
      const char* name = rounds == &today ? "today" : rounds == &leased ? "with leases" : "signed";
      for (size_t r = 0; r < rounds->size(); ++r) {
        for (const auto& problem : (*rounds)[r].problems) {
          std::printf("FAILED (%s, %s, round %zu): %s\n", store.c_str(), name, r + 1,
                      problem.c_str());
          failed = true;
        }
        // A fetch refused for its signature would compile again: exactly one compile each.
        if (rounds != &today && (*rounds)[r].compiles != o.configurations) {
          std::printf("WRONG (%s, %s, round %zu): %d compiles, expected exactly %d\n",
                      store.c_str(), name, r + 1, (*rounds)[r].compiles, o.configurations);
          failed = true;
        }
      }
    }
  }
  std::printf(
      "\ncompile s: compiles x %g s, the machine time a real fleet pays (30-60 min per compile "
      "on Trainium); wall s is this %ld-core machine running every job at once.\n",
      o.compile_seconds, sysconf(_SC_NPROCESSORS_ONLN));
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  // Started before the signals are blocked, so that it stops on SIGTERM.
  std::unique_ptr<testing::HubServer> hub;
  try {
    hub = std::make_unique<testing::HubServer>(
        hub_config(options), options.quotas() ? quota_args(options) : std::vector<std::string>{});
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fleet-bench: %s\n", error.what());
    return 1;
  }
  handle_interruptions("fleet-bench");
  fs::path server_dir = hub->data_dir().parent_path();
  stop_when_interrupted(json::parse(testing::read_file(server_dir / "ready.json")).at("pid"));
  remove_when_interrupted(server_dir);
  return run_bench("fleet-bench", options.work, [&](const fs::path& work) {
    return options.quotas() ? quota_bench(options, work, *hub) : bench(options, work, *hub);
  });
}
