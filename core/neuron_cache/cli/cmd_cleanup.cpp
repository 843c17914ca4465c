// `neuron-cache cleanup`: remove poisoned entries the way optimum-cli neuron cache cleanup does,
// and with --max-size (or NEURON_CACHE_MAX_SIZE) keep the cache under a size, as sccache does.
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/process/process.h"

namespace neuron_cache::cli {
namespace {

struct Flags {
  bool all = false;
  bool old_versions = false;
  bool wipe = false;
  bool dry_run = false;
  bool json = false;
};

// The views of compile runs hold hard links to deleted entries (removed now or by hand): the
// idle ones let go of them, so their space comes back now rather than at their next use.
void prune_views(const local::LocalCache& cache, bool dry_run, local::CleanupResult& result) {
  std::vector<std::string> gone = result.removed;
  for (const auto& entry : result.evicted) gone.push_back(entry.path);
  compile::ViewsPruned views = compile::prune_views(cache.root(), gone, dry_run);
  result.view_entries_unseeded = static_cast<int>(views.entries_unseeded);
  result.views_in_use = static_cast<int>(views.views_in_use);
  result.view_bytes_held = views.bytes_held;
  result.bytes_freed += views.bytes_freed;
}

std::string last_used(const local::EvictedEntry& entry) {
  return utc_text(static_cast<int64_t>(entry.last_used));
}

// --max-size's fields; null when no bound was given, so a reader tells "none" from "nothing to do".
void add_size_bound(nlohmann::json& out, const local::CleanupResult& result) {
  if (!result.max_size) {
    out["max_size"] = nullptr;
    return;
  }
  nlohmann::json evicted = nlohmann::json::array();
  for (const auto& entry : result.evicted) {
    evicted.push_back(
        {{"path", entry.path}, {"bytes", entry.bytes}, {"last_used", last_used(entry)}});
  }
  out["max_size"] = *result.max_size;
  out["size_before"] = result.size_before;
  out["size_after"] = result.size_after;
  out["evicted"] = evicted;
  out["skipped_in_use"] = result.skipped_in_use;
}

void cleanup(Context& context, const Flags& flags) {
  const config::Settings& settings = context.settings_with_compiler();
  local::LocalCache cache(settings.local_cache_root(), {settings.hf_hub_cache.value});
  local::CleanupOptions options;
  options.remove_empty = flags.all;
  options.remove_old_versions = flags.old_versions;
  options.wipe = flags.wipe;
  options.dry_run = flags.dry_run;
  options.installed_compiler = settings.compiler_version.value;
  options.compiler_running = !flags.wipe && process::is_process_running("neuronx-cc");
  options.max_size = settings.max_size_bytes();
  local::CleanupResult result = local::cleanup_cache(cache, options);
  if (!result.wiped) prune_views(cache, flags.dry_run, result);
  if (flags.json) {
    nlohmann::json out = {{"cache_path", cache.root().string()},
                          {"dry_run", flags.dry_run},
                          {"wiped", result.wiped},
                          {"failed_removed", result.failed_removed},
                          {"locks_removed", result.locks_removed},
                          {"empty_removed", result.empty_removed},
                          {"traced_kept", result.traced_kept},
                          {"staging_removed", result.staging_removed},
                          {"view_entries_unseeded", result.view_entries_unseeded},
                          {"view_bytes_held", result.view_bytes_held},
                          {"old_versions_removed", result.old_versions_removed},
                          {"skipped_locks_reason", result.skipped_locks_reason},
                          {"bytes_freed", result.bytes_freed},
                          {"removed", result.removed},
                          {"summary", result.summary(flags.dry_run)}};
    add_size_bound(out, result);
    print_json(out);
    return;
  }
  for (const auto& path : result.removed) {
    std::cout << (flags.dry_run ? "would remove " : "removed ") << path << "\n";
  }
  for (const auto& entry : result.evicted) {
    std::cout << (flags.dry_run ? "would evict " : "evicted ") << entry.path << " ("
              << format::human_bytes(entry.bytes) << ", last used " << last_used(entry) << ")\n";
  }
  std::cout << result.summary(flags.dry_run) << "\n";
}

}  // namespace

void register_cleanup(CLI::App& app, Context& context) {
  CLI::App* cmd = app.add_subcommand(
      "cleanup",
      "Remove FAILED entries and stale lock files (locks are kept while neuronx-cc runs); with "
      "--max-size, evict the least recently used entries until the cache fits");
  auto flags = std::make_shared<Flags>();
  cmd->add_flag("--all", flags->all,
                "Also remove EMPTY (incomplete) entries; complete traced exports "
                "(MODULE_<entry hash> with config.json and *.neuron files) are kept, unlike "
                "optimum-cli neuron cache cleanup --all");
  cmd->add_flag("--old-versions", flags->old_versions,
                "Also remove whole neuronxcc-* folders of other compiler versions");
  cmd->add_flag("--wipe", flags->wipe, "Remove the entire cache root");
  cmd->add_option_function<std::string>(
         "--max-size", [&context](const std::string& v) { context.overrides().max_size = v; },
         "After the rest, delete the least recently used complete entries until the cache (every "
         "MODULE_ folder, as status counts) is at most SIZE, as sccache's SCCACHE_CACHE_SIZE; "
         "entries a compile or download holds locked are kept. Default: NEURON_CACHE_MAX_SIZE. "
         "SIZE: " +
             std::string(format::kSizeForms))
      ->type_name("SIZE");
  cmd->add_flag("--dry-run", flags->dry_run, "Report what would be removed without removing it");
  cmd->add_flag("--json", flags->json, "Print JSON for scripts");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  cmd->callback([&context, flags] { cleanup(context, *flags); });
}

}  // namespace neuron_cache::cli
