// `neuron-cache du`: what the cache store holds, by compiler version, by model and by age, from
// its listings and index shards (no artifact is downloaded).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/maintenance/store_usage.h"
#include "neuron_cache/report/usage.h"

namespace neuron_cache::cli {
namespace {

using format::human_bytes;

struct Options {
  bool json = false;
  std::string by;  // "", "model", "version" or "age"
  size_t top = 20;
  std::string manifest;  // --manifest: its cache_repo is the store
};

using Table = std::vector<std::vector<std::string>>;

// Columns padded to their widest cell, two spaces apart, each line indented.
void print_table(const Table& table) {
  std::vector<size_t> widths;
  for (const auto& row : table) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : table) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i)
      line += row[i] + std::string(widths[i] - row[i].size() + 2, ' ');
    while (line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
}

// "3 (1.5 MiB)"
std::string counted(const maintenance::Tally& tally) {
  return std::to_string(tally.count) + " (" + human_bytes(tally.bytes) + ")";
}

void print_totals(const maintenance::StoreUsage& u, const std::string& origin) {
  std::cout << "Cache store " << u.store << " (" << origin << "): " << u.total.count << " files, "
            << human_bytes(u.total.bytes) << "\n";
  Table table = {
      {"MODULE folders", counted(u.modules)},
      {"  not referenced by the index", counted(u.unindexed)},
      {"index files", counted(u.index)},
      {"indexed configurations", std::to_string(u.configurations)},
      {"other files", counted(u.other)},
  };
  print_table(table);
  if (u.unindexed.count > 0)
    std::cout << "  (MODULE folders optimum-neuron synchronized, or neuron-cache pushed without "
                 "--config or --profile, have no index entry.)\n";
}

void print_versions(const maintenance::StoreUsage& u) {
  std::cout << "\nBy compiler version:\n";
  Table table = {{"compiler version", "bytes", "MODULE folders", "registry files", "configurations",
                  "index files", "not in the index"}};
  for (const auto& v : u.versions) {
    table.push_back({v.compiler_version, human_bytes(v.files.bytes), counted(v.modules),
                     counted(v.registry), std::to_string(v.configurations), counted(v.index),
                     counted(v.unindexed)});
  }
  if (u.versions.empty()) table.push_back({"(none)"});
  print_table(table);
}

void print_models(const maintenance::StoreUsage& u, size_t top) {
  if (u.models.empty()) {
    std::cout << "\nBy model: no index entry.\n";
    return;
  }
  size_t shown = std::min(top, u.models.size());
  std::cout << "\nBy model ("
            << (shown < u.models.size() ? "top " + std::to_string(shown) + " of " : "")
            << u.models.size()
            << ", by the bytes of the MODULE folders their configurations reference; a folder "
               "two models reference counts for each):\n";
  Table table = {{"model", "configurations", "MODULE folders", "referenced bytes", "missing"}};
  for (size_t i = 0; i < shown; ++i) {
    const maintenance::ModelUsage& m = u.models[i];
    table.push_back({(m.profile ? "profile " : "") + m.name, std::to_string(m.configurations),
                     std::to_string(m.referenced.count), human_bytes(m.referenced.bytes),
                     m.missing_modules ? std::to_string(m.missing_modules) : ""});
  }
  print_table(table);
}

void print_ages(const maintenance::StoreUsage& u) {
  std::cout << "\nBy age of the index entries (created_at):\n";
  Table table = {{"age", "configurations", "MODULE folders", "referenced bytes"}};
  for (const auto& a : u.ages) {
    table.push_back({a.name, std::to_string(a.configurations), std::to_string(a.referenced.count),
                     human_bytes(a.referenced.bytes)});
  }
  print_table(table);
}

void print_text(const maintenance::StoreUsage& u, const Options& options,
                const std::string& origin) {
  print_totals(u, origin);
  if (options.by.empty() || options.by == "version") print_versions(u);
  if (options.by.empty() || options.by == "model") print_models(u, options.top);
  if (options.by.empty() || options.by == "age") print_ages(u);
  if (u.saturated) std::cout << "\nSome sums reached 2^64 bytes and stopped there.\n";
  // A shared folder counts the files it copies, not its listings: no request count to show.
  std::cout << "\nNo artifact was downloaded"
            << (u.kind == "folder" ? "" : " (" + std::to_string(u.requests) + " requests)")
            << ".\n";
}

void du(Context& context, const Options& options) {
  if (!options.manifest.empty()) context.use_manifest(options.manifest);
  storage::Store& store = context.store();
  maintenance::StoreUsage usage;
  try {
    usage = maintenance::store_usage(store);
  } catch (const Error& error) {
    throw Error(error.kind(), "cannot measure " + storage::describe(&store) + ": " + error.what());
  }
  for (const auto& problem : usage.problems) warn(problem);
  if (options.json) {
    print_json(report::usage_json(usage, options.top));
    return;
  }
  print_text(usage, options, context.store_origin());
}

}  // namespace

void register_du(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "du",
      "Show the cache store's size by compiler version, model and age, from its listings and "
      "index (downloads no artifact)");
  add_repo_option(cmd, context, "the manifest's cache_repo, else the configured one");
  cmd->add_option("--manifest", options->manifest,
                  "Measure the cache store this manifest names (its cache_repo)");
  cmd->add_flag("--json", options->json, "Print JSON for scripts (every section)");
  cmd->add_option("--by", options->by, "Only this section of the text output")
      ->check(CLI::IsMember({"model", "version", "age"}));
  cmd->add_option("--top", options->top, "Models shown, the most referenced bytes first")
      ->default_str("20")
      ->check(CLI::Range(1, 1'000'000));
  cmd->callback([&context, options] { du(context, *options); });
}

}  // namespace neuron_cache::cli
