#include "neuron_cache/report/gc.h"

#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/report/markdown.h"
#include "neuron_cache/report/usage.h"

namespace neuron_cache::report {
namespace {

using nlohmann::json;

json folders_json(const maintenance::GcPlan& plan) {
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

json entries_json(const maintenance::GcPlan& plan) {
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

json kept_json(const maintenance::GcPlan& plan) {
  json out = json::array();
  for (const auto& k : plan.kept)
    out.push_back({{"why", k.why}, {"folders", count_json(k.folders)}});
  return out;
}

json leases_json(const maintenance::GcPlan& plan) {
  json out = json::array();
  for (const auto& l : plan.leases)
    out.push_back({{"path", printable(l.path, 300)}, {"bytes", l.size}, {"why", l.why}});
  return out;
}

json leftovers_json(const maintenance::GcPlan& plan) {
  json out = json::array();
  for (const auto& l : plan.leftovers) {
    json item = {{"path", printable(l.path, 300)},
                 {"kind", std::string(storage::leftover_kind_name(l.kind))},
                 {"bytes", l.size},
                 {"age", l.age},
                 {"why", l.why}};
    if (!l.target.empty()) item["upload_of"] = printable(l.target, 300);
    out.push_back(std::move(item));
  }
  return out;
}

// Folders listed one by one in the summary; the report file lists all.
constexpr size_t kShownFolders = 20;

std::string tally_text(const maintenance::Tally& tally, const std::string& noun) {
  return std::to_string(tally.count) + " " + noun + " (" + format::human_bytes(tally.bytes) + ")";
}

}  // namespace

std::string gc_markdown(const maintenance::GcPlan& plan) {
  std::string md = "\n### neuron-cache gc\n\n" + code_cell(printable(plan.store)) + ": " +
                   tally_text(plan.folders, "MODULE folders") + ", " +
                   std::to_string(plan.referenced.count) + " referenced, " +
                   std::to_string(plan.configurations) + " index entries.\n\n";
  md += std::string(plan.applied ? "Removed " : "Would remove (dry run) ") +
        std::to_string(plan.removed.size()) + " MODULE folders, " +
        std::to_string(plan.leases.size()) + " lease files and dropped " +
        std::to_string(plan.dropped.size()) +
        " index entries: " + format::human_bytes(plan.freed.bytes) + " in " +
        std::to_string(plan.freed.count) + " files.\n";
  if (!plan.removed.empty()) md += "\n| MODULE folder | bytes | why |\n|---|---:|---|\n";
  for (size_t i = 0; i < plan.removed.size() && i < kShownFolders; ++i) {
    const maintenance::GcFolder& f = plan.removed[i];
    md += "| " + code_cell(printable(f.path, 300)) + " | " + format::human_bytes(f.files.bytes) +
          " | " + f.why + " |\n";
  }
  if (plan.removed.size() > kShownFolders)
    md += "\n... and " + std::to_string(plan.removed.size() - kShownFolders) +
          " more (the report file lists all).\n";
  if (!plan.leftovers.empty()) {
    md +=
        std::string("\n") + (plan.applied ? "Removed " : "Would remove ") +
        std::to_string(plan.applied ? plan.leftovers_removed : plan.leftovers.size()) +
        " leftovers of killed writers:\n\n| leftover | kind | bytes | why |\n|---|---|---:|---|\n";
  }
  for (size_t i = 0; i < plan.leftovers.size() && i < kShownFolders; ++i) {
    const storage::Leftover& l = plan.leftovers[i];
    md += "| " + code_cell(printable(l.path, 300)) + " | " +
          std::string(storage::leftover_kind_name(l.kind)) + " | " + format::human_bytes(l.size) +
          " | " + markdown_text(l.why) + " |\n";
  }
  if (plan.leftovers.size() > kShownFolders)
    md += "\n... and " + std::to_string(plan.leftovers.size() - kShownFolders) +
          " more (the report file lists all).\n";
  if (!plan.kept.empty()) md += "\n";
  for (const auto& kept : plan.kept)
    md += "- Kept " + tally_text(kept.folders, "unreferenced folders") + ": " +
          markdown_text(kept.why) + "\n";
  for (const auto& path : plan.spared)
    md += "- Spared " + code_cell(printable(path, 300)) + ": a push referenced it meanwhile\n";
  if (!plan.squashed_revision.empty())
    md += "\nSquashed the history into one commit (" + plan.squashed_revision +
          "): the storage of deleted files is freed.\n";
  else if (plan.applied && plan.kind == "hub" && plan.freed.count > 0)
    md +=
        "\nThe deleted files still count in the repo's storage until its history is squashed "
        "(input gc-squash).\n";
  if (!plan.problems.empty())
    md += "\n" + std::to_string(plan.problems.size()) +
          " problems (files gc could not read): the report file lists them.\n";
  return config::redact(md);
}

nlohmann::json gc_json(const maintenance::GcPlan& plan) {
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
          {"leftovers", leftovers_json(plan)},
          {"leftovers_removed", plan.leftovers_removed},
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
