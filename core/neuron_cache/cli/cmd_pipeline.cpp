// The main job's commands: plan, prefetch, compile, push, ci and run. Each one is a thin shell
// over the library: options in, pipeline::run (or `run`'s steps), text or JSON out.
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/bundle.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/report/stats.h"
#include "neuron_cache/storage/folder_store.h"
#include "neuron_cache/sys/duration.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::cli {
namespace {

namespace fs = std::filesystem;

struct Args {
  std::string manifest;
  std::vector<std::string> configs;
  pipeline::Options options;
  bool json = false;
  bool files = false;         // plan --files
  bool fail_on_miss = false;  // plan --fail-on-miss
  bool locked = false;        // prefetch --locked
  std::string lockfile;       // prefetch --lockfile
  std::string from_bundle;    // prefetch --from-bundle
  bool quiet = false;
  bool progress = false;  // --progress: progress lines even with --quiet or --json
  std::string report_file;
  std::string summary_file;
  std::string export_dir;
  std::vector<std::string> command;    // run -- CMD ARGS
  std::optional<std::string> profile;  // run --profile NAME
};

void add_common(CLI::App* cmd, Context& context, const std::shared_ptr<Args>& args,
                bool manifest_positional) {
  if (manifest_positional) {
    cmd->add_option("manifest", args->manifest,
                    "The manifest: neuron-cache.yaml, or an inference-cache-config JSON file")
        ->required();
  }
  cmd->add_option("--config", args->configs, "Only this configuration (repeat for several)")
      ->allow_extra_args(false);
  add_repo_option(cmd, context, "the manifest's cache_repo, CUSTOM_CACHE_REPO, the saved one");
  add_cache_dir_option(cmd, context,
                       "NEURON_CC_FLAGS --cache_dir, NEURON_COMPILE_CACHE_URL, the manifest's "
                       "cache_dir, /var/tmp/neuron-compile-cache");
  cmd->add_flag(
      "--strict", args->options.strict,
      "Fail on cache problems (store down, no access) instead of compiling or skipping the push");
  add_trust_options(cmd, context);
  cmd->add_flag("--quiet", args->quiet, "Print nothing but warnings and errors");
  cmd->add_flag("--progress", args->progress,
                "Print progress lines on stderr (transfers, each compile's start, heartbeat and "
                "end) even with --quiet or --json: for a wrapper that shows stderr as it comes");
}

void add_locked_options(CLI::App* cmd, const std::shared_ptr<Args>& args) {
  cmd->add_flag("--locked", args->locked,
                "Exactly the files neuron-cache.lock (beside the manifest) names, verified by "
                "sha256, without reading the store's index or registry: see `lock`");
  cmd->add_option("--lockfile", args->lockfile,
                  "With --locked: the lockfile, when it is not beside the manifest");
}

void add_export_option(CLI::App* cmd, const std::shared_ptr<Args>& args) {
  cmd->add_option("--export-dir", args->export_dir,
                  "Afterwards, give each configuration complete locally a folder DIR/<name> "
                  "(symlinks to its NEFFs; use it as NEURON_COMPILE_CACHE_URL)");
}

// Compile leases (remote/leases.h): `ci` pushes what it compiles, so the machines sharing the
// store can wait for each other's compiles.
void add_lease_options(CLI::App* cmd, const std::shared_ptr<Args>& args) {
  args->options.leases.enabled = true;
  cmd->add_flag_function(
      "--no-wait", [args](int64_t) { args->options.leases.wait = false; },
      "Compile a missing configuration even when another machine is compiling it (by default "
      "this one waits for that machine's push and fetches it)");
  cmd->add_option_function<int64_t>(
         "--wait-timeout",
         [args](int64_t seconds) {
           args->options.leases.wait_timeout = std::chrono::seconds(seconds);
         },
         "Wait at most this many seconds for another machine's compile, then compile here "
         "(default: that machine's expected compile time plus a margin, else an hour)")
      ->check(CLI::Range(int64_t{0}, int64_t{7} * 24 * 3600));
}

void add_compile_options(CLI::App* cmd, const std::shared_ptr<Args>& args) {
  args->options.compiles = true;
  cmd->add_option("--jobs,-j", args->options.jobs, "Compile this many configurations at once")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--output-dir", args->options.output_dir,
                  "Where compile outputs ({output}) and logs go (default: neuron-cache-output)");
}

