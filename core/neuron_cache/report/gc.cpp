#include "neuron_cache/report/gc.h"

#include "neuron_cache/format/printable.h"
#include "neuron_cache/report/usage.h"

namespace neuron_cache::report {
namespace {

using nlohmann::json;

json folders_json(const remote::GcPlan& plan) {
  json out = json::array();
  for (const auto& f : plan.removed) {
    out.push_back({{"path", printable(f.path, 300)},
                   {"files", f.files.count},
                   {"bytes", f.files.bytes},
                   {"modified", f.modified},
                   {"why", f.why}});
  }
  return out;
}

json entries_json(const remote::GcPlan& plan) {
  json out = json::array();
  for (const auto& e : plan.dropped) {
    out.push_back({{"compiler_version", e.compiler_version},
                   {"key", printable(e.key)},
                   {"owner", e.owner},
                   {"configuration", e.configuration},
                   {"created_at", printable(e.created_at)}});
  }
  return out;
}

json kept_json(const remote::GcPlan& plan) {
  json out = json::array();
  for (const auto& k : plan.kept)
    out.push_back({{"why", k.why}, {"folders", count_json(k.folders)}});
  return out;
}

json leases_json(const remote::GcPlan& plan) {
  json out = json::array();
  for (const auto& l : plan.leases)
    out.push_back({{"path", printable(l.path, 300)}, {"bytes", l.size}, {"why", l.why}});
  return out;
}

}  // namespace

nlohmann::json gc_json(const remote::GcPlan& plan) {
  json spared = json::array();
  for (const auto& path : plan.spared) spared.push_back(printable(path, 300));
  return {{"store", plan.store},
          {"kind", plan.kind},
          {"applied", plan.applied},
          {"modules", count_json(plan.folders)},
          {"referenced", count_json(plan.referenced)},
          {"configurations", plan.configurations},
          {"lease_files", plan.lease_files},
          {"dropped_entries", entries_json(plan)},
          {"removed_modules", folders_json(plan)},
          {"removed_leases", leases_json(plan)},
          {"kept_unreferenced", kept_json(plan)},
          {"freed", count_json(plan.freed)},
          {"index_files_rewritten", plan.index_files_rewritten},
          {"files_deleted", plan.files_deleted},
          {"spared", spared},
          {"squashed_revision", plan.squashed_revision},
          {"problems", plan.problems},
          {"requests", plan.requests},
          {"saturated", plan.saturated}};
}

}  // namespace neuron_cache::report
