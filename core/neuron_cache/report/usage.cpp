#include "neuron_cache/report/usage.h"

#include <algorithm>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/report/markdown.h"

namespace neuron_cache::report {
namespace {

using nlohmann::json;

json files_json(const maintenance::Tally& tally) {
  return {{"files", tally.count}, {"bytes", tally.bytes}};
}

json version_json(const maintenance::VersionUsage& v) {
  return {{"compiler_version", v.compiler_version},
          {"files", v.files.count},
          {"bytes", v.files.bytes},
          {"modules", count_json(v.modules)},
          {"registry", files_json(v.registry)},
          {"other", files_json(v.other)},
          {"configurations", v.configurations},
          {"index", files_json(v.index)},
          {"unindexed_modules", count_json(v.unindexed)}};
}

json model_json(const maintenance::ModelUsage& m) {
  return {{"name", m.name},
          {"kind", m.profile ? "profile" : "model"},
          {"configurations", m.configurations},
          {"referenced_modules", m.referenced.count},
          {"referenced_bytes", m.referenced.bytes},
          {"missing_modules", m.missing_modules}};
}

json age_json(const maintenance::AgeBucket& a) {
  return {{"bucket", a.key},
          {"label", a.name},
          {"configurations", a.configurations},
          {"referenced_modules", a.referenced.count},
          {"referenced_bytes", a.referenced.bytes}};
}

}  // namespace

json count_json(const maintenance::Tally& tally) {
  return {{"count", tally.count}, {"bytes", tally.bytes}};
}

json usage_json(const maintenance::StoreUsage& usage, size_t top_models) {
  json versions = json::array(), models = json::array(), ages = json::array();
  for (const auto& v : usage.versions) versions.push_back(version_json(v));
  for (size_t i = 0; i < usage.models.size() && i < top_models; ++i)
    models.push_back(model_json(usage.models[i]));
  for (const auto& a : usage.ages) ages.push_back(age_json(a));
  json index = files_json(usage.index);
  index["configurations"] = usage.configurations;
  index["files_read"] = usage.index_files_read;
  return {{"store", usage.store},
          {"kind", usage.kind},
          {"total", files_json(usage.total)},
          {"modules", count_json(usage.modules)},
          {"unindexed_modules", count_json(usage.unindexed)},
          {"index", index},
          {"other", files_json(usage.other)},
          {"versions", versions},
          {"models", models},
          {"models_total", usage.models.size()},
          {"ages", ages},
          {"problems", usage.problems},
          {"saturated", usage.saturated},
          {"requests", usage.requests}};
}

std::string usage_markdown(const maintenance::StoreUsage& usage) {
  using format::human_bytes;
  std::string md = "\n### Cache store usage\n\n" + code_cell(printable(usage.store)) + ": " +
                   std::to_string(usage.total.count) + " files, " + human_bytes(usage.total.bytes) +
                   "; " + std::to_string(usage.modules.count) + " MODULE folders, " +
                   std::to_string(usage.configurations) + " indexed configurations.\n\n";
  md += "| compiler version | MODULE folders | bytes | configurations | not in the index |\n";
  md += "|---|---:|---:|---:|---:|\n";
  for (const auto& v : usage.versions) {
    md += "| " + code_cell(v.compiler_version) + " | " + std::to_string(v.modules.count) + " | " +
          human_bytes(v.files.bytes) + " | " + std::to_string(v.configurations) + " | " +
          std::to_string(v.unindexed.count) + " |\n";
  }
  if (!usage.problems.empty())
    md += "\n" + std::to_string(usage.problems.size()) +
          " problems (index files or listings that could not be read): `neuron-cache du` "
          "lists them.\n";
  if (usage.saturated) md += "\nSome sums reached 2^64 bytes and stopped there.\n";
  return config::redact(md);
}

std::string usage_markdown_failure(const std::string& store, const std::string& why) {
  return config::redact("\n### Cache store usage\n\nWarning: could not measure " +
                        code_cell(printable(store)) + ": " +
                        markdown_text(printable(why, kPrintableMessage)) + "\n");
}

}  // namespace neuron_cache::report