std::unique_ptr<pipeline::Pipeline> open(Context& context, Args& args) {
  args.options.manifest = args.manifest;
  args.options.configs = args.configs;
  auto pipeline = context.open_pipeline(args.options, (args.quiet || args.json) && !args.progress);
  if (args.locked || !args.lockfile.empty()) pipeline->use_lockfile(args.lockfile);
  return pipeline;
}

void print_compile_failures(const pipeline::CompileStep& step) {
  for (const auto& o : step.outcomes) {
    if (o.ok) continue;
    std::cerr << "neuron-cache: compile of " << o.configuration
              << " failed: " << config::redact(o.error) << "\n";
    if (!o.log_tail.empty()) {
      std::cerr << "---- last lines of " << o.log_file << " ----\n" << config::redact(o.log_tail);
      if (!o.log_tail.ends_with("\n")) std::cerr << "\n";
      std::cerr << "----\n";
    }
  }
}

void fail_if_compile_failed(const pipeline::CompileStep& step) {
  if (size_t failed = step.failed()) {
    throw operational_error(
        std::to_string(failed) + " of " + std::to_string(step.outcomes.size()) +
        " compiles failed (see above); nothing of theirs was recorded or pushed");
  }
}

// The summary of a prefetch, then one line per configuration it could not install.
std::string prefetch_line(const pipeline::PrefetchStep& step, const plan::Plan& before) {
  const auto& r = step.result;
  std::string text = "prefetched " + count_of(step.hits, "configuration") + ": " +
                     count_of(r.modules_installed, "MODULE folder") + " installed, " +
                     std::to_string(r.modules_present) + " already present, " +
                     report::human_bytes(r.bytes_downloaded) + " downloaded in " +
                     count_of(r.files_downloaded, "file");
  if (r.files_reused > 0) {
    text += ", " + count_of(r.files_reused, "file") + " (" + report::human_bytes(r.bytes_reused) +
            ") reused from an interrupted prefetch";
  }
  if (r.files_resumed > 0) {
    text += ", " + report::human_bytes(r.bytes_resumed) + " of " +
            count_of(r.files_resumed, "partly downloaded file") + " resumed";
  }
  if (r.staging_reclaimed > 0) {
    text += ", " + count_of(r.staging_reclaimed, "abandoned staging folder") + " deleted";
  }
  if (r.failed.empty()) return text;
  text += "\n" + count_of(r.failed.size(), "configuration") + " " +
          storage::on(storage::kind_named(before.store)) +
          (r.failed.size() == 1 ? " was" : " were") + " NOT installed:";
  for (const auto& row : before.rows) {
    auto it = r.failed.find(row.target.key);
    if (it != r.failed.end()) text += "\n  " + row.target.configuration.name + ": " + it->second;
  }
  return text;
}

void write_file(const std::string& path, const std::string& content) {
  if (path.empty()) return;
  try {
    // 0644 whatever the umask; reports quote logs and messages: no token in them.
    sys::write_whole_file(path, config::redact(content));
  } catch (const Error& e) {
    throw operational_error(std::string(e.what()) + ": check the folder exists and is writable");
  }
}

// The steps a command runs after the plan, and its export folder.
pipeline::RunSteps steps_of(bool prefetch, bool compile, bool push, const Args& args) {
  return {prefetch, compile, push, args.export_dir};
}

