#include "plan/plan.h"

#include <algorithm>
#include <set>

namespace neuron_cache::plan {
namespace {

namespace ai = artifact_index;

constexpr size_t kMaxNearest = 3;

// Bytes and files still missing locally for an entry.
void count_missing(const ai::Entry& entry, const LocalIndex& local, PlanRow& row) {
  LocalIndex::Missing missing = local.missing(entry);
  row.bytes_to_download = missing.bytes;
  row.files_to_download = missing.files;
}

// The shards the targets need: one per model and compiler version.
std::set<std::pair<std::string, std::string>> shards_of(const std::vector<Target>& targets) {
  std::set<std::pair<std::string, std::string>> shards;
  for (const auto& t : targets) shards.emplace(t.inputs.compiler_version, t.inputs.model_id);
  return shards;
}

// Every entry neuron-cache knows about for the models of the misses, locally or on the Hub, in
// every compiler version (a configuration cached for another compiler is worth a mention).
std::vector<ai::Entry> known_entries(const std::vector<Target>& targets,
                                     const std::vector<const Target*>& misses,
                                     const LocalIndex& local, remote::RemoteIndex* remote) {
  std::map<std::string, ai::Entry> known;
  std::set<std::string> versions;
  for (const auto& target : targets) versions.insert(target.inputs.compiler_version);
  if (remote) {
    std::set<std::pair<std::string, std::string>> shards;
    for (const auto& version : remote->compiler_versions()) {
      versions.insert(version);
      for (const Target* miss : misses) shards.emplace(version, miss->inputs.model_id);
    }
    remote->load(shards);
    for (const Target* miss : misses) {
      for (const ai::Entry* entry : remote->entries_of(miss->inputs.model_id))
        known.emplace(entry->key, *entry);
    }
  }
  for (const auto& version : versions) {
    for (auto& [key, entry] : local.entries(version, nullptr)) known.emplace(key, entry);
  }
  std::vector<ai::Entry> out;
  for (auto& [key, entry] : known) out.push_back(std::move(entry));
  return out;
}

std::vector<Nearest> nearest(const Target& target, const std::vector<ai::Entry>& known) {
  std::vector<Nearest> found;
  for (const auto& entry : known) {
    if (entry.inputs.model_id != target.inputs.model_id) continue;
    found.push_back(
        {entry.configuration, entry.key, cache_key::differences(entry.inputs, target.inputs)});
  }
  std::stable_sort(found.begin(), found.end(), [](const Nearest& a, const Nearest& b) {
    return a.differences.size() < b.differences.size();
  });
  if (found.size() > kMaxNearest) found.resize(kMaxNearest);
  return found;
}

std::string miss_reason(const Target& target, const Plan& plan, const PlanRow& row) {
  std::string where = plan.hub_checked ? "locally or in " + plan.repo : "locally";
  if (row.nearest.empty()) {
    std::string reason = "no configuration of " + target.inputs.model_id + " is cached " + where;
    if (!plan.hub_checked && !plan.hub_problem.empty()) reason += " (" + plan.hub_problem + ")";
    return reason;
  }
  const Nearest& best = row.nearest.front();
  std::string reason = "not cached " + where + "; nearest: " +
                       (best.configuration.empty() ? best.key : best.configuration) + ", " +
                       explain_difference(best.differences);
  if (!plan.hub_checked && !plan.hub_problem.empty()) reason += " (" + plan.hub_problem + ")";
  return reason;
}

void mark_local(PlanRow& row, const ai::Entry& entry, bool recorded) {
  row.status = Status::Local;
  row.entry = entry;
  row.recorded = recorded;
  row.compile_seconds_saved = entry.compile_seconds;
  row.reason = "complete in the local cache";
}

// The local index entry first: when it is complete, the Hub's index is not even read.
PlanRow plan_row(const Target& target, const LocalIndex& local, remote::RemoteIndex* remote) {
  PlanRow row;
  row.target = target;
  std::string version = target.inputs.compiler_version;
  std::optional<ai::Entry> local_entry = local.find(version, target.key);
  if (local_entry && local.missing(*local_entry).files == 0) {
    mark_local(row, *local_entry, true);
    return row;
  }
  const ai::Entry* hub_entry = remote ? remote->find(version, target.key) : nullptr;
  if (!hub_entry) return row;
  count_missing(*hub_entry, local, row);
  if (row.files_to_download == 0) {
    mark_local(row, *hub_entry, false);  // fetched earlier, or by optimum-neuron
    return row;
  }
  row.status = Status::Hub;
  row.entry = *hub_entry;
  row.compile_seconds_saved = hub_entry->compile_seconds;
  row.reason = "available in " + remote->repo();
  return row;
}

}  // namespace

std::string_view status_name(Status status) {
  switch (status) {
    case Status::Local:
      return "local";
    case Status::Hub:
      return "hub";
    case Status::Compile:
      return "compile";
  }
  return "compile";
}

size_t Plan::count(Status status) const {
  return static_cast<size_t>(std::count_if(
      rows.begin(), rows.end(), [status](const PlanRow& r) { return r.status == status; }));
}

std::string explain_difference(const std::vector<cache_key::Difference>& differences) {
  if (differences.empty()) return "identical inputs";
  std::string have, want;
  for (size_t i = 0; i < differences.size(); ++i) {
    std::string separator = i == 0 ? "" : (i + 1 == differences.size() ? " and " : ", ");
    have += separator + differences[i].field + " " + differences[i].have;
    want += separator + differences[i].want;
  }
  return "cached for " + have + "; you asked for " + want;
}

Plan make_plan(const std::vector<Target>& targets, const LocalIndex& local,
               remote::RemoteIndex* remote, const std::string& hub_problem) {
  Plan plan;
  plan.hub_problem = hub_problem;
  if (remote) {
    plan.hub_checked = true;
    plan.repo = remote->repo();
    plan.hub_revision = remote->revision();
  }
  if (remote) remote->load(shards_of(targets));
  for (const auto& target : targets) plan.rows.push_back(plan_row(target, local, remote));
  if (plan.count(Status::Compile) == 0) return plan;
  std::vector<const Target*> misses;
  for (const auto& row : plan.rows) {
    if (row.status == Status::Compile) misses.push_back(&row.target);
  }
  std::vector<ai::Entry> known = known_entries(targets, misses, local, remote);
  for (auto& row : plan.rows) {
    if (row.status != Status::Compile) continue;
    row.nearest = nearest(row.target, known);
    row.reason = miss_reason(row.target, plan, row);
  }
  return plan;
}

}  // namespace neuron_cache::plan
