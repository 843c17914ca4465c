#include "neuron_cache/plan/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/trust/signing.h"

namespace neuron_cache::plan {
namespace {

namespace ai = artifact_index;

constexpr size_t kMaxNearest = 3;

// Bytes and files still missing locally for an entry.
void count_missing(const ai::Entry& entry, const local::LocalIndex& local, PlanRow& row) {
  local::LocalIndex::Missing missing = local.missing(entry);
  row.bytes_to_download = missing.bytes;
  row.files_to_download = missing.files;
}

// Every entry neuron-cache knows about for the models of the misses, locally or on the Hub, in
// every compiler version (a configuration cached for another compiler is worth a mention).
std::vector<ai::Entry> known_entries(const std::vector<Target>& targets,
                                     const std::vector<const Target*>& misses,
                                     const local::LocalIndex& local, remote::RemoteIndex* remote) {
  std::map<std::string, ai::Entry> known;
  std::set<std::string> versions;
  for (const auto& target : targets) versions.insert(target.inputs.compiler_version);
  if (remote) {
    std::set<std::pair<std::string, std::string>> shards;
    for (const auto& version : remote->compiler_versions()) {
      versions.insert(version);
      for (const Target* miss : misses) {
        cache_key::KeyInputs in_version = miss->inputs;
        in_version.compiler_version = version;
        shards.emplace(version, ai::remote_shard_path(in_version));
      }
    }
    remote->load(shards);
    for (const Target* miss : misses) {
      for (const ai::Entry* entry : remote->entries_of(miss->inputs))
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
    if (!cache_key::same_owner(entry.inputs, target.inputs)) continue;
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
  if (!row.refused.empty())
    return "the entry in " + plan.repo + " is not installed: " + row.refused;
  std::string where = plan.hub_checked ? "locally or in " + plan.repo : "locally";
  if (row.nearest.empty()) {
    std::string reason = (target.inputs.profile ? "nothing of " : "no configuration of ") +
                         cache_key::owner_of(target.inputs) + " is cached " + where;
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

// Local when the local index entry is complete; otherwise still Compile, for hub_row to decide.
PlanRow local_row(const Target& target, const local::LocalIndex& local) {
  PlanRow row;
  row.target = target;
  if (!target.unkeyed.empty()) {
    // What follows (compiled, not looked up, recorded or pushed) the run's warning says once.
    row.reason = "not keyed: " + target.unkeyed;
    return row;
  }
  std::optional<ai::Entry> entry = local.find(target.inputs, target.key);
  if (entry && local.missing(*entry).files == 0) mark_local(row, *entry, true);
  return row;
}

void hub_row(PlanRow& row, const local::LocalIndex& local, const remote::RemoteIndex& remote,
             const config::TrustPolicy& trust) {
  const ai::Entry* hub_entry = remote.find(row.target.inputs.compiler_version, row.target.key);
  if (!hub_entry) return;
  if (auto why = refusal(*hub_entry, trust, &row.signed_by)) {
    row.refused = *why;
    return;
  }
  count_missing(*hub_entry, local, row);
  if (row.files_to_download == 0) {
    mark_local(row, *hub_entry, false);  // fetched earlier, or by optimum-neuron
    return;
  }
  row.status = Status::Store;
  row.entry = *hub_entry;
  row.compile_seconds_saved = hub_entry->compile_seconds;
  row.reason = "available in " + remote.repo();
  if (!row.signed_by.empty())
    row.reason += ", signed by " + list_of(row.signed_by, ai::kMaxSignatures);
}

// Model, task, shape, compiler folder and pinned optimum-neuron version.
bool same_shape(const Target& target, const RegistryCandidate& c) {
  const cache_key::KeyInputs& in = target.inputs;
  if (c.model_id != in.model_id || (!c.task.empty() && c.task != in.task)) return false;
  if (c.batch_size != in.batch_size || c.sequence_length != in.sequence_length) return false;
  if (c.where.compiler_dir != layout::compiler_dir_name(in.compiler_version)) return false;
  return !in.optimum_neuron_version || *in.optimum_neuron_version == c.where.optimum_version;
}

// optimum-neuron compares the stored target as it is with the normalised instance type: an
// entry for a target it does not know ("trn3") serves no trn1 configuration.
bool registry_matches(const Target& target, const RegistryCandidate& c) {
  const cache_key::KeyInputs& in = target.inputs;
  if (c.traced || !same_shape(target, c) || c.tensor_parallel != in.num_cores) return false;
  if (remote::canonical_dtype(c.dtype) != remote::canonical_dtype(in.precision)) return false;
  return c.target == in.target;
}

std::string registry_reason(const RegistryCandidate& c, const std::string& repo) {
  std::string whose =
      c.same_architecture_as.empty()
          ? ""
          : "same architecture as " + c.same_architecture_as + ", whose entry it reuses; ";
  return whose + "in optimum-neuron's registry in " + repo + " (optimum-neuron " +
         c.where.optimum_version + ", " + c.where.compiler_dir +
         ") but not in a neuron-cache index yet: the compile command fetches its NEFFs through "
         "optimum-neuron's hub cache instead of compiling, then neuron-cache indexes them";
}

std::string traced_reason(const RegistryCandidate& c, const std::string& repo) {
  return "registry entry found in " + repo + " (" + c.where.path +
         ", a traced export); reuse depends on how the export is run: `optimum-cli export "
         "neuron` compiles traced models without asking the Hub, from_pretrained(export=True) "
         "reuses them; neuron-cache indexes whatever it produces";
}

}  // namespace

void mark_registry_hits(Plan& plan, const std::vector<RegistryCandidate>& candidates) {
  for (auto& row : plan.rows) {
    if (row.status != Status::Compile) continue;
    // The model's own entries before those of its architecture's other models.
    const RegistryCandidate* best = nullptr;
    for (const auto& candidate : candidates) {
      if (!registry_matches(row.target, candidate)) continue;
      if (!best || (!best->same_architecture_as.empty() && candidate.same_architecture_as.empty()))
        best = &candidate;
    }
    if (best) {
      row.status = Status::Registry;
      row.registry = best->where;
      row.reason = registry_reason(*best, plan.repo);
      continue;
    }
    for (const auto& candidate : candidates) {
      if (candidate.traced && same_shape(row.target, candidate)) {
        row.reason = traced_reason(candidate, plan.repo);
        break;
      }
    }
  }
}

std::string_view status_name(Status status) {
  switch (status) {
    case Status::Local:
      return "local";
    case Status::Store:
      return "store";
    case Status::Registry:
      return "registry";
    case Status::Compile:
      return "compile";
  }
  return "compile";
}

bool runs_compile(Status status) {
  return status == Status::Registry || status == Status::Compile;
}

std::set<std::pair<std::string, std::string>> shards_of(const std::vector<const Target*>& targets) {
  std::set<std::pair<std::string, std::string>> shards;
  for (const Target* t : targets) {
    shards.emplace(t->inputs.compiler_version, ai::remote_shard_path(t->inputs));
  }
  return shards;
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

std::optional<std::string> refusal(const ai::Entry& entry, const config::TrustPolicy& trust,
                                   std::vector<std::string>* signed_by) {
  if (!trust.active()) return std::nullopt;
  trust::Verdict verdict = trust::verify_entry(entry, trust.keys);
  if (signed_by) *signed_by = verdict.valid;
  if (verdict.outcome() == trust::Verdict::Outcome::BadSignature) return verdict.reason();
  if (!trust.require || verdict.trusted()) return std::nullopt;
  return verdict.reason() + ", and signatures are required (" + trust.require_origin + ")";
}

size_t Plan::refused() const {
  return static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [](const PlanRow& r) { return !r.refused.empty(); }));
}

Plan make_plan(const std::vector<Target>& targets, const local::LocalIndex& local,
               remote::RemoteIndex* remote, const std::string& hub_problem,
               const config::TrustPolicy& trust) {
  Plan plan;
  plan.hub_problem = hub_problem;
  if (remote) {
    plan.hub_checked = true;
    plan.repo = remote->repo();
    if (remote->revision_read()) plan.hub_revision = remote->revision();
  }
  // Local entries first: when every one is complete, the Hub's index is not read at all.
  std::vector<const Target*> incomplete;
  for (const auto& target : targets) {
    plan.rows.push_back(local_row(target, local));
    if (plan.rows.back().status != Status::Local && target.unkeyed.empty())
      incomplete.push_back(&target);
  }
  if (remote && !incomplete.empty()) {
    plan.hub_revision = remote->revision();
    remote->load(shards_of(incomplete));
    for (auto& row : plan.rows) {
      if (row.status != Status::Local && row.target.unkeyed.empty())
        hub_row(row, local, *remote, trust);
    }
  }
  if (plan.count(Status::Compile) == 0) return plan;
  std::vector<const Target*> misses;
  for (const auto& row : plan.rows) {
    if (row.status == Status::Compile && row.target.unkeyed.empty()) misses.push_back(&row.target);
  }
  std::vector<ai::Entry> known = known_entries(targets, misses, local, remote);
  for (auto& row : plan.rows) {
    if (row.status != Status::Compile || !row.target.unkeyed.empty()) continue;
    row.nearest = nearest(row.target, known);
    row.reason = miss_reason(row.target, plan, row);
  }
  return plan;
}

}  // namespace neuron_cache::plan