// plan --fail-on-miss: a runner that must never compile (no Neuron device, no time) stops here,
// naming what would compile; a store that could not be read counts, as it would at run time.
void fail_if_any_would_compile(const plan::Plan& plan) {
  std::vector<std::string> names;
  for (const auto& row : plan.rows) {
    if (plan::runs_compile(row.status)) names.push_back(row.target.configuration.name);
  }
  if (names.empty()) return;
  std::string list;
  for (size_t i = 0; i < names.size() && i < 10; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 10) list += ", ... (" + std::to_string(names.size()) + " in all)";
  throw GateFailed{"--fail-on-miss: " + std::to_string(names.size()) + " of " +
                   std::to_string(plan.rows.size()) +
                   " configurations are not cached and would run the compile command: " + list +
                   ". Fill the cache on a runner that can compile (neuron-cache ci), or "
                   "drop --fail-on-miss"};
}

void run_plan(Context& context, Args& args) {
  auto p = open(context, args);
  pipeline::RunResult result = pipeline::run(*p, steps_of(false, false, false, args));
  if (args.json) {
    nlohmann::json out = report::plan_json(result.initial);
    if (args.files)
      report::add_files(out, result.initial, *p->context().local_index, p->context().store);
    out["hub_requests"] = p->context().store_requests();
    print_json(out);
  } else if (!args.quiet) {  // --quiet: the exit status (--fail-on-miss) and warnings only
    std::cout << report::plan_text(result.initial);
  }
  if (args.fail_on_miss) fail_if_any_would_compile(result.initial);
}

// The `missing` configurations a prefetch left to compile: "not cached" only when the store was
// read.
std::string not_fetched_line(size_t missing, const std::string& hub_problem) {
  bool one = missing == 1;
  std::string what = count_of(missing, "configuration") + (one ? " is" : " are");
  if (hub_problem.empty())
    return what + " not cached and must be compiled (see `neuron-cache plan`)\n";
  return what + " not complete locally, and the cache store was not checked (" + hub_problem +
         "): a run that can read the store may find " + (one ? "it" : "them") + "\n";
}

// The configurations still missing after a prefetch. Unkeyed ones apart: no store can find them
// until their model is read (the plan's warning said how).
std::string missing_line(const plan::Plan& plan) {
  size_t missing = 0, unkeyed = 0;
  for (const auto& row : plan.rows) {
    if (plan::runs_compile(row.status)) ++(row.target.unkeyed.empty() ? missing : unkeyed);
  }
  std::string text = missing > 0 ? not_fetched_line(missing, plan.hub_problem) : "";
  if (unkeyed > 0) {
    text += count_of(unkeyed, "configuration") + (unkeyed == 1 ? " has" : " have") +
            " no cache key and " + (unkeyed == 1 ? "was" : "were") +
            " not looked up (see the warning above)\n";
  }
  return text;
}

// A folder that holds a bundle's files while a locked prefetch reads them, removed at the end.
class Unpacked {
 public:
  explicit Unpacked(const std::string& bundle_file) {
    std::string pattern = (fs::temp_directory_path() / "neuron-cache-bundle-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw operational_error("cannot make a scratch folder in " +
                              fs::temp_directory_path().string() + " (set TMPDIR)");
    dir_ = pattern;
    try {
      storage::create_folder_store(dir_);
      lock_text_ = bundle::extract(bundle_file, dir_);
      sys::write_whole_file(dir_ / ".bundle.lock", lock_text_);
    } catch (...) {
      remove();  // a refused bundle leaves nothing in TMPDIR either
      throw;
    }
  }
  ~Unpacked() { remove(); }
  fs::path lockfile() const { return dir_ / ".bundle.lock"; }
  std::string store() const { return "file://" + dir_.string(); }

 private:
  void remove() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  std::string lock_text_;
};

void run_prefetch(Context& context, Args& args) {
  std::optional<Unpacked> unpacked;
  if (!args.from_bundle.empty()) {
    // The bundle's own lock and files: a shared folder as the store, nothing else is asked.
    unpacked.emplace(args.from_bundle);
    context.overrides().cache_repo = unpacked->store();
    args.lockfile = unpacked->lockfile().string();
  }
  auto p = open(context, args);
  pipeline::RunResult result = report::counted_run(*p, steps_of(true, false, false, args));
  if (args.json) {
    print_json(report::run_json(result));
  } else if (!args.quiet) {
    std::cout << prefetch_line(*result.prefetch, result.initial) << "\n"
              << missing_line(result.final);
  }
}

