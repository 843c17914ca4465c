// `neuron-cache status`: what optimum-cli neuron cache status shows, plus registry counts.
#include <array>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/report/stats.h"

namespace neuron_cache::cli {
namespace {

using layout::EntryState;

// Every EntryState, optimum-neuron's four then TRACED (which it would count as EMPTY).
constexpr size_t kStates = 5;

struct Tally {
  int count = 0;
  uint64_t bytes = 0;
};

struct Totals {
  std::array<Tally, kStates> by_state{};
  uint64_t total_bytes = 0;
  uint64_t old_version_bytes = 0;
  int registry_entries = 0;
  int configurations = 0;           // recorded in the local artifact index
  int complete_configurations = 0;  // ... whose MODULE_ folders are all complete
};

// Configurations neuron-cache recorded and how many are complete, by compiler version.
using Recorded = std::map<std::string, std::pair<int, int>>;

Recorded count_configurations(const local::LocalCache& cache) {
  local::LocalIndex index(cache);
  Recorded out;
  for (const auto& version : index.compiler_versions()) {
    std::string compiler_dir = layout::compiler_dir_name(version);
    int recorded = 0, complete = 0;
    for (const auto& [key, entry] : index.entries(version, nullptr)) {
      ++recorded;
      bool all = std::all_of(entry.modules.begin(), entry.modules.end(), [&](const auto& module) {
        return index.module_complete(compiler_dir, module);
      });
      complete += all ? 1 : 0;
    }
    out[version] = {recorded, complete};
  }
  return out;
}

// Only the compiler folders of the cache count, as before the local index was read apart.
Totals tally(const local::CacheTree& tree, const Recorded& recorded) {
  Totals totals;
  totals.total_bytes = local::total_size(tree);  // what cleanup --max-size bounds
  for (const auto& compiler : tree.compilers) {
    if (auto it = recorded.find(compiler.version); it != recorded.end()) {
      totals.configurations += it->second.first;
      totals.complete_configurations += it->second.second;
    }
    for (const auto& module : compiler.modules) {
      Tally& t = totals.by_state[static_cast<size_t>(module.state)];
      ++t.count;
      t.bytes += module.size_bytes;
      if (!tree.installed_compiler.empty() && !compiler.current) {
        totals.old_version_bytes += module.size_bytes;
      }
    }
    totals.registry_entries += static_cast<int>(compiler.registry.size());
  }
  return totals;
}

nlohmann::json state_counts(const std::array<Tally, kStates>& by_state) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < by_state.size(); ++i) {
    out[std::string(layout::state_name(static_cast<EntryState>(i)))] = {
        {"count", by_state[i].count}, {"size_bytes", by_state[i].bytes}};
  }
  return out;
}

nlohmann::json to_json(const local::CacheTree& tree, const Totals& totals) {
  nlohmann::json compilers = nlohmann::json::array();
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& compiler : tree.compilers) {
    std::array<Tally, kStates> by_state{};
    for (const auto& module : compiler.modules) {
      auto& t = by_state[static_cast<size_t>(module.state)];
      ++t.count;
      t.bytes += module.size_bytes;
      entries.push_back({{"path", compiler.name + "/" + module.name},
                         {"state", layout::state_name(module.state)},
                         {"size_bytes", module.size_bytes}});
    }
    compilers.push_back({{"name", compiler.name},
                         {"version", compiler.version},
                         {"current", compiler.current},
                         {"size_bytes", compiler.size_bytes},
                         {"entries", state_counts(by_state)},
                         {"registry_entries", compiler.registry.size()}});
  }
  return {{"cache_path", tree.root.string()},
          {"exists", tree.exists},
          {"current_compiler_version", tree.installed_compiler},
          {"total_size_bytes", totals.total_bytes},
          {"old_version_size_bytes", totals.old_version_bytes},
          {"entries_by_state", state_counts(totals.by_state)},
          {"registry_entries", totals.registry_entries},
          {"configurations",
           {{"recorded", totals.configurations}, {"complete", totals.complete_configurations}}},
          {"compiler_versions", compilers},
          {"entries", entries},
          {"skipped", tree.skipped},
          {"foreign_registry_links",
           {{"relocated", tree.foreign_links.relocated},
            {"outside", tree.foreign_links.outside},
            {"notes", local::describe_foreign_links(tree.foreign_links, tree.root)}}}};
}

