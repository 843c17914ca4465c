#include "neuron_cache/pipeline/pipeline.h"

#include <chrono>

#include "neuron_cache/error.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/version.h"

namespace neuron_cache::pipeline {
namespace {

namespace ai = artifact_index;

}  // namespace

std::string tool_version() {
  return std::string("neuron-cache ") + kVersion;
}

PrefetchStep& operator+=(PrefetchStep& into, const PrefetchStep& later) {
  into.result += later.result;
  into.hits += later.hits;
  into.seconds += later.seconds;
  return into;
}

PushStep& operator+=(PushStep& into, const PushStep& later) {
  if (later.attempted) {
    if (!into.attempted || !later.skipped_reason.empty())
      into.skipped_reason = later.skipped_reason;
    into.attempted = true;
  } else if (!into.attempted && !later.skipped_reason.empty()) {
    into.skipped_reason = later.skipped_reason;
  }
  into.result += later.result;
  into.seconds += later.seconds;
  return into;
}

size_t CompileStep::failed() const {
  size_t n = 0;
  for (const auto& outcome : outcomes) n += outcome.ok ? 0 : 1;
  return n;
}

Pipeline::Pipeline(const config::Settings& settings, Remotes remotes, Options options)
    : run_(settings, std::move(remotes), std::move(options)),
      locked_(run_),
      planner_(run_, locked_),
      compiler_(run_),
      publisher_(run_),
      leases_(run_, compiler_, publisher_, [this](plan::Plan& plan) { return prefetch(plan); }) {}

Pipeline::~Pipeline() = default;

namespace {

// The configurations complete locally (found so, or just fetched) are in use: cleanup --max-size
// keeps their folders longest.
void record_local_use(const std::filesystem::path& root, const plan::Plan& plan,
                      local::InUse& in_use) {
  std::vector<local::EntryName> used;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local || !row.entry) continue;
    for (const auto& module : row.entry->modules) {
      used.emplace_back(row.entry->compiler_dir(), module.name);
    }
  }
  local::record_use(root, used);
  in_use.add(used);  // and no cleanup evicts them while this run lives
}

}  // namespace

PrefetchStep Pipeline::prefetch(plan::Plan& plan) {
  auto start = std::chrono::steady_clock::now();
  PrefetchStep step;
  try {
    // Watching from before the entries land: the first compile then seeds only those.
    if (run_.manifest.compile) compiler_.seed_views();
  } catch (const Error&) {
    // The compile step reports it, if it has anything to compile.
  }
  std::vector<ai::Entry> entries;
  for (const auto& row : plan.rows) {
    if (row.status == plan::Status::Store && row.entry) entries.push_back(*row.entry);
    // Complete locally through the Hub's entry only (fetched by an older run or by
    // optimum-neuron): record it, so later runs know it without the Hub.
    if (row.status == plan::Status::Local && row.entry && !row.recorded) {
      run_.local_index->write(*row.entry);
    }
  }
  if (entries.empty() || !run_.store || !run_.remote) {
    record_local_use(run_.root, plan, in_use_);
    step.seconds = seconds_since(start);
    return step;
  }
  run_.progress("prefetching " + count_of(entries.size(), "configuration") + " from " + run_.repo);
  try {
    step.result =
        transfer::prefetch(*run_.store, run_.remote->revision(), *run_.local_index, entries,
                           [this](const std::string& line) { run_.progress(line); });
  } catch (const Error& error) {
    rethrow_local_disk(error);
    run_.cache_problem(std::string("prefetch from ") + run_.repo + " failed: " + error.what(),
                       "the configurations will be compiled");
    for (const auto& entry : entries)
      step.result.failed.emplace(entry.key, run_.brief(error.what()));
  }
  if (run_.lock && !step.result.failed.empty())
    locked_.refetch_locked_at_head(entries, step.result);
  for (auto& row : plan.rows) {
    if (row.status != plan::Status::Store) continue;
    if (auto it = step.result.failed.find(row.target.key); it != step.result.failed.end()) {
      run_.cache_problem("could not fetch " + row.target.configuration.name + ": " + it->second,
                         "it will be compiled");
      row.status = plan::Status::Compile;
      row.reason =
          "fetching from " + storage::describe(run_.store) + " failed: " + run_.brief(it->second);
      log_decision(row);
      continue;
    }
    row.status = plan::Status::Local;
    ++step.hits;
  }
  record_local_use(run_.root, plan, in_use_);
  run_.report_misses();
  step.seconds = seconds_since(start);
  return step;
}

CompileStep Pipeline::compile(plan::Plan& plan) {
  return compiler_.compile(plan, &leases_);
}

PushStep Pipeline::push(const plan::Plan& plan) {
  PushStep step = leases_.push(plan);
  // In the order they happened: the last commit is the store's head.
  PushStep all;
  for (const PushStep& early : leases_.early_pushes()) all += early;
  all += step;
  return all;
}

PushStep Pipeline::push_modules(const std::vector<std::string>& modules) {
  return publisher_.push_modules(modules);
}

std::map<std::string, std::string> Pipeline::export_artifacts(const plan::Plan& plan,
                                                              const std::filesystem::path& dir) {
  return publisher_.export_artifacts(plan, dir);
}

WrappedRun Pipeline::run_wrapped(const plan::Target* target, const std::vector<std::string>& argv) {
  return compiler_.run_wrapped(target, argv);
}

std::vector<plan::Target> Pipeline::targets() {
  return planner_.targets();
}

std::set<std::string> Pipeline::declared_keys() {
  return planner_.declared_keys();
}

plan::Target Pipeline::profile_target(const std::string& name) {
  return planner_.profile_target(name);
}

plan::Plan Pipeline::make_plan() {
  return planner_.make_plan();
}

plan::Plan Pipeline::make_plan(const std::vector<plan::Target>& targets) {
  return planner_.make_plan(targets);
}

plan::Plan Pipeline::plan_run(const plan::Target& target) {
  return planner_.plan_run(target);
}

LockStep Pipeline::lock(const plan::Plan& plan) {
  return locked_.lock(plan);
}

VerifyStep Pipeline::verify(const plan::Plan& plan) {
  return verify_entries(run_, plan);
}

void Pipeline::use_lockfile(const std::string& given) {
  locked_.use_lockfile(given);
}

}  // namespace neuron_cache::pipeline