// "compiled 1 of 3 missing configurations in 2 min (1 reused from the Hub through
// optimum-neuron)": a configuration whose command compiled nothing is not called compiled.
std::string compiled_line(const pipeline::CompileStep& step) {
  size_t compiled = 0, reused = 0;
  for (const auto& o : step.outcomes) {
    if (o.ok) ++(o.reused.empty() ? compiled : reused);
  }
  std::string line = "compiled " + std::to_string(compiled) + " of " +
                     std::to_string(step.outcomes.size()) + " missing configurations in " +
                     sys::duration_text(step.seconds);
  if (reused)
    line += " (" + std::to_string(reused) + " reused from the Hub through optimum-neuron)";
  return line;
}

void run_compile(Context& context, Args& args) {
  auto p = open(context, args);
  pipeline::RunResult result = report::counted_run(*p, steps_of(true, true, false, args));
  const pipeline::PrefetchStep& fetched = *result.prefetch;
  if (args.json) {
    print_json(report::run_json(result));
  } else if (!args.quiet) {
    if (fetched.hits || !fetched.result.failed.empty())
      std::cout << prefetch_line(fetched, result.initial) << "\n";
    std::cout << compiled_line(*result.compile) << "\n";
  }
  print_compile_failures(*result.compile);
  fail_if_compile_failed(*result.compile);
}

void run_push(Context& context, Args& args) {
  auto p = open(context, args);
  pipeline::RunResult result = report::counted_run(*p, steps_of(false, false, true, args));
  if (args.json) {
    print_json(report::run_json(result));
  } else if (!args.quiet || !result.push->attempted) {
    std::cout << report::push_line(result) << "\n";
  }
}

void run_ci(Context& context, Args& args) {
  auto p = open(context, args);
  auto show_plan = [&args](const plan::Plan& plan) {
    if (!args.quiet && !args.json) std::cout << report::plan_text(plan) << "\n";
  };
  pipeline::RunResult result = report::counted_run(*p, steps_of(true, true, true, args), show_plan);
  const pipeline::RunResult& run = result;
  // Built only when asked for: for many configurations they cost milliseconds.
  if (!args.report_file.empty()) write_file(args.report_file, report::run_json(run).dump(2) + "\n");
  if (!args.summary_file.empty()) write_file(args.summary_file, report::run_markdown(run));
  if (args.json) {
    print_json(report::run_json(run));
  } else if (!args.quiet) {
    report::Totals t = report::totals(run);
    std::cout << prefetch_line(*result.prefetch, result.initial) << "\n"
              << compiled_line(*result.compile) << "\n"
              << report::lease_line(*result.compile) << report::push_line(result) << "\n"
              << "done in " << sys::duration_text(result.seconds) << ": " << t.local << " local, "
              << t.store_hits << " from "
              << storage::describe(storage::kind_named(result.initial.store)) << ", "
              << (t.reused ? std::to_string(t.reused) + " reused through optimum-neuron, " : "")
              << t.compiled << " compiled, " << t.failed
              << " failed; compile time saved: " << sys::duration_text(t.compile_seconds_saved)
              << "\n";
  }
  print_compile_failures(*result.compile);
  fail_if_compile_failed(*result.compile);
}

// What `run` records its graphs under: "profile NAME" or "configuration NAME".
std::string run_owner(const Args& args) {
  return args.profile ? "profile " + *args.profile : "configuration " + args.configs.front();
}

void check_run_args(const Args& args) {
  if (args.command.empty()) throw input_error("nothing to run: give the command after --");
  if (!args.configs.empty() && args.manifest.empty()) {
    throw input_error("--config needs --manifest: the configuration is declared there");
  }
  if (args.configs.size() > 1) throw input_error("run takes one --config");
  if (args.profile && !args.configs.empty()) {
    throw input_error(
        "run takes --config or --profile, not both: --config records the run under a "
        "configuration the manifest declares, --profile under a name of your own");
  }
  if (args.profile && args.profile->empty()) {
    throw input_error(
        "--profile needs a name: e.g. --profile llama-train (letters, digits, '.', '_', '-')");
  }
}

