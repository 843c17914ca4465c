// `neuron-cache fetch`: installs the MODULE_ folders a user names (or the traced export a
// registry entry names) from a Hub cache repo into the local cache, for people who know what
// they need. No index, no registry scan: the names are the plan.
#include <iostream>
#include <map>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/transfer/fetch.h"

namespace neuron_cache::cli {
namespace {

struct Options {
  std::vector<std::string> modules;
  std::vector<std::string> registry;  // entry paths in the repo or entry hashes
  bool json = false;
  bool dry_run = false;
};

// What one compiler folder needs: MODULE_ folders, and registry files installed after them.
struct FolderWork {
  std::vector<std::string> modules;
  std::vector<transfer::RegistryFile> registry;
};

// A row of the report, for modules and registry files alike.
struct Line {
  std::string path;
  transfer::FetchStatus status;
  std::string error;
  size_t files = 0;
  uint64_t bytes = 0;
  bool from_registry = false;  // a MODULE_<hash> named by a registry entry
};

std::map<std::string, FolderWork> gather(storage::Store& store, const Options& options,
                                         const std::string& compiler_version, uint64_t& listings) {
  const std::string repo = store.name();
  std::vector<std::string> dirs = transfer::list_compiler_dirs(store, "", &listings);
  std::map<std::string, FolderWork> work;
  if (!options.modules.empty()) {
    if (compiler_version.empty()) {
      throw input_error(
          "no compiler version: pass --compiler-version V (the neuronxcc-V folder the MODULE "
          "folders are in)");
    }
    auto& folder = work[transfer::pick_compiler_dir(dirs, compiler_version, repo)];
    folder.modules = options.modules;
  }
  std::vector<std::string> searched = dirs;
  if (!compiler_version.empty() && !options.registry.empty()) {
    searched = {transfer::pick_compiler_dir(dirs, compiler_version, repo)};
  }
  for (const auto& reference : options.registry) {
    auto files = transfer::find_registry_entry(store, "", reference, searched, &listings);
    if (files.empty()) {
      throw input_error("no registry entry " + reference + " in " + repo +
                        ": check the hash or path with `neuron-cache lookup MODEL_ID --json`");
    }
    for (const auto& file : files) {
      auto& folder = work[file.compiler_dir];
      folder.registry.push_back(file);
      std::string module = std::string(layout::kModulePrefix) + file.hash;
      if (std::find(folder.modules.begin(), folder.modules.end(), module) == folder.modules.end())
        folder.modules.push_back(module);
    }
  }
  return work;
}

bool named_by_registry(const FolderWork& work, const std::string& module) {
  for (const auto& file : work.registry) {
    if (std::string(layout::kModulePrefix) + file.hash == module) return true;
  }
  return false;
}

std::vector<Line> plan_lines(storage::Store& store, const local::LocalCache& cache,
                             const std::string& dir, const FolderWork& work, uint64_t& listings) {
  std::vector<Line> lines;
  for (const auto& plan : transfer::plan_modules(store, "", cache, dir, work.modules, &listings)) {
    lines.push_back({dir + "/" + plan.name, plan.status, plan.error, plan.files.size(),
                     plan.bytes(), named_by_registry(work, plan.name)});
  }
  for (const auto& file : work.registry) {
    lines.push_back({dir + "/" + file.entry.path, transfer::FetchStatus::Installed, "", 1,
                     file.entry.size, false});
  }
  return lines;
}

std::vector<Line> fetch_lines(storage::Store& store, const local::LocalCache& cache,
                              const std::string& dir, const FolderWork& work, uint64_t& listings,
                              uint64_t& bytes) {
  transfer::FetchResult result = transfer::fetch_modules(store, "", cache, dir, work.modules);
  listings += result.listing_requests;
  bytes += result.bytes_downloaded;
  std::vector<Line> lines;
  bool modules_ok = true;
  for (const auto& m : result.modules) {
    Line line{dir + "/" + m.name, m.status, m.error, 0, 0, named_by_registry(work, m.name)};
    if (m.record) {
      line.files = m.record->files.size();
      line.bytes = m.record->size();
    }
    modules_ok = modules_ok && (m.status == transfer::FetchStatus::Installed ||
                                m.status == transfer::FetchStatus::AlreadyPresent);
    lines.push_back(line);
  }
  // A registry entry says "this compiled": it goes in only once its folder is there.
  if (!modules_ok) return lines;
  for (const auto& r : transfer::fetch_registry_files(store, "", cache, work.registry)) {
    bool installed = r.status == transfer::FetchStatus::Installed;
    lines.push_back({dir + "/" + r.file.entry.path, r.status, r.error, installed ? 1u : 0u,
                     installed ? r.file.entry.size : 0, false});
  }
  return lines;
}

bool line_ok(const Line& line) {
  return line.status == transfer::FetchStatus::Installed ||
         line.status == transfer::FetchStatus::AlreadyPresent;
}

// Decoder entries do not name their MODULE_ folders (format spec 13c): say so when the folder
// a registry entry was taken to name is missing.
std::string explain(const Line& line) {
  if (line.status == transfer::FetchStatus::NotInStore && line.from_registry) {
    return line.error +
           ". Only traced exports store their artifacts as MODULE_<entry hash>; a decoder "
           "entry does not name its MODULE folders";
  }
  return line.error;
}

std::string status_text(const Line& line, bool dry_run) {
  if (dry_run && line.status == transfer::FetchStatus::Installed) {
    return "would fetch " + std::to_string(line.files) + " files (" +
           report::human_bytes(line.bytes) + ")";
  }
  std::string text(transfer::status_name(line.status));
  if (line.status == transfer::FetchStatus::Installed) {
    text += " (" + std::to_string(line.files) + " files, " + report::human_bytes(line.bytes) + ")";
  }
  return text;
}

nlohmann::json line_json(const Line& line, bool dry_run) {
  std::string status = dry_run && line.status == transfer::FetchStatus::Installed
                           ? "to fetch"
                           : std::string(transfer::status_name(line.status));
  return {{"path", line.path},
          {"status", status},
          {"files", line.files},
          {"bytes", line.bytes},
          {"error", line.error.empty() ? nlohmann::json() : nlohmann::json(explain(line))}};
}

void fetch(Context& context, const Options& options) {
  if (options.modules.empty() && options.registry.empty()) {
    throw input_error("nothing to fetch: name MODULE_ folders or pass --registry ENTRY");
  }
  const config::Settings& settings = context.settings_with_compiler();
  if (settings.require_signatures) {
    // Folders named by hand are installed without an index entry, so no signature covers them.
    throw input_error(
        "fetch installs MODULE folders no signature covers, and signatures are "
        "required (" +
        settings.require_signatures_origin.origin +
        "): declare the configurations in a manifest and run `neuron-cache "
        "prefetch`, which installs only entries a trusted key signed");
  }
  storage::Store& store = context.store();
  std::string repo = store.name();
  local::LocalCache cache(settings.local_cache_root(), {settings.hf_hub_cache.value});
  context.show_progress(options.json);
  uint64_t listings = 0;
  uint64_t bytes = 0;
  std::vector<Line> lines;
  for (const auto& [dir, work] :
       gather(store, options, settings.compiler_version.value, listings)) {
    auto done = options.dry_run ? plan_lines(store, cache, dir, work, listings)
                                : fetch_lines(store, cache, dir, work, listings, bytes);
    lines.insert(lines.end(), done.begin(), done.end());
  }
  size_t failed =
      std::count_if(lines.begin(), lines.end(), [](const Line& l) { return !line_ok(l); });
  if (options.json) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& line : lines) items.push_back(line_json(line, options.dry_run));
    print_json({{"repo", repo},
                {"cache_dir", cache.root().string()},
                {"dry_run", options.dry_run},
                {"items", items},
                {"bytes_downloaded", bytes},
                {"listing_requests", listings}});
  } else {
    for (const auto& line : lines) {
      std::cout << line.path << ": " << status_text(line, options.dry_run) << "\n";
    }
    if (!options.dry_run) {
      std::cout << "Fetched " << report::human_bytes(bytes) << " from " << repo << " into "
                << cache.root().string() << ".\n";
    }
  }
  for (const auto& line : lines) {
    if (!line_ok(line)) std::cerr << "neuron-cache: " << line.path << ": " << explain(line) << "\n";
  }
  if (failed > 0) {
    throw operational_error(std::to_string(failed) + " of " + std::to_string(lines.size()) +
                            " items were not fetched (see above)");
  }
}

}  // namespace

void register_fetch(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "fetch",
      "Install named MODULE_ folders (of --compiler-version V), or the traced export a registry "
      "entry names (--registry), from the Hub cache repo into the local cache");
  cmd->add_option("modules", options->modules,
                  "MODULE_ folder names, e.g. MODULE_1234+d7cde3b5 (in neuronxcc-V)");
  cmd->add_option("--registry", options->registry,
                  "A registry entry of a traced export: its path in the repo or its 20-hex hash; "
                  "fetches the entry and its MODULE_<hash> folder");
  add_repo_option(cmd, context, "the configured one");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  cmd->add_flag("--dry-run", options->dry_run, "List what would be fetched, with sizes");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->callback([&context, options] { fetch(context, *options); });
}

}  // namespace neuron_cache::cli
