// neuron-cache-action: the binary behind github-action/action.yml. It reads the action's inputs
// from INPUT_* variables (the composite action maps them, since composite steps do not get them
// by themselves), runs the pipeline steps the mode asks for through the library's
// pipeline::run, as `neuron-cache ci` does, and answers in the runner's terms: step outputs in
// GITHUB_OUTPUT, the Markdown summary in GITHUB_STEP_SUMMARY, annotations, masks and groups on
// stdout. No cache logic lives here.
//
// Mode gc runs `neuron-cache gc` instead, for a scheduled workflow (maintenance::collect_garbage).
//
// Exit codes: 0 success, 1 a compile failed (or a cache problem with strict, or gc failed), 2 bad
// inputs, 3 fail-on-miss found configurations no cache has.
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/config/settings.h"
#include "neuron_cache/config/trust_settings.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/maintenance/gc.h"
#include "neuron_cache/maintenance/store_usage.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/net/tls_trust.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/report/gc.h"
#include "neuron_cache/report/markdown.h"
#include "neuron_cache/report/progress.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/report/stats.h"
#include "neuron_cache/report/usage.h"
#include "neuron_cache/storage/hub_models.h"
#include "neuron_cache/storage/open.h"
#include "neuron_cache/storage/policies.h"
#include "neuron_cache/sys/interrupt.h"
#include "runner_protocol.h"

