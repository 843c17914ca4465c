// `neuron-cache lock`: the lockfile of a manifest (format/lockfile.h); `--locked` runs read it
// through Pipeline::use_lockfile (pipeline/lock_step.cpp).
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/local/bundle.h"
#include "neuron_cache/pipeline/run.h"

namespace neuron_cache::cli {
namespace {

namespace fs = std::filesystem;

struct LockArgs {
  pipeline::Options options;
  std::string output;
  std::vector<std::string> update;
  bool check = false;
  bool json = false;
};

std::vector<std::string> selected_names(const manifest::Manifest& manifest,
                                        const std::vector<std::string>& configs) {
  if (!configs.empty()) return configs;
  std::vector<std::string> names;
  for (const auto& c : manifest.configurations) names.push_back(c.name);
  return names;
}

void check(Context& context, LockArgs& args) {
  auto p = context.open_pipeline(args.options, true);
  fs::path path = pipeline::lock_path(args.options.manifest, args.output);
  lockfile::Lock lock = pipeline::require_lock(path, args.options.manifest.string());
  std::vector<std::string> names = selected_names(p->context().manifest, args.options.configs);
  if (std::string problem = pipeline::lock_problem(lock, p->context().manifest, names, path);
      !problem.empty())
    throw GateFailed{problem};
  std::cout << path.string() << " locks the " << names.size() << " configurations of "
            << args.options.manifest.string() << "\n";
}

// The locked configurations: the store's entries of those re-resolved (all, or --update's),
// the others kept from the lock already there.
lockfile::Lock resolve(pipeline::Pipeline& p, const LockArgs& args, const fs::path& path) {
  std::optional<lockfile::Lock> old;
  if (!args.update.empty()) {
    old = pipeline::require_lock(path, args.options.manifest.string());
    for (const auto& name : args.update) {
      if (p.context().manifest.find(name) == nullptr)
        throw input_error("--update " + name + ": " + args.options.manifest.string() +
                          " declares no such configuration");
    }
  }
  p.read_head_when_local(true);
  plan::Plan plan = p.make_plan();
  pipeline::LockStep step = p.lock(plan);
  if (!step.missing.empty()) {
    std::string list;
    for (const auto& line : step.missing) list += "\n  " + line;
    throw operational_error("cannot lock " + std::to_string(step.missing.size()) +
                            " configurations, so no lockfile was written:" + list);
  }
  step.lock.manifest = fs::path(args.options.manifest).filename().string();
  step.lock.manifest_sha256 = p.context().manifest.text_sha256;
  if (!old) return step.lock;
  std::set<std::string> updated(args.update.begin(), args.update.end());
  // The pipeline's manifest holds the selected configurations only: the whole file's here.
  manifest::Manifest whole = manifest::load_manifest(args.options.manifest);
  for (const auto& c : whole.configurations) {
    if (updated.count(c.name) != 0) continue;
    const lockfile::Locked* kept = old->find(c.name);
    if (kept == nullptr)
      throw input_error(path.string() + " does not lock " + c.name + ": add --update " + c.name);
    step.lock.configurations.push_back(*kept);
  }
  return step.lock;
}

struct BundleArgs {
  pipeline::Options options;
  std::string lockfile;
  std::string output;
};

// Every file the lock's entries name (relative to the cache root `root`), read from itself, or
// for a link (optimum-neuron's registry alias) from a locked regular file of the same sha256.
std::vector<bundle::Member> locked_members(const lockfile::Lock& lock, const fs::path& root) {
  const std::vector<lockfile::LockedFile> files = lockfile::locked_files(lock);
  std::map<std::string, std::string> regular;  // sha256 -> a path that is no link
  for (const auto& file : files)
    if (!fs::is_symlink(root / file.path)) regular.emplace(file.sha256, file.path);
  std::vector<bundle::Member> members;
  for (const auto& file : files) {
    auto it = regular.find(file.sha256);
    if (it == regular.end())
      throw operational_error(file.path + " in " + root.string() + " is a link to no locked file");
    members.push_back({file.path, fs::is_symlink(root / file.path) ? it->second : file.path});
  }
  return members;
}

// `bundle`: a locked prefetch into the local cache (every file verified), then the lockfile and
// those files in one tar.
void write_bundle(Context& context, BundleArgs& args) {
  auto p = context.open_pipeline(args.options, true);
  p->use_lockfile(args.lockfile);
  pipeline::RunSteps steps;
  steps.prefetch = true;
  pipeline::run(*p, steps);
  fs::path lock = pipeline::lock_path(args.options.manifest, args.lockfile);
  // The lock the prefetch used, read once: the file may change meanwhile.
  const lockfile::Lock& parsed = *p->context().lock_in_use();
  std::string text = lockfile::serialize(parsed);
  std::vector<bundle::Member> files = locked_members(parsed, p->context().root);
  bundle::write(args.output, text, p->context().root, files);
  std::cout << "bundled " << parsed.configurations.size() << " locked configurations ("
            << files.size() << " files) and " << lock.filename().string() << " in " << args.output
            << "\n";
}

void lock(Context& context, LockArgs& args) {
  if (args.check) return check(context, args);
  if (!args.update.empty()) args.options.configs = args.update;
  auto p = context.open_pipeline(args.options, args.json);
  fs::path path = pipeline::lock_path(args.options.manifest, args.output);
  lockfile::Lock lock = resolve(*p, args, path);
  std::string text = lockfile::serialize(lock);
  try {
    sys::replace_file(path, text);
  } catch (const std::exception& e) {
    throw operational_error("cannot write " + path.string() + ": " + e.what());
  }
  uint64_t bytes = 0;
  size_t modules = 0;
  for (const auto& locked : lock.configurations) {
    bytes += locked.entry.total_bytes();
    modules += locked.entry.modules.size();
  }
  if (args.json) {
    print_json({{"lockfile", path.string()},
                {"store", lock.store},
                {"revision", lock.revision},
                {"configurations", lock.configurations.size()},
                {"modules", modules},
                {"bytes", bytes}});
    return;
  }
  std::cout << "locked " << lock.configurations.size() << " configurations (" << modules
            << " MODULE folders, " << format::human_bytes(bytes) << ") of " << lock.store
            << (lock.revision.empty() ? "" : " at " + lock.revision.substr(0, 12)) << " in "
            << path.string() << "\n";
}

// The manifest argument and the store options `lock` and `bundle` share.
void add_manifest_and_stores(CLI::App* cmd, Context& context, pipeline::Options& options) {
  cmd->add_option("manifest", options.manifest, "The manifest")->required();
  add_repo_option(cmd, context, "the manifest's cache_repo, CUSTOM_CACHE_REPO, the saved one");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  add_trust_options(cmd, context);
}

}  // namespace

void register_bundle(CLI::App& app, Context& context) {
  auto args = std::make_shared<BundleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bundle",
      "Write the lockfile and every file it locks into one tar, for machines with no network "
      "(`prefetch --from-bundle`); fetches what the local cache lacks first, verified");
  add_manifest_and_stores(cmd, context, args->options);
  cmd->add_option("--output,-o", args->output, "The bundle to write (a .tar file)")->required();
  cmd->add_option("--lockfile", args->lockfile, "The lockfile (default: beside the manifest)");
  cmd->callback([&context, args] { write_bundle(context, *args); });
}

