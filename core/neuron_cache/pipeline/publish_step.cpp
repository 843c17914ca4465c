#include "neuron_cache/pipeline/publish_step.h"

#include <algorithm>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/export_dir.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/pipeline/hub_keys.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::pipeline {

namespace ai = artifact_index;

std::string Publisher::why_not_push(bool nothing_new) {
  if (run_.options.read_only)
    return "--read-only: nothing is written to " + storage::describe(run_.store);
  if (run_.repo.empty()) return "no cache repo is set";
  if (!run_.store)
    return run_.remotes.open_store ? "the cache store could not be opened" : "offline";
  if (run_.store->offline()) return "offline";
  if (!run_.store->unreachable().empty()) {
    return run_.brief(run_.store->unreachable()) +
           ": nothing was pushed; what was compiled stays in the local cache and the next run "
           "with " +
           storage::describe(run_.store->kind()) + " pushes it";
  }
  if (!run_.hub_slow.empty() && run_.compiled_here == size_t{0}) {
    return "the Hub did not answer in time (see the warning above) and nothing was compiled "
           "here: nothing is pushed; a later run pushes what this cache has";
  }
  if (nothing_new) return "nothing new to push";
  return "";
}

std::string Publisher::read_only_token() {
  // Asked once, before any write request: a read token would only collect 403s.
  std::string cannot = run_.store->why_not_writable();
  if (cannot.empty()) return "";
  std::string why = cannot + " (or pass --read-only to `ci` or `run` to not push on purpose)";
  // One message: the push line (and the report) carry it; --strict makes it an error.
  if (run_.options.strict)
    run_.cache_problem("push to " + run_.repo + " failed: " + why, "skipping the push");
  return why;
}

bool Publisher::owes_push(const plan::Plan& plan) const {
  if (run_.compiled_here) return *run_.compiled_here > 0;
  return std::any_of(plan.rows.begin(), plan.rows.end(), [](const plan::PlanRow& row) {
    return row.status == plan::Status::Local && row.entry;
  });
}

void Publisher::refuse_skip_when_strict(bool owed, const std::string& reason) {
  if (!owed || !run_.options.strict || run_.options.read_only || reason.empty()) return;
  run_.cache_problem("push to " + (run_.repo.empty() ? std::string("the cache store") : run_.repo) +
                         " skipped: " + reason,
                     "skipping the push");
}

// The push memo's id of a stored entry: a signing push remembers what its key signed.
std::string Publisher::contents_id(const ai::Entry& entry) const {
  std::string id = ai::contents_id(entry);
  return run_.signer ? id + " signed by " + run_.signer->name() : id;
}

std::vector<std::string> Publisher::covered_on_hub(const std::vector<const plan::PlanRow*>& rows) {
  if (!run_.remote) return {};
  std::vector<const plan::Target*> targets;
  for (const plan::PlanRow* row : rows) targets.push_back(&row->target);
  try {
    // A plan whose entries were all complete locally did not read the Hub's index.
    run_.remote->load(plan::shards_of(targets));
  } catch (const Error&) {
    return {};  // unknown: every one is offered to push, which reads the index again
  }
  std::vector<std::string> found;
  for (const plan::PlanRow* row : rows) {
    const ai::Entry* hub = run_.remote->find(row->target.inputs.compiler_version, row->target.key);
    if (hub && transfer::already_stored(*hub, *row->entry, run_.signer.get()))
      found.push_back(contents_id(*row->entry));
  }
  return found;
}

void Publisher::remember_stored(const std::vector<ai::Entry>& entries,
                                const transfer::PushResult& result) {
  std::set<std::string> keys(result.pushed.begin(), result.pushed.end());
  keys.insert(result.already_stored.begin(), result.already_stored.end());
  for (const auto& entry : entries)
    if (keys.count(entry.key)) stored_this_run_.insert(contents_id(entry));
}