namespace neuron_cache::action {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kExitFailed = 1;
constexpr int kExitInput = 2;
constexpr int kExitGate = 3;  // fail-on-miss, as `neuron-cache plan --fail-on-miss`

// The action.yml inputs this binary reads, as INPUT_<NAME> with '-' as '_' (`binary` is the
// build step's own). `--list-inputs` prints them so the tests can check action.yml maps each.
constexpr std::array<const char*, 22> kInputs = {
    "manifest",      "cache-repo",   "mode",
    "token",         "read-only",    "strict",
    "cache-dir",     "configs",      "jobs",
    "fail-on-miss",  "store-usage",  "wait",
    "wait-timeout",  "locked",       "lockfile",
    "gc-older-than", "gc-grace",     "gc-apply",
    "gc-squash",     "trusted-keys", "require-signatures",
    "signing-key"};

enum class Mode { Plan, Prefetch, Compile, Push, All, Gc };

struct Inputs {
  std::string manifest;
  std::string cache_repo;
  std::string cache_dir;
  std::string token;
  std::string mode_name = "all";
  Mode mode = Mode::All;
  std::string read_only = "auto";
  bool strict = false;
  bool fail_on_miss = false;
  bool store_usage = false;
  bool wait = true;      // for another job compiling the same configuration (compile leases)
  bool locked = false;   // exactly the lockfile's files (neuron-cache lock)
  std::string lockfile;  // default: neuron-cache.lock beside the manifest
  std::optional<int64_t> wait_timeout;  // seconds
  int jobs = 1;
  std::vector<std::string> configs;
  std::optional<int64_t> gc_older_than;  // seconds (mode gc)
  std::optional<int64_t> gc_grace;       // seconds (mode gc)
  bool gc_apply = false;
  bool gc_squash = false;
  std::vector<std::string> trusted_keys;  // public key lines (config/trust_settings.h)
  bool require_signatures = false;
};

std::string env_name(const std::string& input) {
  std::string name = "INPUT_";
  for (char ch : input) name += ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
  return name;
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// An input's value; the composite action passes an empty string for one not given.
std::string input(const std::string& name, const std::string& fallback = "") {
  const char* value = std::getenv(env_name(name).c_str());
  std::string text = value ? trim(value) : "";
  return text.empty() ? fallback : text;
}

std::string lower(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::tolower(ch));
  return text;
}

// GitHub's own boolean inputs accept true/True/TRUE and false/False/FALSE.
bool parse_bool(const std::string& name, const std::string& value) {
  if (lower(value) == "true") return true;
  if (lower(value) == "false") return false;
  throw input_error("input " + name + " must be true or false, not \"" + value + "\"");
}

Mode parse_mode(const std::string& value) {
  static const std::map<std::string, Mode> modes = {
      {"plan", Mode::Plan}, {"prefetch", Mode::Prefetch}, {"compile", Mode::Compile},
      {"push", Mode::Push}, {"all", Mode::All},           {"gc", Mode::Gc}};
  auto it = modes.find(lower(value));
  if (it == modes.end()) {
    throw input_error("input mode must be plan, prefetch, compile, push, all or gc, not \"" +
                      value + "\"");
  }
  return it->second;
}

int parse_jobs(const std::string& value) {
  size_t used = 0;
  int jobs = 0;
  try {
    jobs = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || jobs < 1 || jobs > 256)
    throw input_error("input jobs must be a number from 1 to 256, not \"" + value + "\"");
  return jobs;
}

// A number of seconds from 0 to a week.
int64_t parse_seconds(const std::string& name, const std::string& value) {
  size_t used = 0;
  int64_t seconds = -1;
  try {
    seconds = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || seconds < 0 || seconds > 7 * 24 * 3600)
    throw input_error("input " + name + " must be a number of seconds from 0 to 604800, not \"" +
                      value + "\"");
  return seconds;
}

// Names one per line or separated by commas (a YAML block scalar or a one-line list).
std::vector<std::string> split_configs(const std::string& value) {
  std::vector<std::string> names;
  std::string current;
  for (char ch : value + "\n") {
    if (ch != ',' && ch != '\n') {
      current += ch;
      continue;
    }
    if (std::string name = trim(current); !name.empty()) names.push_back(name);
    current.clear();
  }
  return names;
}

// Inputs that belong to other modes than the one given: an error rather than silently unused.
void check_mode_inputs(const Inputs& in) {
  bool gc = in.mode == Mode::Gc;
  if (!gc && (in.gc_older_than || in.gc_grace || in.gc_apply || in.gc_squash))
    throw input_error(
        "inputs gc-older-than, gc-grace, gc-apply and gc-squash are for mode gc, "
        "not " +
        in.mode_name);
  if (gc && (in.locked || in.fail_on_miss))
    throw input_error(
        "inputs locked, lockfile and fail-on-miss are for fetching; mode gc "
        "cleans the cache store");
  if (in.gc_squash && !in.gc_apply)
    throw input_error("input gc-squash rewrites the Hub repo's history: set gc-apply too");
}

// Everything but the token, which main() has taken already.
Inputs read_inputs(std::string token) {
  Inputs in;
  in.token = std::move(token);
  in.manifest = input("manifest");
  if (in.manifest.empty()) throw input_error("input manifest is required (a neuron-cache.yaml)");
  if (!fs::is_regular_file(in.manifest))
    throw input_error("input manifest: no file " + in.manifest + " (relative to " +
                      fs::current_path().string() + ")");
  in.cache_repo = input("cache-repo");
  in.cache_dir = input("cache-dir");
  in.mode_name = lower(input("mode", "all"));
  in.mode = parse_mode(in.mode_name);
  in.read_only = lower(input("read-only", "auto"));
  if (in.read_only != "auto") parse_bool("read-only", in.read_only);
  in.strict = parse_bool("strict", input("strict", "false"));
  in.jobs = parse_jobs(input("jobs", "1"));
  in.configs = split_configs(input("configs"));
  in.fail_on_miss = parse_bool("fail-on-miss", input("fail-on-miss", "false"));
  in.store_usage = parse_bool("store-usage", input("store-usage", "false"));
  in.wait = parse_bool("wait", input("wait", "true"));
  if (std::string timeout = input("wait-timeout"); !timeout.empty())
    in.wait_timeout = parse_seconds("wait-timeout", timeout);
  in.lockfile = input("lockfile");
  in.locked = parse_bool("locked", input("locked", "false")) || !in.lockfile.empty();
  if (std::string older = input("gc-older-than"); !older.empty())
    in.gc_older_than = parse_duration(older, "input gc-older-than");
  if (std::string grace = input("gc-grace"); !grace.empty())
    in.gc_grace = parse_duration(grace, "input gc-grace");
  in.gc_apply = parse_bool("gc-apply", input("gc-apply", "false"));
  in.gc_squash = parse_bool("gc-squash", input("gc-squash", "false"));
  in.trusted_keys = config::split_key_list(input("trusted-keys"));
  in.require_signatures = parse_bool("require-signatures", input("require-signatures", "false"));
  check_mode_inputs(in);
  return in;
}

struct ReadOnly {
  bool on = false;
  bool fork = false;
  std::string why;
};

ReadOnly resolve_read_only(const std::string& value) {
  if (value == "true") return {true, false, "the read-only input is true"};
  if (value == "false") return {false, false, ""};
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value ? value : "");
  };
  auto fork = pull_request_fork(env("GITHUB_EVENT_NAME"), env("GITHUB_EVENT_PATH"));
  if (!fork || !fork->fork) return {false, false, ""};
  return {true, true, fork->why};
}