std::string marker(const local::CacheTree& tree, const local::CompilerDir& compiler) {
  if (tree.installed_compiler.empty()) return "";
  return compiler.current ? " (current)" : " (old)";
}

void print_text(const local::CacheTree& tree, const Totals& totals) {
  std::cout << "Cache path: " << tree.root.string() << (tree.exists ? "" : " (does not exist yet)")
            << "\nTotal size: " << local::format_size(totals.total_bytes)
            << "\n\nCompiler versions:\n";
  for (const auto& compiler : tree.compilers) {
    std::cout << "  - " << compiler.name << marker(tree, compiler) << "\n";
  }
  if (tree.installed_compiler.empty()) {
    std::cout << "  (installed compiler unknown: pass --compiler-version to mark current/old)\n";
  }
  static const char* kLabels[kStates] = {
      "Success: ", "Failed:  ", "Locked:  ", "Empty:   ", "Traced:  "};
  std::cout << "\nEntry counts:\n";
  for (size_t i = 0; i < kStates; ++i) {
    char count[16];
    std::snprintf(count, sizeof count, "%6d", totals.by_state[i].count);
    std::cout << "  " << kLabels[i] << count << "  ("
              << local::format_size(totals.by_state[i].bytes) << ")\n";
  }
  if (totals.by_state[static_cast<size_t>(EntryState::Traced)].count > 0) {
    std::cout
        << "  (Traced: complete exports of encoders or diffusion models, MODULE_<entry hash>; "
           "optimum-cli neuron cache status counts them as Empty)\n";
  }
  std::cout << "\nRegistry entries: " << totals.registry_entries << "\n";
  std::cout << "Configurations recorded by neuron-cache: " << totals.configurations << " ("
            << totals.complete_configurations << " complete)\n";
  if (totals.old_version_bytes > 0) {
    std::cout << "\nOld compiler version data: " << local::format_size(totals.old_version_bytes)
              << "\n";
  }
  for (const auto& skipped : tree.skipped) warn("skipped " + skipped);
  for (const auto& line : local::describe_foreign_links(tree.foreign_links, tree.root)) warn(line);
}

void status(Context& context, bool json, bool zero_stats) {
  const config::Settings& settings = context.settings_with_compiler();
  local::LocalCache cache(settings.local_cache_root(), {settings.hf_hub_cache.value});
  if (zero_stats) local::zero_stats(cache.root());
  // The local index is read on a second thread while the tree is scanned: they read disjoint
  // folders and cost about the same (10,000 MODULE_ folders recorded by 5,000 configurations:
  // 0.5 s of CPU in all).
  std::future<Recorded> recorded =
      std::async(std::launch::async, [&cache] { return count_configurations(cache); });
  local::CacheTree tree = cache.scan(settings.compiler_version.value);
  Totals totals = tally(tree, recorded.get());
  local::Stats stats = local::read_stats(cache.root());
  if (json) {
    nlohmann::json out = to_json(tree, totals);
    out["stats"] = local::stats_json(stats);
    print_json(out);
  } else {
    print_text(tree, totals);
    std::cout << "\n" << report::stats_text(stats);
  }
}

}  // namespace

void register_status(CLI::App& app, Context& context) {
  CLI::App* cmd = app.add_subcommand(
      "status", "Show the local cache: path, size, compiler versions, entries per state");
  auto json = std::make_shared<bool>(false);
  auto zero = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON for scripts");
  cmd->add_flag("--zero-stats", *zero,
                "Start the statistics (hits, misses, bytes, compile time saved) again from now");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  cmd->callback([&context, json, zero] { status(context, *json, *zero); });
}

}  // namespace neuron_cache::cli
