// `neuron-cache gc`: remove from the cache store what nothing references (remote/gc.h holds the
// rules). A dry run unless --apply.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/maintenance/gc.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/report/gc.h"

namespace neuron_cache::cli {
namespace {

using format::human_bytes;

// Folders listed one by one in the text output; the JSON lists all.
constexpr size_t kShownFolders = 20;

struct Options {
  std::string older_than;
  std::vector<std::string> manifests;
  std::string grace = "1d";
  std::string unreferenced = "auto";
  bool apply = false;
  bool squash = false;
  bool json = false;
};

// A --manifest, read once.
struct Declared {
  std::string file;
  manifest::Manifest manifest;
};

std::vector<Declared> read_manifests(const std::vector<std::string>& files) {
  std::vector<Declared> out;
  for (const auto& file : files) out.push_back({file, manifest::load_manifest(file)});
  return out;
}

// The keys of every configuration the manifests declare.
std::set<std::string> declared_keys(Context& context, const std::vector<Declared>& manifests) {
  std::set<std::string> keys;
  for (const auto& declared : manifests) {
    pipeline::Options options;
    options.manifest = declared.file;
    options.loaded = declared.manifest;
    pipeline::Pipeline pipeline(context.settings_with_compiler(), context.remotes(), options);
    std::set<std::string> more = pipeline.declared_keys();
    keys.insert(more.begin(), more.end());
  }
  return keys;
}

maintenance::GcOptions gc_options(Context& context, const Options& options,
                                  const std::vector<Declared>& manifests) {
  maintenance::GcOptions out;
  out.grace = parse_duration(options.grace, "--grace");
  if (!options.older_than.empty())
    out.older_than = parse_duration(options.older_than, "--older-than");
  out.declared = declared_keys(context, manifests);
  out.unreferenced = *maintenance::unreferenced_named(options.unreferenced);
  return out;
}

void print_folders(const maintenance::GcPlan& plan) {
  size_t shown = std::min(kShownFolders, plan.removed.size());
  for (size_t i = 0; i < shown; ++i) {
    const maintenance::GcFolder& f = plan.removed[i];
    std::cout << "    " << printable(f.path, 300) << "  " << human_bytes(f.files.bytes) << "  ("
              << f.why << ")\n";
  }
  if (shown < plan.removed.size())
    std::cout << "    ... and " << plan.removed.size() - shown << " more (--json lists all)\n";
}

// What killed writers left, with why each may go.
void print_leftovers(const maintenance::GcPlan& plan) {
  if (plan.leftovers.empty()) return;
  std::cout << "  " << (plan.applied ? "Removed " : "Would remove ")
            << (plan.applied ? plan.leftovers_removed : plan.leftovers.size())
            << " leftovers of killed writers\n";
  size_t shown = std::min(kShownFolders, plan.leftovers.size());
  for (size_t i = 0; i < shown; ++i) {
    const storage::Leftover& l = plan.leftovers[i];
    std::cout << "    " << printable(l.path, 300) << "  " << storage::leftover_kind_name(l.kind)
              << ", " << human_bytes(l.size) << ", " << duration_text(l.age) << " old  (" << l.why
              << ")\n";
  }
  if (shown < plan.leftovers.size())
    std::cout << "    ... and " << plan.leftovers.size() - shown << " more (--json lists all)\n";
}

void print_summary(const maintenance::GcPlan& plan, const maintenance::GcOptions& options,
                   const std::string& origin) {
  std::string verb = plan.applied ? "Removed" : "Would remove";
  std::cout << "gc of " << plan.store << " (" << origin << "): " << plan.folders.count
            << " MODULE folders (" << human_bytes(plan.folders.bytes) << "), "
            << plan.referenced.count << " referenced, " << plan.configurations << " index entries, "
            << plan.lease_files << " lease files\n";
  if (options.older_than) {
    std::cout << "  " << (plan.applied ? "Dropped " : "Would drop ") << plan.dropped.size()
              << " index entries older than " << duration_text(*options.older_than)
              << (options.declared.empty() ? "" : " that no given manifest declares") << "\n";
  }
  std::cout << "  " << verb << " " << plan.removed.size() << " MODULE folders and "
            << plan.leases.size() << " lease files: " << human_bytes(plan.freed.bytes) << " in "
            << plan.freed.count << " files\n";
  print_folders(plan);
  print_leftovers(plan);
  for (const auto& kept : plan.kept) {
    std::cout << "  Kept " << kept.folders.count << " unreferenced folders ("
              << human_bytes(kept.folders.bytes) << "): " << kept.why << "\n";
  }
}

void print_text(const maintenance::GcPlan& plan, const maintenance::GcOptions& options,
                const std::string& origin) {
  print_summary(plan, options, origin);
  for (const auto& path : plan.spared) {
    std::cout << "  Spared " << printable(path, 300)
              << ": a push referenced it again while gc ran\n";
  }
  if (!plan.applied) {
    std::cout << "Dry run: nothing was removed. Run it again with --apply to remove this.\n";
  } else if (!plan.squashed_revision.empty()) {
    std::cout << "Squashed the history of " << plan.store << " into one commit ("
              << plan.squashed_revision
              << "): the LFS storage of deleted files is freed; older revisions no longer "
                 "resolve.\n";
  } else if (plan.kind == "hub" && plan.freed.count > 0) {
    std::cout << "On the Hub the deleted files stay in the repo's history, and its LFS storage "
                 "still counts them, until the history is squashed: `neuron-cache gc --apply "
                 "--squash` (irreversible: older revisions stop resolving).\n";
  }
  std::cout << "(" << plan.requests << " requests; no artifact was downloaded)\n";
}

// The store gc acts on: --repo, else the one the manifests name (they must agree: their
// configurations are kept in one store), else the configured one. --apply deletes only from a
// store named for it, never from the saved default that every `create` and `set` replaces.
void choose_store(Context& context, const Options& options,
                  const std::vector<Declared>& manifests) {
  if (!manifests.empty()) {
    std::optional<std::string> named;
    for (const auto& declared : manifests) {
      const std::optional<std::string>& repo = declared.manifest.cache_repo;
      if (named && repo && *repo != *named) {
        throw input_error("the manifests name different cache stores (" + *named + ", " + *repo +
                          "): gc acts on one store; run it once per store, each with the "
                          "manifests of that store");
      }
      if (repo) named = repo;
    }
    context.use_manifest(manifests.front().manifest, manifests.front().file);
  }
  if (options.apply && !context.store_named()) {
    throw input_error("gc --apply would delete from " + context.settings().cache_repo.value + ", " +
                      context.store_origin() +
                      ", which names no store for this command: name the store to delete "
                      "from with --repo or --manifest (the saved default changes with every "
                      "`create` and `set`); without --apply, gc only shows what it would remove");
  }
}

void gc(Context& context, const Options& options) {
  if (options.squash && !options.apply)
    throw input_error("--squash rewrites the Hub repo's history: give --apply too");
  if (!options.manifests.empty() && options.older_than.empty())
    throw input_error("--manifest says which old entries to keep: give --older-than too");
  const std::vector<Declared> manifests = read_manifests(options.manifests);
  choose_store(context, options, manifests);
  maintenance::GcOptions gc_options_ = gc_options(context, options, manifests);
  maintenance::GcPlan plan =
      maintenance::collect_garbage(context.store(), gc_options_, {options.apply, options.squash},
                                   net::retry_policy(context.settings(), 6));
  for (const auto& problem : plan.problems) warn(problem);
  if (options.json) {
    print_json(report::gc_json(plan));
    return;
  }
  print_text(plan, gc_options_, context.store_origin());
}

}  // namespace

void register_gc(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "gc",
      "Remove from the cache store the MODULE folders nothing references, index entries older "
      "than --older-than that no --manifest declares, and ended lease files (a dry run unless "
      "--apply)");
  add_repo_option(cmd, context, "the manifest's cache_repo, else the configured one");
  cmd->add_option("--older-than", options->older_than,
                  "Drop index entries created longer ago than this (90d), with the folders only "
                  "they reference");
  cmd->add_option("--manifest", options->manifests,
                  "Keep every configuration this manifest declares, however old (repeatable)");
  cmd->add_option("--grace", options->grace,
                  "Never remove what was written more recently than this: pushes in flight")
      ->default_str("1d");
  cmd->add_option("--unreferenced", options->unreferenced,
                  "MODULE folders no index entry or registry file references: auto (remove them "
                  "where only neuron-cache writes), keep, or remove")
      ->default_str("auto")
      ->check(CLI::IsMember({"auto", "keep", "remove"}));
  cmd->add_flag("--apply", options->apply, "Remove what the dry run lists");
  cmd->add_flag("--squash", options->squash,
                "Hub only, with --apply: squash the repo's history into one commit afterwards, "
                "the only way the Hub frees the storage of deleted files (irreversible)");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->callback([&context, options] { gc(context, *options); });
}

}  // namespace neuron_cache::cli