bool runs_prefetch(Mode mode) {
  return mode == Mode::Prefetch || mode == Mode::Compile || mode == Mode::All;
}
bool runs_compile(Mode mode) {
  return mode == Mode::Compile || mode == Mode::All;
}
bool runs_push(Mode mode) {
  return mode == Mode::Push || mode == Mode::All;
}

// Ends a group even when a step throws, so the rest of the log is not folded into it.
class Group {
 public:
  Group(WorkflowCommands& commands, const std::string& title) : commands_(commands) {
    commands_.group(title);
  }
  ~Group() { commands_.endgroup(); }

 private:
  WorkflowCommands& commands_;
};

// The same run as the CLI's plan / prefetch / compile / push / ci: pipeline::run.
pipeline::RunResult run_steps(pipeline::Pipeline& p, const Inputs& in, WorkflowCommands& commands) {
  Group group(commands, "neuron-cache " + in.mode_name + ": " + p.context().repo);
  pipeline::RunSteps steps{runs_prefetch(in.mode), runs_compile(in.mode), runs_push(in.mode), {}};
  return report::counted_run(
      p, steps, [&commands](const plan::Plan& plan) { commands.line(report::plan_text(plan)); });
}

struct Outputs {
  bool cache_hit = false;
  size_t hits = 0;
  size_t misses = 0;
  size_t compiled = 0;
  std::vector<std::string> missing;  // configurations without local artifacts at the end
  std::string report;
};

Outputs outputs_of(const pipeline::RunResult& run) {
  report::Totals t = report::totals(run);
  Outputs out;
  // Without a prefetch (plan, push) a configuration on the Hub counts as a hit: it would be one.
  size_t on_hub = run.prefetch ? 0 : run.initial.count(plan::Status::Store);
  // A configuration reused through optimum-neuron's hub proxy came from the cache too.
  out.hits = t.local + t.store_hits + t.reused + on_hub;
  out.misses = t.configurations - out.hits;
  out.compiled = t.compiled;
  out.cache_hit = out.misses == 0;
  for (const auto& row : run.final.rows) {
    if (row.status != plan::Status::Local) out.missing.push_back(row.target.configuration.name);
  }
  return out;
}

std::string summary_line(const pipeline::RunResult& run, const Outputs& out) {
  report::Totals t = report::totals(run);
  const storage::Kind kind = storage::kind_named(run.initial.store);
  std::string hub =
      run.prefetch
          ? std::to_string(t.store_hits) + " fetched from " + storage::describe(kind)
          : std::to_string(run.initial.count(plan::Status::Store)) + " " + storage::on(kind);
  std::string line =
      count_of(t.configurations, "configuration") + ": " + count_of(out.hits, "hit") + " (" +
      std::to_string(t.local) + " local, " + hub +
      (t.reused ? ", " + std::to_string(t.reused) + " reused through optimum-neuron" : "") + "), " +
      count_of(out.misses, "miss", "misses") + ", " + std::to_string(t.compiled) + " compiled, " +
      std::to_string(t.failed) + " failed";
  if (run.push) line += "; " + report::push_line(run);
  return line;
}

// A report file of its own for each run: several steps of one job share RUNNER_TEMP.
std::string write_report(const json& report) {
  const char* temp = std::getenv("RUNNER_TEMP");
  fs::path dir = temp && *temp ? fs::path(temp) : fs::current_path();
  std::string path = (dir / "neuron-cache-report-XXXXXX.json").string();
  int fd = mkstemps(path.data(), 5);
  if (fd < 0) throw operational_error("cannot create a report file in " + dir.string());
  close(fd);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << config::redact(report.dump(2)) << "\n";
  if (!out) throw operational_error("cannot write the report " + path);
  return path;
}

json action_json(const Inputs& in, const ReadOnly& read_only, const Outputs& out) {
  return {{"mode", in.mode_name},
          {"read_only", read_only.on},
          {"read_only_reason", read_only.why},
          {"strict", in.strict},
          {"fail_on_miss", in.fail_on_miss},
          {"outputs",
           {{"cache-hit", out.cache_hit},
            {"hits", out.hits},
            {"misses", out.misses},
            {"compiled", out.compiled},
            {"missing", out.missing}}}};
}

