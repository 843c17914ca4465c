// `neuron-cache synchronize`: publish the local cache to the Hub cache repo in one commit.
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/process/process.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/transfer/synchronize.h"

namespace neuron_cache::cli {
namespace {

struct Options {
  bool quiet = false;
  bool json = false;
};

nlohmann::json result_json(const transfer::SyncResult& r, const std::string& repo) {
  return {
      {"repo", repo},
      {"local_files", r.local_files},
      {"already_on_hub", r.already_stored},
      {"uploaded_files", r.to_upload},
      {"bytes_uploaded", r.bytes_to_upload},
      {"lfs_uploaded", r.commit.large_sent},
      {"lfs_already_stored", r.commit.large_already_stored},
      {"committed", r.commit.committed},
      {"commit", r.commit.revision},
      {"attempts", r.attempts},
      {"cleanup", r.cleanup_skipped ? "skipped: neuronx-cc is running" : r.cleanup.summary(false)},
      {"skipped", r.skipped}};
}

void synchronize(Context& context, const Options& options) {
  const config::Settings& settings = context.settings();
  storage::Store& store = context.store();
  std::string repo = store.name();
  local::LocalCache cache(settings.local_cache_root(), {settings.hf_hub_cache.value});
  transfer::SyncOptions sync;
  sync.conflicts = net::retry_policy(context.settings(), 6);
  sync.compiler_running = process::is_process_running("neuronx-cc");
  context.show_progress(options.quiet || options.json);
  if (!options.quiet && !options.json) {
    std::cerr << "Synchronizing " << repo << " Hub cache with " << cache.root().string()
              << " local cache\n";
  }
  transfer::SyncResult result = transfer::synchronize(store, cache, sync);
  if (options.json) {
    print_json(result_json(result, repo));
    return;
  }
  if (result.cleanup_skipped) warn("Skipping cache cleanup: neuronx-cc is currently running.");
  for (const auto& skipped : result.skipped) warn("not uploaded: " + skipped);
  if (options.quiet) return;
  if (!result.cleanup_skipped &&
      result.cleanup.bytes_freed + result.cleanup.failed_removed + result.cleanup.locks_removed >
          0) {
    std::cout << "Pre-sync cleanup: " << result.cleanup.summary(false) << "\n";
  }
  std::cout << result.local_files << " local files, " << result.already_stored
            << " already on the Hub, " << result.to_upload << " uploaded ("
            << report::human_bytes(result.bytes_to_upload) << ")";
  if (result.commit.committed) std::cout << " in commit " << result.commit.revision;
  if (result.attempts > 1) std::cout << " (attempt " << result.attempts << ")";
  std::cout << ".\nSynchronization complete.\n";
}

}  // namespace

void register_synchronize(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "synchronize",
      "Upload the local cache to the Hub cache repo in one commit (only what is missing there)");
  add_repo_option(cmd, context, "the configured one");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  cmd->add_flag("--quiet", options->quiet, "Print nothing but errors");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->callback([&context, options] { synchronize(context, *options); });
}

}  // namespace neuron_cache::cli
