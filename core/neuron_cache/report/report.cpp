#include "neuron_cache/report/report.h"

#include <cstdio>
#include <map>

#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/report/markdown.h"
#include "neuron_cache/sys/duration.h"

namespace neuron_cache::report {
namespace {

using nlohmann::json;

json nearest_json(const plan::Nearest& n) {
  json differences = json::array();
  for (const auto& d : n.differences) {
    differences.push_back({{"field", d.field}, {"cached", d.have}, {"requested", d.want}});
  }
  return {{"configuration", n.configuration}, {"key", n.key}, {"differences", differences}};
}

json registry_json(const plan::PlanRow& row) {
  if (!row.registry) return nullptr;
  return {{"compiler_dir", row.registry->compiler_dir},
          {"optimum_neuron_version", row.registry->optimum_version},
          {"path", row.registry->path}};
}

json row_json(const plan::PlanRow& row) {
  const auto& c = row.target.configuration;
  json nearest = json::array();
  for (const auto& n : row.nearest) nearest.push_back(nearest_json(n));
  return {{"name", c.name},
          {"model_id", c.model_id},
          {"key", row.target.key},
          // Format 2 says "store" whichever store it is (format 1 said "hub").
          {"status", plan::status_name(row.status)},
          {"reason", row.reason},
          {"bytes_to_download", row.bytes_to_download},
          {"files_to_download", row.files_to_download},
          {"compile_seconds_saved", row.compile_seconds_saved},
          {"registry", registry_json(row)},
          {"source", c.source.to_string()},
          {"nearest", nearest},
          {"refused", row.refused.empty() ? json(nullptr) : json(row.refused)},
          {"signed_by", row.signed_by}};
}

const plan::PlanRow* find_row(const plan::Plan& plan, const std::string& key) {
  for (const auto& row : plan.rows) {
    if (row.target.key == key) return &row;
  }
  return nullptr;
}

// Why prefetch did not install a configuration it meant to install, or nothing.
const std::string* not_installed(const RunResult& run, const std::string& key) {
  if (!run.prefetch) return nullptr;
  auto it = run.prefetch->result.failed.find(key);
  return it == run.prefetch->result.failed.end() ? nullptr : &it->second;
}

const pipeline::LeaseOutcome* find_lease(const RunResult& run, const std::string& key) {
  if (!run.compile) return nullptr;
  for (const auto& o : run.compile->leases) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

const pipeline::CompileOutcome* find_outcome(const RunResult& run, const std::string& key) {
  if (!run.compile) return nullptr;
  for (const auto& o : run.compile->outcomes) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

// Whether the compile command of `o` compiled nothing: optimum-neuron's hub proxy took every
// graph from the Hub.
bool reused_through_proxy(const pipeline::CompileOutcome& o) {
  return o.ok && !o.reused.empty();
}

bool reused_through_proxy(const RunResult& run, const std::string& key) {
  const pipeline::CompileOutcome* o = find_outcome(run, key);
  return o && reused_through_proxy(*o);
}

void add_compile(Totals& t, const pipeline::CompileOutcome& o) {
  if (reused_through_proxy(o)) {
    ++t.reused;
    t.bytes_reused += o.bytes_reused;
  } else {
    (o.ok ? t.compiled : t.failed) += 1;
    t.compile_seconds += o.seconds;  // a reused configuration's command compiled nothing
  }
  t.bytes_downloaded += o.bytes_downloaded;
  t.bytes_linked += o.bytes_linked;
}

// The plan's store kind (the Hub also when none was opened): what storage::describe names.
storage::Kind kind_of(const plan::Plan& plan) {
  return storage::kind_named(plan.store);
}

// What happened to one configuration, in a few words.
std::string outcome_of(const RunResult& run, const plan::PlanRow& before) {
  const storage::Kind kind = kind_of(run.initial);
  const std::string from = storage::describe(kind);
  switch (before.status) {
    case plan::Status::Local:
      return "local hit";
    case plan::Status::Store: {
      const plan::PlanRow* after = find_row(run.final, before.target.key);
      if (run.prefetch && after && after->status == plan::Status::Local)
        return "fetched from " + from;
      if (!run.prefetch) return "available " + storage::on(kind);
      if (!find_outcome(run, before.target.key)) return "NOT installed from " + from;
      break;
    }
    case plan::Status::Registry:
    case plan::Status::Compile:
      break;
  }
  const auto* lease = find_lease(run, before.target.key);
  if (lease && lease->kind == pipeline::LeaseOutcome::Kind::Fetched)
    return "fetched from " + from + " after " + lease->other_host + " compiled it";
  if (const auto* o = find_outcome(run, before.target.key)) {
    if (o->ok && !o->reused.empty()) return o->reused;
    return o->ok ? "compiled" : "compile FAILED";
  }
  if (before.status == plan::Status::Registry) return "in optimum-neuron's registry";
  return "must compile";
}

// The rows a build system can download: complete locally, or listed by the Hub's index.
bool has_files(const plan::PlanRow& row) {
  return row.entry && (row.status == plan::Status::Local || row.status == plan::Status::Store);
}

json files_json(const plan::Plan& plan, const plan::PlanRow& row, const local::LocalIndex& local,
                const storage::Store* store) {
  const artifact_index::Entry& entry = *row.entry;
  const std::string compiler_dir = entry.compiler_dir();
  json files = json::array();
  for (const auto& module : entry.modules) {
    bool here = local.module_complete(compiler_dir, module);
    bool pinned = store && (store->kind() != storage::Kind::Hub || !plan.hub_revision.empty());
    if (!here && !pinned) {
      // A URL of a branch could give other bytes than the sha256 says; never guess one.
      throw operational_error(compiler_dir + "/" + module.name + " of " +
                              row.target.configuration.name +
                              " is neither complete locally nor at a known Hub commit: run "
                              "`neuron-cache plan` again with the Hub reachable");
    }
    for (const auto& file : module.files) {
      std::string path = compiler_dir + "/" + module.name + "/" + file.name;
      std::string url = here ? url::file_url(local.cache().root() / path)
                             : store->download_url(plan.hub_revision, path).url;
      json item = {{"path", path},
                   {"size", file.size},
                   {"sha256", file.sha256},
                   {"source", here ? "local" : std::string(storage::kind_name(store->kind()))}};
      if (!url.empty()) item["url"] = url;
      files.push_back(std::move(item));
    }
  }
  return files;
}

}  // namespace

void add_files(json& plan_report, const plan::Plan& plan, const local::LocalIndex& local,
               const storage::Store* store) {
  json& rows = plan_report.at("configurations");
  for (size_t i = 0; i < plan.rows.size() && i < rows.size(); ++i) {
    const plan::PlanRow& row = plan.rows[i];
    if (!has_files(row)) continue;
    rows[i]["entry"] = artifact_index::serialize_entry(*row.entry);
    rows[i]["files"] = files_json(plan, row, local, store);
  }
}

std::string human_bytes(uint64_t bytes) {
  return format::human_bytes(bytes);
}

Totals totals(const RunResult& run) {
  Totals t;
  t.configurations = run.initial.rows.size();
  for (const auto& row : run.initial.rows) {
    if (row.status == plan::Status::Local) {
      ++t.local;
      t.compile_seconds_saved += row.compile_seconds_saved;
    }
    const plan::PlanRow* after = find_row(run.final, row.target.key);
    bool fetched = row.status == plan::Status::Store && run.prefetch && after &&
                   after->status == plan::Status::Local && !find_outcome(run, row.target.key);
    if (fetched) {
      ++t.store_hits;
      t.compile_seconds_saved += row.compile_seconds_saved;
    }
    bool missed = plan::runs_compile(row.status) ||
                  (row.status == plan::Status::Store && !fetched && run.prefetch);
    if (missed && !reused_through_proxy(run, row.target.key)) ++t.misses;
    if (!row.refused.empty()) ++t.refused;
  }
  pipeline::PrefetchStep fetched = run.prefetch.value_or(pipeline::PrefetchStep{});
  if (run.compile) {
    for (const auto& o : run.compile->outcomes) add_compile(t, o);
    // Configurations another machine compiled while this one waited: fetched, not compiled.
    t.store_hits += run.compile->fetched.hits;
    fetched += run.compile->fetched;
  }
  t.bytes_downloaded += fetched.result.bytes_downloaded;
  t.bytes_resumed = fetched.result.bytes_resumed;
  t.not_installed = fetched.result.failed.size();
  if (run.push) t.bytes_uploaded = run.push->result.commit.bytes_sent;
  return t;
}

json plan_json(const plan::Plan& plan) {
  json rows = json::array();
  for (const auto& row : plan.rows) rows.push_back(row_json(row));
  return {{"format_version", kReportFormatVersion},
          {"repo", plan.repo},
          {"store", plan.store},
          {"repo_origin", plan.repo_origin},
          {"notes", plan.notes},
          {"hub_checked", plan.hub_checked},
          {"hub_revision", plan.hub_revision},
          {"hub_problem", plan.hub_problem},
          {"local", plan.count(plan::Status::Local)},
          {"in_store", plan.count(plan::Status::Store)},
          {"hub", plan.count(plan::Status::Store)},  // format 1's name of "in_store"
          {"registry", plan.count(plan::Status::Registry)},
          {"compile", plan.count(plan::Status::Compile)},
          {"refused", plan.refused()},
          {"configurations", rows}};
}

json run_json(const RunResult& run) {
  Totals t = totals(run);
  json configurations = json::array();
  for (const auto& row : run.initial.rows) {
    json item = row_json(row);
    item["outcome"] = outcome_of(run, row);
    auto exported = run.exports.find(row.target.configuration.name);
    item["export_dir"] = exported == run.exports.end() ? json(nullptr) : json(exported->second);
    if (run.prefetch && row.status == plan::Status::Store) {
      const std::string* why = not_installed(run, row.target.key);
      item["prefetch"] = {{"installed", why == nullptr},
                          {"error", why ? json(*why) : json(nullptr)}};
    }
    if (const auto* lease = find_lease(run, row.target.key)) {
      item["lease"] = {{"outcome", pipeline::lease_kind_name(lease->kind)},
                       {"other_host", lease->other_host},
                       {"waited_seconds", lease->waited_seconds},
                       {"advisory", run.compile->leases_advisory},
                       {"note", lease->note}};
    }
    if (const auto* o = find_outcome(run, row.target.key)) {
      item["compile"] = {
          {"ok", o->ok},
          {"seconds", o->seconds},
          {"exit_code", o->exit_code},
          {"error", o->error},
          {"log_file", o->log_file},
          {"log_tail", o->log_tail},
          {"modules_produced", o->modules_produced},
          {"modules_used", o->modules_used},
          {"modules_from_hub", o->modules_from_hub},
          {"reused", o->reused.empty() ? json(nullptr) : json(o->reused)},
          {"not_recorded", o->not_recorded.empty() ? json(nullptr) : json(o->not_recorded)},
          {"bytes_downloaded", o->bytes_downloaded},
          {"bytes_linked", o->bytes_linked},
          {"bytes_reused", o->bytes_reused}};
    }
    configurations.push_back(item);
  }
  json notices = json::array();
  for (const auto& n : run.notices) notices.push_back({{"warning", n.warning}, {"text", n.text}});
  json push = nullptr;
  if (run.push) {
    push = {{"attempted", run.push->attempted},
            {"skipped_reason", run.push->skipped_reason},
            {"pushed", run.push->result.pushed},
            {"already_in_store", run.push->result.already_stored},
            {"already_on_hub", run.push->result.already_stored},  // format 1's name
            {"cosigned", run.push->result.cosigned},
            {"replaced", run.push->result.replaced},
            {"commit", run.push->result.commit.revision},
            {"bytes_uploaded", run.push->result.commit.bytes_sent}};
  }
  return {{"format_version", kReportFormatVersion},
          {"tool", pipeline::tool_version()},
          {"repo", run.repo},
          {"store", run.initial.store},
          {"compiler_version", run.compiler_version},
          {"hub_requests", run.store_requests},
          {"totals",
           {{"configurations", t.configurations},
            {"local", t.local},
            {"store_hits", t.store_hits},
            {"hub_hits", t.store_hits},  // format 1's name of "store_hits"
            {"misses", t.misses},
            {"refused", t.refused},
            {"compiled", t.compiled},
            {"reused", t.reused},
            {"failed", t.failed},
            {"not_installed", t.not_installed},
            {"bytes_downloaded", t.bytes_downloaded},
            {"bytes_linked", t.bytes_linked},
            {"bytes_reused", t.bytes_reused},
            {"bytes_resumed", t.bytes_resumed},
            {"bytes_uploaded", t.bytes_uploaded},
            {"compile_seconds", t.compile_seconds},
            {"compile_seconds_saved", t.compile_seconds_saved},
            {"seconds", run.seconds}}},
          {"push", push},
          {"notices", notices},
          {"configurations", configurations}};
}

std::string commit_text(const storage::CommitResult& commit) {
  return "in commit " + commit.revision.substr(0, 12) + ": " + sent_text(commit);
}

std::string sent_text(const storage::CommitResult& commit) {
  return std::to_string(commit.small_files + commit.large_sent) + " files sent (" +
         human_bytes(commit.bytes_sent) + "), " +
         std::to_string(commit.unchanged + commit.large_already_stored) + " already stored";
}

namespace {

// Every push line: skipped, `committed` (then where it went), failed, or `otherwise`. Only the Hub
// has commits; other stores are named instead.
std::string push_outcome(const pipeline::PushStep& step, storage::Kind kind,
                         std::string_view location, const std::string& committed,
                         const std::string& otherwise) {
  if (!step.attempted) return "push skipped: " + step.skipped_reason;
  const storage::CommitResult& commit = step.result.commit;
  if (commit.committed) {
    if (kind == storage::Kind::Hub) return committed + " " + commit_text(commit);
    return committed + " to " + storage::describe(kind, location) + ": " + sent_text(commit);
  }
  if (!step.skipped_reason.empty()) return "push failed: " + step.skipped_reason;
  return otherwise;
}

storage::Kind kind_of(const storage::Store* store) {
  return store ? store->kind() : storage::Kind::Hub;
}

std::string location_of(const storage::Store* store) {
  return store ? store->location() : "";
}

// A key made without the model's revision (plan::Target::unkeyed) is not shown: it finds nothing.
std::string key_cell(const plan::Target& target) {
  return target.unkeyed.empty() ? "`" + target.key.substr(0, 12) + "`" : "no key";
}

}  // namespace

std::string lease_line(const pipeline::CompileStep& step) {
  if (step.leases.empty()) return "";
  std::map<std::string_view, size_t> counts;
  for (const auto& o : step.leases) ++counts[pipeline::lease_kind_name(o.kind)];
  std::string text;
  for (const auto& [kind, n] : counts) {
    text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(kind);
  }
  std::replace(text.begin(), text.end(), '_', ' ');
  return "compile leases: " + text + (step.leases_advisory ? " (advisory: see the warning)" : "") +
         "\n";
}

std::string push_line(const RunResult& run, const std::string& what) {
  const pipeline::PushStep& step = *run.push;
  const storage::Kind kind = kind_of(run.initial);
  const auto& r = step.result;
  std::string line = "pushed " + count_of(r.pushed.size(), what);
  if (!r.cosigned.empty()) line += " (" + std::to_string(r.cosigned.size()) + " only signed)";
  if (!r.already_stored.empty()) {
    line += " (" + std::to_string(r.already_stored.size()) + " already " + storage::on(kind) + ")";
  }
  return push_outcome(step, kind, run.repo, line, line);
}

std::string run_push_line(const pipeline::PushStep& step, const storage::Store* store,
                          const std::string& owner) {
  const auto& r = step.result;
  std::string otherwise = r.skipped.empty()
                              ? "nothing new to push: " + storage::describe(kind_of(store)) +
                                    " already has every compiled graph of " + owner
                              : "not pushed: " + r.skipped.begin()->second;
  return push_outcome(step, kind_of(store), location_of(store),
                      "pushed " + owner + ": " + std::to_string(r.modules_added) +
                          " new compiled graphs (MODULE folders) and its index entry",
                      otherwise);
}

std::string modules_push_line(const pipeline::PushStep& step, const storage::Store* store) {
  const auto& r = step.result;
  std::string otherwise = r.pushed.empty()
                              ? "nothing pushed: no compiled graph could be read"
                              : std::to_string(r.pushed.size()) + " compiled graphs were already " +
                                    storage::on(kind_of(store)) + ": nothing to push";
  return push_outcome(
      step, kind_of(store), location_of(store),
      "pushed " + std::to_string(r.pushed.size()) + " compiled graphs (MODULE folders)", otherwise);
}

std::string plan_text(const plan::Plan& plan) {
  const storage::Kind kind = kind_of(plan);
  size_t width = 0;
  for (const auto& row : plan.rows) width = std::max(width, row.target.configuration.name.size());
  std::string out;
  if (!plan.repo.empty())
    out += "cache repo: " + plan.repo + " (from " + plan.repo_origin + ")\n\n";
  for (const auto& row : plan.rows) {
    // A store row is labelled with the store's kind: "hub", "s3", "folder".
    std::string line = row.status == plan::Status::Store
                           ? std::string(storage::kind_name(kind))
                           : std::string(plan::status_name(row.status));
    line.resize(9, ' ');
    std::string name = row.target.configuration.name;
    name.resize(width, ' ');
    // A key made without the model's revision is no key: it finds nothing.
    line +=
        name + (row.target.unkeyed.empty() ? "  key " + row.target.key.substr(0, 12) : "  no key");
    if (row.status == plan::Status::Store) {
      line += "  download " + human_bytes(row.bytes_to_download) + " in " +
              std::to_string(row.files_to_download) + " files";
    }
    if (row.status != plan::Status::Compile && row.compile_seconds_saved >= 1) {
      line += (row.status == plan::Status::Store ? ", saves " : "  saves ") +
              sys::duration_text(row.compile_seconds_saved) + " of compiling";
    }
    out += line + "\n";
    if (plan::runs_compile(row.status)) out += "         " + row.reason + "\n";
  }
  out += "\n" + std::to_string(plan.rows.size()) +
         " configurations: " + std::to_string(plan.count(plan::Status::Local)) + " local, " +
         std::to_string(plan.count(plan::Status::Store)) + " " + storage::on(kind) + ", " +
         (plan.count(plan::Status::Registry)
              ? std::to_string(plan.count(plan::Status::Registry)) +
                    " in optimum-neuron's registry (compiled through optimum-neuron, which "
                    "fetches their NEFFs), "
              : "") +
         std::to_string(plan.count(plan::Status::Compile)) + " to compile";
  if (size_t refused = plan.refused())
    out += " (" + std::to_string(refused) + " of them because of their entry's signatures)";
  if (!plan.hub_checked && !plan.hub_problem.empty()) {
    out += " (" + std::string(plan.store == "hub" || plan.store.empty() ? "Hub" : "store") +
           " not checked: " + plan.hub_problem + ")";
  }
  out += "\n";
  for (const auto& note : plan.notes) out += "note: " + note + "\n";
  return out;
}

std::string run_markdown(const RunResult& run) {
  Totals t = totals(run);
  const storage::Kind kind = kind_of(run.initial);
  std::string md = "## neuron-cache\n\n";
  md += count_of(t.configurations, "configuration") + ": **" + std::to_string(t.local) +
        " local**, **" + std::to_string(t.store_hits) + " fetched from " + storage::describe(kind) +
        "**, **" + std::to_string(t.misses) + " compiled or to compile**";
  if (t.reused) {
    md += ", **" + std::to_string(t.reused) + " reused from the Hub through optimum-neuron**";
  }
  if (t.failed) md += ", **" + std::to_string(t.failed) + " failed**";
  if (t.not_installed) {
    md +=
        ", **" + std::to_string(t.not_installed) + " " + storage::on(kind) + " but NOT installed**";
  }
  md += ".\n\n";
  md += "| | |\n|---|---|\n";
  md += "| Cache repo | " + code_cell(printable(run.repo)) + " |\n";
  md += "| Compiler | " + code_cell(printable(run.compiler_version)) + " |\n";
  md += "| Downloaded | " + human_bytes(t.bytes_downloaded) + " |\n";
  if (t.bytes_linked) {
    md += "| Taken from the HF file cache | " + human_bytes(t.bytes_linked) + " |\n";
  }
  md += "| Uploaded | " + human_bytes(t.bytes_uploaded) + " |\n";
  md += "| Compile time spent | " + sys::duration_text(t.compile_seconds) + " |\n";
  md += "| Compile time saved | " + sys::duration_text(t.compile_seconds_saved) + " |\n";
  md += "| Total time | " + sys::duration_text(run.seconds) + " |\n\n";
  md += "| Configuration | Model | Outcome | Key | Note |\n|---|---|---|---|---|\n";
  for (const auto& row : run.initial.rows) {
    std::string note = plan::runs_compile(row.status) ? row.reason : "";
    if (const std::string* why = not_installed(run, row.target.key)) note = *why;
    if (const auto* o = find_outcome(run, row.target.key); o && !o->ok) note = o->error;
    if (const auto* o = find_outcome(run, row.target.key); o && o->ok && !o->not_recorded.empty())
      note = "not recorded: " + o->not_recorded;
    md += "| " + markdown_text(row.target.configuration.name) + " | " +
          markdown_text(row.target.configuration.model_id) + " | " + outcome_of(run, row) + " | " +
          key_cell(row.target) + " | " + markdown_text(note) + " |\n";
  }
  if (!run.notices.empty()) {
    md += "\n### Notices\n\n";
    for (const auto& n : run.notices)
      md += std::string("- ") + (n.warning ? "**warning:** " : "") + markdown_text(n.text) + "\n";
  }
  return md;
}

}  // namespace neuron_cache::report