void write_outputs(const Outputs& out) {
  const char* path = std::getenv("GITHUB_OUTPUT");
  if (!path || !*path) return;  // run by hand: the report has the same values
  std::string text = output_entry("cache-hit", out.cache_hit ? "true" : "false", false) +
                     output_entry("hits", std::to_string(out.hits), false) +
                     output_entry("misses", std::to_string(out.misses), false) +
                     output_entry("compiled", std::to_string(out.compiled), false) +
                     output_entry("missing", json(out.missing).dump(), true) +
                     output_entry("report", out.report, false);
  append_file(path, text);
}

void write_summary(const pipeline::RunResult& run, const Inputs& in, const ReadOnly& read_only) {
  const char* path = std::getenv("GITHUB_STEP_SUMMARY");
  if (!path || !*path) return;
  std::string md = report::run_markdown(run);
  md += "\nMode `" + in.mode_name + "`";
  if (read_only.on) {
    md += "; read-only (" + report::markdown_text(read_only.why) + "): nothing was pushed to " +
          storage::describe(storage::kind_named(run.initial.store));
  }
  append_file(path, md + ".\n");
}

// store-usage: the store's size after the run (`neuron-cache du`), appended to the summary. A
// store that cannot be measured gives a warning line there; it never fails the job.
// The store is opened again by its name, without the run's policies: a failed listing is then an
// error to report, not a miss.
void write_store_usage(const Inputs& in, const pipeline::Pipeline& p,
                       const config::Settings& settings, hub::HubClient& client) {
  const char* path = std::getenv("GITHUB_STEP_SUMMARY");
  if (!in.store_usage || !path || !*path) return;
  std::string md;
  try {
    if (!p.context().store) throw input_error("no cache store was opened for the run");
    std::unique_ptr<storage::Store> store =
        storage::open_store(p.context().repo, "the run's cache store", settings, client);
    md = report::usage_markdown(maintenance::store_usage(*store));
  } catch (const std::exception& error) {
    md = report::usage_markdown_failure(
        p.context().repo.empty() ? "the cache store" : p.context().repo, error.what());
  }
  try {
    append_file(path, md);
  } catch (const std::exception&) {
    // The summary of the run itself was written; its last section is only information.
  }
}

// Mode gc: `neuron-cache gc` on the run's cache store, for a scheduled workflow. What the
// manifest declares is kept however old; a dry run unless gc-apply; read-only (a fork's pull
// request, the read-only input) refuses gc-apply before any request.
int run_gc(const Inputs& in, pipeline::Pipeline& p, const ReadOnly& read_only,
           hub::HubClient& client, WorkflowCommands& commands) {
  const config::Setting& repo = p.context().settings.cache_repo;
  if (repo.value.empty())
    throw input_error("no cache repo: set the cache-repo input or the manifest's cache_repo");
  Group group(commands, "neuron-cache gc: " + p.context().repo);
  maintenance::GcOptions options;
  options.older_than = in.gc_older_than;
  if (in.gc_grace) options.grace = *in.gc_grace;
  if (options.older_than) options.declared = p.declared_keys();
  std::unique_ptr<storage::Store> store = storage::open_store(
      repo.value, "the cache repo from " + repo.origin, p.context().settings, client);
  std::unique_ptr<storage::Store> guarded;
  if (read_only.on) guarded = std::make_unique<storage::ReadOnlyStore>(*store, read_only.why);
  maintenance::GcPlan plan = maintenance::collect_garbage(
      guarded ? *guarded : *store, options, {in.gc_apply, in.gc_squash},
      net::retry_policy(p.context().settings, 6));
  for (const auto& problem : plan.problems) commands.warning(problem);
  json answer = report::gc_json(plan);
  answer["action"] = {{"mode", "gc"}, {"read_only", read_only.on}};
  std::string report_path = write_report(answer);
  if (const char* path = std::getenv("GITHUB_OUTPUT"); path && *path)
    append_file(path, output_entry("report", report_path, false));
  if (const char* path = std::getenv("GITHUB_STEP_SUMMARY"); path && *path)
    append_file(path, report::gc_markdown(plan));
  commands.notice(std::string(plan.applied ? "gc removed " : "gc dry run: would remove ") +
                  std::to_string(plan.removed.size()) + " MODULE folders, " +
                  std::to_string(plan.leases.size()) + " lease files and " +
                  std::to_string(plan.applied ? plan.leftovers_removed : plan.leftovers.size()) +
                  " leftovers of killed writers (" + format::human_bytes(plan.freed.bytes) +
                  ") from " + p.context().repo +
                  (plan.applied ? "" : "; set gc-apply: true to remove them"));
  return 0;
}