std::vector<ai::Entry> Publisher::not_on_hub(const plan::Plan& plan) {
  std::vector<const plan::PlanRow*> local;
  std::vector<std::string> ids;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local || !row.entry) continue;
    if (stored_this_run_.count(contents_id(*row.entry))) continue;
    local.push_back(&row);
    ids.push_back(contents_id(*row.entry));
  }
  // Remembered by contents, not by key: an entry that grew since is offered again.
  HubKeys on_hub(run_.memo_folder().child("on-hub.json"), run_.repo,
                 run_.remote ? run_.remote->revision() : "");
  if (on_hub.has_all(ids)) {  // a warm run: nothing new, and no shard read
    log::debug("decide", "push: every local entry was on " + run_.repo + " at its last push");
    return {};
  }
  std::vector<std::string> found = covered_on_hub(local);
  on_hub.remember(found);
  std::set<std::string> there(found.begin(), found.end());
  std::vector<ai::Entry> entries;
  for (const plan::PlanRow* row : local) {
    if (there.count(contents_id(*row->entry))) {
      log::debug("decide", "push: " + row->target.configuration.name + " is on " + run_.repo +
                               " already, with every file this cache has");
      continue;
    }
    log::debug("decide", "push: " + row->target.configuration.name + " is offered to " + run_.repo);
    if (auto entry = run_.local_index->find(row->target.inputs.compiler_version, row->target.key))
      entries.push_back(*entry);
  }
  return entries;
}

PushStep Publisher::push(const plan::Plan& plan, const transfer::AlsoCommit& also) {
  auto start = std::chrono::steady_clock::now();
  PushStep step;
  for (const auto& row : plan.rows) {
    // The plan's warning about configurations without a key said they are not pushed.
    if (!row.target.unkeyed.empty())
      log::debug("decide", "not pushed: " + row.target.configuration.name + ": no cache key");
  }
  step.skipped_reason = why_not_push(false);
  refuse_skip_when_strict(owes_push(plan), step.skipped_reason);
  std::vector<ai::Entry> entries;
  if (step.skipped_reason.empty()) {
    entries = not_on_hub(plan);
    if (entries.empty()) step.skipped_reason = why_not_push(true);
  }
  if (step.skipped_reason.empty()) step.skipped_reason = read_only_token();
  if (!step.skipped_reason.empty()) {
    log::debug("decide", "push skipped: " + step.skipped_reason);
    step.seconds = seconds_since(start);
    return step;
  }
  step.attempted = true;
  run_.progress("pushing " + std::to_string(entries.size()) + " configurations to " + run_.repo);
  try {
    transfer::PushOptions options = run_.options.push;
    options.signer = run_.signer.get();
    step.result = transfer::push(*run_.writer, *run_.local_index, entries, options, also);
    remember_stored(entries, step.result);
    for (const auto& [key, why] : step.result.replaced) run_.note(true, key + ": " + why);
    for (const auto& [key, why] : step.result.skipped)
      run_.note(true, "not pushed: " + key + ": " + why);
    for (const auto& repair : step.result.repaired) run_.note(true, repair);
    if (!step.result.commit.landed_unanswered.empty())
      run_.note(false, step.result.commit.landed_unanswered);
    if (size_t aborted = step.result.commit.uploads_aborted; aborted > 0) {
      run_.note(false, "aborted " + count_of(aborted, "multipart upload") +
                           " abandoned more than a day ago in " + run_.repo);
    }
    for (const auto& warning : step.result.commit.warnings) run_.note(true, warning);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    step.skipped_reason = error.what();
    run_.cache_problem(std::string("push to ") + run_.repo + " failed: " + error.what(),
                       "the compiled artifacts stay in the local cache only");
  }
  step.seconds = seconds_since(start);
  return step;
}

PushStep Publisher::push_modules(const std::vector<std::string>& modules) {
  PushStep step;
  step.skipped_reason = why_not_push(modules.empty());
  refuse_skip_when_strict(!modules.empty(), step.skipped_reason);
  if (!step.skipped_reason.empty()) return step;
  step.attempted = true;
  try {
    step.result =
        transfer::push_modules(*run_.writer, *run_.local_index, modules, run_.options.push);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    step.skipped_reason = error.what();
    run_.cache_problem(std::string("push to ") + run_.repo + " failed: " + error.what(),
                       "the compiled graphs stay in the local cache only");
  }
  return step;
}

std::map<std::string, std::string> Publisher::export_artifacts(const plan::Plan& plan,
                                                               const std::filesystem::path& dir) {
  std::map<std::string, std::string> exports;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local) continue;
    auto entry = run_.local_index->find(row.target.inputs.compiler_version, row.target.key);
    if (!entry) continue;
    const std::string& name = row.target.configuration.name;
    try {
      exports[name] =
          local::export_configuration(*run_.cache, *entry, std::filesystem::absolute(dir), name)
              .string();
    } catch (const Error& error) {
      rethrow_local_disk(error);
      // One configuration that cannot be exported does not keep the others from it.
      run_.cache_problem("cannot export " + name + ": " + error.what(), "it has no export folder");
    }
  }
  return exports;
}

}  // namespace neuron_cache::pipeline