void say(const std::string& line) {
  std::cerr << "neuron-cache: " << line << "\n";
}

// Before the command: what the Hub has for the target, fetched into the cache.
void prefetch_for_run(pipeline::Pipeline& p, const plan::Target& target, const Args& args) {
  plan::Plan plan = p.plan_run(target);
  plan::Plan before = plan;
  pipeline::PrefetchStep fetched = p.prefetch(plan);
  const plan::PlanRow& row = before.rows.front();
  if (args.quiet) return;
  if (row.status != plan::Status::Store) {
    say(run_owner(args) + ": " + row.reason);
  } else if (fetched.hits) {
    const auto& r = fetched.result;
    say("prefetched " + run_owner(args) + ": " + std::to_string(r.modules_installed) +
        " MODULE folders installed, " + std::to_string(r.modules_present) + " already present, " +
        report::human_bytes(r.bytes_downloaded) + " downloaded in " +
        std::to_string(r.files_downloaded) + " files");
  }  // a failed prefetch was reported as a warning: the command compiles what it needs
}

// After the command: the entry written for the target, or why none was.
void report_recorded(const pipeline::WrappedRun& ran, const Args& args) {
  if (ran.recorded) {
    say("recorded " + run_owner(args) + ": " + std::to_string(ran.modules_recorded) +
        " compiled graphs (" + std::to_string(ran.modules_added) + " new)");
  } else if (ran.all_cached_before) {
    if (!args.quiet) {
      say("nothing new to record: every graph of " + run_owner(args) + " was already cached");
    }
  } else if (!ran.not_recorded.empty()) {
    warn("nothing recorded for " + run_owner(args) + ": " + ran.not_recorded);
  }
}

void run_wrapped(Context& context, Args& args) {
  check_run_args(args);
  std::unique_ptr<pipeline::Pipeline> p = open(context, args);
  std::optional<plan::Target> target;
  if (args.profile) target = p->profile_target(*args.profile);
  if (!args.configs.empty()) target = p->targets().front();
  if (target) prefetch_for_run(*p, *target, args);
  pipeline::WrappedRun ran = p->run_wrapped(target ? &*target : nullptr, args.command);
  say(std::string("the command ") + (ran.exit_code == 0 ? "succeeded" : "failed") +
      "; it compiled " + std::to_string(ran.produced.size()) + " new graphs and reused " +
      std::to_string(ran.used));
  if (ran.exit_code == 0 && target) {
    report_recorded(ran, args);
    plan::Plan after = p->make_plan(std::vector<plan::Target>{*target});
    say(report::run_push_line(p->push(after), p->context().store, run_owner(args)));
  } else if (ran.exit_code == 0) {
    if (!ran.produced.empty()) {
      warn(
          "nothing records these compiled graphs for prefetching: a run on another machine "
          "compiles them again; give the run a name with --profile NAME (e.g. --profile "
          "my-training) to record, prefetch and push them");
    }
    say(report::modules_push_line(p->push_modules(ran.produced), p->context().store));
  }
  if (!ran.error.empty()) throw operational_error(ran.error);
  if (ran.exit_code != 0) throw CommandExit{ran.exit_code > 0 ? ran.exit_code : 1};
}

}  // namespace