// The log tail of each failed compile, folded, and a warning that points to it.
void report_failures(const std::optional<pipeline::CompileStep>& step, WorkflowCommands& commands) {
  if (!step) return;
  for (const auto& o : step->outcomes) {
    if (o.ok) continue;
    if (!o.log_tail.empty()) {
      Group group(commands, "compile " + o.configuration);
      commands.line("last lines of " + o.log_file + ":");
      commands.untrusted(o.log_tail);
    }
    commands.warning("compile of " + o.configuration + " failed: " + o.error +
                     (o.log_file.empty() ? "" : " (log: " + o.log_file + ")"));
  }
}

void report_notices(const pipeline::Pipeline& p, WorkflowCommands& commands) {
  for (const auto& n : p.context().notices)
    n.warning ? commands.warning(n.text) : commands.notice(n.text);
}

void announce_read_only(const ReadOnly& read_only, Mode mode, const storage::Store* store,
                        WorkflowCommands& commands) {
  if (!read_only.on || !(runs_push(mode) || runs_compile(mode))) return;
  if (read_only.fork) {
    commands.notice("pushes are disabled for pull requests from forks (" + read_only.why +
                    "): artifacts are only fetched and compiled locally");
  } else {
    commands.notice("read-only: nothing is pushed to " + storage::describe(store));
  }
}

// fail-on-miss: a hosted runner that cannot compile stops here, naming what is missing.
int gate_on_misses(const Outputs& out, WorkflowCommands& commands) {
  if (out.misses == 0) return 0;
  std::string names;
  for (const auto& name : out.missing) names += (names.empty() ? "" : ", ") + name;
  commands.error("fail-on-miss: " + count_of(out.misses, "configuration") +
                 (out.misses == 1 ? " is" : " are") + " not cached (" + names +
                 "): fill the cache from a job that compiles (mode: all, on a Neuron runner), or "
                 "drop fail-on-miss");
  return kExitGate;
}

// Transfer progress as the CLI prints it off a terminal (report/progress.h, the same meter and
// math): a line every NEURON_CACHE_PROGRESS_INTERVAL_MS (10 s) with bytes, rate and ETA, then a
// final line; never a bar, which a CI log cannot redraw.
report::ProgressDisplay transfer_progress(const config::Settings& settings,
                                          WorkflowCommands& commands) {
  report::ProgressStyle style;
  style.mode = settings.progress ? report::ProgressMode::Lines : report::ProgressMode::Off;
  style.interval = settings.progress_interval();
  return report::ProgressDisplay(style,
                                 [&commands](const std::string& line) { commands.line(line); });
}