void register_lock(CLI::App& app, Context& context) {
  register_bundle(app, context);
  auto args = std::make_shared<LockArgs>();
  CLI::App* cmd = app.add_subcommand(
      "lock",
      "Write neuron-cache.lock beside the manifest: each configuration's index entry in the cache "
      "store (key, inputs, every file with its size and sha256), for `prefetch --locked`");
  add_manifest_and_stores(cmd, context, args->options);
  cmd->add_option("--config", args->options.configs,
                  "Lock only this configuration (repeatable); the lock then covers only these")
      ->allow_extra_args(false);
  // --lockfile as prefetch and bundle spell it; -o/--output of earlier releases still works,
  // unlisted.
  cmd->add_option("--lockfile", args->output,
                  "The lockfile to write (default: neuron-cache.lock beside the manifest)");
  cmd->add_option("--output,-o", args->output)->group("");
  cmd->add_option("--update", args->update,
                  "Re-resolve only this configuration, keeping the others' locked entries "
                  "(repeatable)");
  cmd->add_flag("--check", args->check,
                "Read nothing but the files: exit 3 when the lockfile does not lock this very "
                "manifest (changed since, or a configuration missing)");
  cmd->add_flag("--json", args->json, "Print JSON for scripts");
  cmd->callback([&context, args] { lock(context, *args); });
}

}  // namespace neuron_cache::cli