void register_pipeline(CLI::App& app, Context& context) {
  auto plan_args = std::make_shared<Args>();
  CLI::App* plan = app.add_subcommand(
      "plan",
      "For each declared configuration: complete locally, in the cache store (the Hub, S3 or a "
      "shared folder), or to compile (and why)");
  add_common(plan, context, plan_args, true);
  plan->add_flag("--json", plan_args->json, "Print JSON for scripts");
  plan->add_flag("--files", plan_args->files,
                 "With --json: each cached configuration's files, sizes, sha256 and download "
                 "URLs (file://, or the Hub's at the commit read; none for S3)")
      ->needs("--json");
  plan->add_flag("--fail-on-miss", plan_args->fail_on_miss,
                 "Exit 3 (after printing the plan) when any configuration would be compiled: a "
                 "gate for runners that must never compile");
  plan->callback([&context, plan_args] { run_plan(context, *plan_args); });

  auto prefetch_args = std::make_shared<Args>();
  CLI::App* prefetch = app.add_subcommand(
      "prefetch",
      "Download the cache store's artifacts of the declared configurations into the local cache");
  add_common(prefetch, context, prefetch_args, true);
  prefetch->add_flag("--json", prefetch_args->json, "Print JSON for scripts");
  add_export_option(prefetch, prefetch_args);
  add_locked_options(prefetch, prefetch_args);
  prefetch
      ->add_option("--from-bundle", prefetch_args->from_bundle,
                   "Install from a bundle (`neuron-cache bundle`): its lockfile and files, "
                   "verified, with no network")
      ->excludes("--repo");
  prefetch->callback([&context, prefetch_args] { run_prefetch(context, *prefetch_args); });

  auto compile_args = std::make_shared<Args>();
  CLI::App* compile = app.add_subcommand(
      "compile",
      "Compile the declared configurations that no cache has (after prefetching the others)");
  add_common(compile, context, compile_args, true);
  add_compile_options(compile, compile_args);
  compile->add_flag("--json", compile_args->json, "Print JSON for scripts");
  add_export_option(compile, compile_args);
  compile->callback([&context, compile_args] { run_compile(context, *compile_args); });

  auto push_args = std::make_shared<Args>();
  CLI::App* push = app.add_subcommand(
      "push",
      "Upload the locally compiled configurations the cache store lacks (on the Hub: in one "
      "commit)");
  add_common(push, context, push_args, true);
  push->add_flag("--json", push_args->json, "Print JSON for scripts");
  push_args->options.signs = true;
  push->callback([&context, push_args] { run_push(context, *push_args); });

  auto ci_args = std::make_shared<Args>();
  CLI::App* ci =
      app.add_subcommand("ci", "plan, prefetch, compile what is missing and push, in one step");
  add_common(ci, context, ci_args, true);
  add_compile_options(ci, ci_args);
  ci->add_flag("--read-only", ci_args->options.read_only,
               "Never write to the cache store (the Hub, S3 or the shared folder)");
  ci->add_option("--report", ci_args->report_file, "Write the JSON report here");
  ci->add_option("--summary", ci_args->summary_file, "Write the Markdown summary here");
  ci->add_flag("--json", ci_args->json, "Print the JSON report on stdout");
  add_lease_options(ci, ci_args);
  ci_args->options.signs = true;
  add_export_option(ci, ci_args);
  add_locked_options(ci, ci_args);
  ci->callback([&context, ci_args] { run_ci(context, *ci_args); });

  auto run_args = std::make_shared<Args>();
  CLI::App* run = app.add_subcommand(
      "run",
      "Run a command (a training run, a custom loop) with the cache, then push what it compiled");
  run->add_option("--manifest", run_args->manifest,
                  "The manifest declaring the cache repo and compiler");
  run->add_option_function<std::string>(
      "--profile", [run_args](const std::string& name) { run_args->profile = name; },
      "Record the MODULE folders the run produced or used under this name (a "
      "training run, a custom loop): the next run with it prefetches them, and "
      "what a run adds is pushed");
  add_common(run, context, run_args, false);
  run_args->options.compiles = true;  // the command it wraps compiles
  run->add_flag("--read-only", run_args->options.read_only,
                "Never write to the cache store (the Hub, S3 or the shared folder)");
  run->add_option("--output-dir", run_args->options.output_dir, "Where the run's log goes");
  run_args->options.signs = true;
  run->add_option("command", run_args->command, "The command and its arguments, after --")
      ->required();
  run->callback([&context, run_args] { run_wrapped(context, *run_args); });
}

}  // namespace neuron_cache::cli