int run_action(const std::string& token, const std::string& signing_key,
               WorkflowCommands& commands) {
  Inputs in = read_inputs(token);
  if (in.fail_on_miss && runs_compile(in.mode)) {
    throw input_error(
        "input fail-on-miss is for the plan and prefetch modes (a runner that must "
        "never compile); mode " +
        in.mode_name + " compiles what is missing");
  }
  ReadOnly read_only = resolve_read_only(in.read_only);
  config::Environment env = config::Environment::from_process();
  // The token reaches the Hub client only through this Environment: not argv, not the process
  // environment the compile commands inherit.
  if (!in.token.empty()) env.set("HF_TOKEN", in.token);
  config::SettingOverrides overrides;
  if (!in.cache_repo.empty()) overrides.cache_repo = in.cache_repo;
  if (!in.cache_dir.empty()) overrides.cache_dir = in.cache_dir;
  overrides.trusted_keys = in.trusted_keys;
  overrides.require_signatures = in.require_signatures;
  config::Settings settings = config::Settings::resolve(env, overrides);
  log::enable(settings.debug_log);
  net::use_trust_settings(settings);
  for (const auto& warning : settings.warnings) commands.warning(warning);

  pipeline::Options options;
  options.manifest = in.manifest;
  options.configs = in.configs;
  options.strict = in.strict;
  options.read_only = read_only.on;
  options.jobs = in.jobs;
  options.compiles = runs_compile(in.mode);
  // A matrix of jobs missing the same configurations compiles each once (docs/fleet.md).
  options.leases.enabled = runs_compile(in.mode) && runs_push(in.mode);
  options.leases.wait = in.wait;
  if (in.wait_timeout) options.leases.wait_timeout = std::chrono::seconds(*in.wait_timeout);
  // Pushes sign with the signing-key input (the secret key file's text), else with the file
  // NEURON_CACHE_SIGNING_KEY names.
  options.signs = runs_push(in.mode);
  if (!signing_key.empty() && options.signs)
    options.signing_key = config::signing_key_from_text(signing_key, "the signing-key input");
  settings.detect_compiler(env);
  hub::ClientOptions client_options = hub::HubClient::options_from(settings);
  client_options.audience = hub::Audience::Action;  // advice in the action's words (inputs)
  hub::HubClient client(client_options);
  storage::HubModels models(client);
  pipeline::Pipeline p(settings, {storage::store_opener(client), &models}, options);
  if (in.mode == Mode::Gc) return run_gc(in, p, read_only, client, commands);
  if (in.locked) p.use_lockfile(in.lockfile);
  announce_read_only(read_only, in.mode, p.context().store, commands);
  p.on_progress([&commands](const std::string& line) { commands.line("neuron-cache: " + line); });
  report::ProgressDisplay transfers = transfer_progress(settings, commands);

  pipeline::RunResult result = run_steps(p, in, commands);
  const pipeline::RunResult& run = result;
  Outputs out = outputs_of(run);
  json report = report::run_json(run);
  report["action"] = action_json(in, read_only, out);
  out.report = write_report(report);
  write_summary(run, in, read_only);
  write_store_usage(in, p, settings, client);
  write_outputs(out);

  report_failures(result.compile, commands);
  report_notices(p, commands);
  commands.notice(summary_line(run, out));
  if (result.compile_failed()) return kExitFailed;
  return in.fail_on_miss ? gate_on_misses(out, commands) : 0;
}

// The token first of all: masked before anything could print it, and removed from the
// environment so no child process (the compile command) inherits it under any name.
std::string take_token(WorkflowCommands& commands) {
  std::string token = input("token");
  if (!token.empty()) commands.mask(token);
  unsetenv(env_name("token").c_str());
  return token;
}

// The signing-key input likewise: its text is a secret key file's ("NAME:<base64 seed>"), masked
// whole and by its seed, and gone from the environment before any child process starts.
std::string take_signing_key(WorkflowCommands& commands) {
  std::string text = input("signing-key");
  if (!text.empty()) {
    commands.mask(text);
    if (size_t colon = text.find(':'); colon != std::string::npos)
      commands.mask(trim(text.substr(colon + 1)));
  }
  unsetenv(env_name("signing-key").c_str());
  return text;
}

int main_action(int argc, char** argv) {
  WorkflowCommands commands(std::cout);
  std::string token = take_token(commands);
  std::string signing_key = take_signing_key(commands);
  std::string arg = argc > 1 ? argv[1] : "";
  if (argc == 2 && arg == "--list-inputs") {
    for (const char* name : kInputs) std::cout << name << "\n";
    return 0;
  }
  if (argc == 2 && arg == "--version") {
    std::cout << pipeline::tool_version() << "\n";
    return 0;
  }
  if (argc > 1) {
    commands.error(
        "neuron-cache-action takes its inputs from INPUT_* variables, not arguments "
        "(only --list-inputs and --version)");
    return kExitInput;
  }
  try {
    return run_action(token, signing_key, commands);
  } catch (const Error& error) {
    commands.error(error.what());
    return error.kind() == ErrorKind::Input ? kExitInput : kExitFailed;
  } catch (const std::exception& error) {
    commands.error(error.what());
    return kExitFailed;
  }
}

}  // namespace
}  // namespace neuron_cache::action

int main(int argc, char** argv) {
  neuron_cache::sys::report_interrupts("neuron-cache-action", neuron_cache::sys::kInterruptedLine);
  neuron_cache::sys::survive_file_size_limit();
  return neuron_cache::action::main_action(argc, argv);
}
