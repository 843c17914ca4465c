#include "neuron_cache/maintenance/gc.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/remote/commit_on_head.h"
#include "neuron_cache/remote/listed_files.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/sys/temp_file.h"

namespace neuron_cache::maintenance {
namespace {

namespace ai = artifact_index;
using storage::RemoteEntry;

constexpr size_t kMaxProblems = 100;
constexpr size_t kShownName = 200;

constexpr const char* kWhyDropped = "its index entries were dropped";
constexpr const char* kWhyUnreferenced = "nothing references it";

struct Folder {
  Tally files;
  int64_t newest = 0;
  bool unknown_time = false;  // a file listed without a modification time
  std::vector<std::string> paths;
};

// One compiler folder as gc sees it.
struct Version {
  std::map<std::string, Folder> folders;     // by MODULE_ name
  std::set<std::string> registry_stems;      // <h> of every 0_REGISTRY/**/<h>.json
  std::set<std::string> indexed_stems;       // <h> of registry files index entries list
  std::set<std::string> referenced;          // MODULE_ names kept entries name
  std::set<std::string> dropped_references;  // MODULE_ names dropped entries name
  bool indexed = false;                      // some index entry is of this version
  bool index_incomplete = false;             // an index file or entry could not be read
  std::optional<int64_t> live_lease_since;   // the earliest start of a live compile lease
};

std::string stem_of(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.ends_with(".json") ? name.substr(0, name.size() - 5) : std::string();
}

// Whether gc drops `entry`: older than the limit, and no manifest given declares it.
bool expired(const ai::Entry& entry, const GcOptions& options) {
  if (!options.older_than || options.declared.count(entry.key) != 0) return false;
  std::optional<int64_t> created = parse_utc_timestamp(entry.created_at);
  return created && options.now - *created > *options.older_than;
}

// The ages past which no live writer owns a leftover: a copy takes seconds (an hour), a folder
// waits for its first file within gc's grace, an upload ends within a day.
storage::LeftoverAges leftover_ages(const GcOptions& options) {
  storage::LeftoverAges ages;
  ages.now = options.now;
  ages.folder = options.grace;
  return ages;
}

class Survey {
 public:
  Survey(storage::Store& store, const GcOptions& options)
      : store_(store), options_(options), before_(store.requests()) {
    plan_.store = store.name();
    plan_.kind = std::string(storage::kind_name(store.kind()));
  }

  GcPlan run() {
    plan_.revision = store_.head();
    std::vector<RemoteEntry> tops = store_.list_or_failure("", false, plan_.revision).value();
    for (const auto& top : tops) visit(top);
    read_index();
    read_leases();
    decide_folders();
    find_leftovers();
    plan_.requests = store_.requests() - before_;
    return std::move(plan_);
  }

 private:
  void visit(const RemoteEntry& top) {
    if (!top.is_directory) return;
    std::optional<std::string> version = layout::compiler_version_of(top.path);
    bool index = top.path == ai::kRemoteDir;
    bool leases = top.path == lease::kRemoteDir;
    if (!version && !index && !leases) return;
    // A compiler folder gc cannot list is not decided on: the error stops the whole plan.
    std::vector<RemoteEntry> files = store_.list_or_failure(top.path, true, plan_.revision).value();
    count(files.size());
    for (const auto& file : files) {
      if (file.is_directory || !file.path.starts_with(top.path + "/")) continue;
      if (version) {
        add_compiler_file(versions_[*version], file, file.path.substr(top.path.size() + 1));
      } else if (!file.path.ends_with(".json")) {
        continue;
      } else {
        (index ? index_files_ : lease_files_).push_back(file);
      }
    }
  }

  void add_compiler_file(Version& version, const RemoteEntry& file, const std::string& rest) {
    std::string first = rest.substr(0, rest.find('/'));
    if (first == layout::kRegistryDir) {
      if (std::string stem = stem_of(rest); !stem.empty()) version.registry_stems.insert(stem);
      return;
    }
    if (!first.starts_with(layout::kModulePrefix) || first.size() == rest.size()) return;
    Folder& folder = version.folders[first];
    folder.files.add(1, file.size);
    folder.paths.push_back(file.path);
    if (file.modified == 0) folder.unknown_time = true;
    folder.newest = std::max(folder.newest, file.modified);
  }

  void count(uint64_t files) {
    listed_ = saturating_add(listed_, files, plan_.saturated);
    if (listed_ <= options_.max_files) return;
    throw operational_error(storage::describe(store_.kind(), store_.location()) +
                            " lists more than " + std::to_string(options_.max_files) +
                            " files: too many for gc to decide from listings; check that the "
                            "store's root is the cache's");
  }

  void read_index() {
    std::vector<RemoteEntry> readable;
    for (const auto& file : index_files_) {
      if (file.size <= remote::kMaxIndexFileBytes) {
        readable.push_back(file);
      } else {
        index_unreadable(file.path, "larger than an index file may be");
      }
    }
    std::vector<storage::Read<std::string>> texts =
        remote::read_listed_files(store_, plan_.revision, readable);
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].failed()) {
        index_unreadable(readable[i].path, texts[i].failure().message);
      } else {
        parse_index_file(readable[i].path, texts[i].value());
      }
    }
    for (auto& [id, seen] : entries_) add_entry(seen.first, seen.second);
  }

  void parse_index_file(const std::string& path, const std::string& text) {
    ai::IndexFile file;
    try {
      file = ai::parse_index(text, plan_.store + "/" + printable(path, kShownName));
    } catch (const Error& error) {
      index_unreadable(path, error.what());
      return;
    }
    if (!file.unreadable.empty()) {
      mark_incomplete(path);
      for (const auto& why : file.problems) problem("an index entry gc cannot read: " + why);
    }
    for (auto& [key, entry] : file.entries) {
      auto& seen = entries_[{entry.inputs.compiler_version, key}];
      if (seen.second.empty()) seen.first = entry;
      seen.second.push_back(path);
    }
  }

  // Folders an unreadable index file may reference are never taken for unreferenced.
  void index_unreadable(const std::string& path, const std::string& why) {
    problem("could not read the index file " + printable(path, kShownName) + " (" + why +
            "): the MODULE_ folders of its compiler version are kept");
    mark_incomplete(path);
  }

  void mark_incomplete(const std::string& path) {
    if (std::optional<std::string> version = ai::compiler_version_of_index(path)) {
      versions_[*version].index_incomplete = true;
    } else {
      all_incomplete_ = true;
    }
  }

  void add_entry(const ai::Entry& entry, const std::vector<std::string>& files) {
    ++plan_.configurations;
    Version& version = versions_[entry.inputs.compiler_version];
    version.indexed = true;
    for (const auto& file : entry.registry) version.indexed_stems.insert(stem_of(file.name));
    bool drop = expired(entry, options_);
    for (const auto& module : entry.modules)
      (drop ? version.dropped_references : version.referenced).insert(module.name);
    if (!drop) return;
    plan_.dropped.push_back({printable(entry.inputs.compiler_version, kShownName), entry.key,
                             printable(cache_key::owner_of(entry.inputs), kShownName),
                             printable(entry.configuration, kShownName), entry.created_at, files});
  }

  void read_leases() {
    std::vector<RemoteEntry> small;
    for (const auto& file : lease_files_) {
      ++plan_.lease_files;
      if (file.size <= lease::kMaxLeaseBytes) small.push_back(file);
    }
    std::vector<storage::Read<std::string>> texts =
        remote::read_listed_files(store_, plan_.revision, small);
    std::vector<RemoteEntry> damaged;  // listed without a time: only its age decides
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].failed()) {
        problem("could not read the lease file " + printable(small[i].path, kShownName) + " (" +
                texts[i].failure().message + "): kept");
        continue;
      }
      std::optional<lease::Record> record = lease::parse(texts[i].value());
      if (!record && small[i].modified == 0)
        damaged.push_back(small[i]);
      else
        decide_lease(small[i], record);
    }
    std::vector<std::string> paths;
    for (const auto& file : damaged) paths.push_back(file.path);
    std::map<std::string, int64_t> times = ask_times(paths, "damaged lease files");
    for (auto& file : damaged) {
      if (auto it = times.find(file.path); it != times.end()) file.modified = it->second;
      decide_lease(file, std::nullopt);
    }
  }

  void decide_lease(const RemoteEntry& file, const std::optional<lease::Record>& record) {
    int64_t now = options_.now;
    if (record && record->live(now)) {
      // Bounded: a live lease is not damaged, so its heartbeat is less than
      // lease::kMaxLifeSeconds old and its start at most lease::kMaxCompileSeconds before that.
      if (std::optional<std::string> version = lease::compiler_version_of_lease(file.path)) {
        auto& since = versions_[*version].live_lease_since;
        since = since ? std::min(*since, record->started) : record->started;
      } else {
        lease_everywhere_ = true;
      }
      return;
    }
    std::string why;
    if (!record) {
      // Unreadable text protects nothing, but only its listed age says nobody is rewriting it (a
      // newer format, a write cut short).
      if (file.modified != 0 && now - file.modified > options_.grace) why = "damaged";
    } else if (std::optional<std::string> damaged = lease::damaged(*record, now)) {
      // Of this format, but no live holder wrote it: hostile, or a clock far off. It goes now.
      why = "damaged: " + *damaged;
    } else if (record->state == lease::State::Compiling) {
      if (now - record->expires > options_.grace) why = "expired without a result";
    } else if (now - record->heartbeat > options_.grace) {
      why = std::string(lease::state_name(record->state));
    }
    if (why.empty()) return;
    plan_.leases.push_back({file.path, file.size, why});
    plan_.freed.add(1, file.size);
  }

  void decide_folders() {
    for (auto& [name, version] : versions_) {
      for (const auto& stem : version.registry_stems)
        version.referenced.insert(std::string(layout::kModulePrefix) + stem);
    }
    ask_folder_times();
    for (auto& [name, version] : versions_) {
      for (auto& [module, folder] : version.folders) decide_folder(name, version, module, folder);
    }
    for (auto& [why, tally] : kept_) plan_.kept.push_back({why, tally});
  }

  // A store whose listings carry no times (the Hub) is asked when each folder nothing references
  // was last written (the Hub's last commit touching it), for those folders only: the grace
  // period holds there too. Without an answer the folder has no time and stays.
  void ask_folder_times() {
    std::map<std::string, Folder*> unknown;  // by path in the store
    for (auto& [name, version] : versions_) {
      for (auto& [module, folder] : version.folders) {
        if (folder.unknown_time && version.referenced.count(module) == 0)
          unknown[layout::compiler_dir_name(name) + "/" + module] = &folder;
      }
    }
    std::vector<std::string> paths;
    for (const auto& [path, folder] : unknown) paths.push_back(path);
    for (const auto& [path, when] : ask_times(paths, "folders nothing references")) {
      Folder& folder = *unknown.at(path);
      folder.newest = std::max(folder.newest, when);
      folder.unknown_time = false;
    }
  }

  // When each of `paths` was last written, from a store whose listings carry no times (the Hub:
  // the last commit touching it). A path without an answer is left out and keeps its unknown age.
  std::map<std::string, int64_t> ask_times(const std::vector<std::string>& paths,
                                           const std::string& what) {
    std::map<std::string, int64_t> out;
    if (paths.empty()) return out;
    std::set<std::string> asked(paths.begin(), paths.end());
    try {
      for (const auto& entry : store_.stat_times(paths, plan_.revision)) {
        if (entry.modified != 0 && asked.count(entry.path) != 0) out[entry.path] = entry.modified;
      }
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::Operational) throw;
      problem("when " + std::to_string(paths.size()) + " " + what +
              " were last written could not be read (" + error.what() + "): they are kept");
    }
    return out;
  }

  void decide_folder(const std::string& version_name, const Version& version,
                     const std::string& module, Folder& folder) {
    plan_.folders.add(1, folder.files.bytes);
    if (version.referenced.count(module) != 0) {
      plan_.referenced.add(1, folder.files.bytes);
      return;
    }
    bool of_dropped = version.dropped_references.count(module) != 0;
    if (std::string why = keep_reason(version, folder, of_dropped); !why.empty()) {
      kept_[why].add(1, folder.files.bytes);
      return;
    }
    plan_.freed.add(folder.files.count, folder.files.bytes);
    plan_.removed.push_back({layout::compiler_dir_name(version_name) + "/" + module, folder.files,
                             folder.newest, of_dropped ? kWhyDropped : kWhyUnreferenced,
                             std::move(folder.paths)});
  }

  // Why a folder nothing references stays, or "" when it goes.
  std::string keep_reason(const Version& version, const Folder& folder, bool of_dropped) const {
    if (all_incomplete_ || version.index_incomplete)
      return "its compiler version's index could not be read whole";
    if (!of_dropped) {
      if (std::string why = mode_keeps(version); !why.empty()) return why;
    }
    if (folder.unknown_time) return "the store gives no modification time for it";
    if (options_.now - folder.newest < options_.grace)
      return "written within the grace period (a push may be in flight)";
    std::optional<int64_t> since = version.live_lease_since;
    if (!of_dropped && (lease_everywhere_ || (since && folder.newest >= *since)))
      return "written since a live compile lease of its compiler version began";
    return "";
  }

  std::string mode_keeps(const Version& version) const {
    if (options_.unreferenced == Unreferenced::Remove) return "";
    if (options_.unreferenced == Unreferenced::Keep) return "--unreferenced keep";
    if (!version.indexed) {
      return "its compiler folder has no neuron-cache index: optimum-neuron's or libneuronxla's "
             "cache, found by graph hash (--unreferenced remove removes them)";
    }
    for (const auto& stem : version.registry_stems) {
      if (version.indexed_stems.count(stem) == 0) {
        return "optimum-neuron also writes its compiler folder (registry files no index entry "
               "lists), whose NEFFs are found by graph hash (--unreferenced remove removes them)";
      }
    }
    return "";
  }

  // What killed writers left, as the store finds it (its own shapes and ages). An empty MODULE_
  // folder an entry or registry file names stays: its files are missing, which is no garbage.
  void find_leftovers() {
    std::vector<storage::Leftover> found;
    try {
      found = store_.leftovers(leftover_ages(options_));
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::Operational) throw;
      problem("could not look for what killed writers left (" + std::string(error.what()) +
              "): none is removed");
    }
    for (auto& item : found) {
      if (item.kind == storage::Leftover::Kind::EmptyFolder && may_be_referenced(item.path))
        continue;
      plan_.leftovers.push_back(std::move(item));
    }
  }

  // Whether "neuronxcc-<v>/MODULE_<name>" is referenced, or its version's index was not read
  // whole.
  bool may_be_referenced(const std::string& path) const {
    size_t slash = path.find('/');
    std::optional<std::string> version = layout::compiler_version_of(path.substr(0, slash));
    if (!version || all_incomplete_) return true;
    auto it = versions_.find(*version);
    if (it == versions_.end()) return false;
    return it->second.index_incomplete || it->second.referenced.count(path.substr(slash + 1)) != 0;
  }

  void problem(const std::string& text) {
    if (plan_.problems.size() < kMaxProblems) plan_.problems.push_back(printable(text, 400));
  }

  storage::Store& store_;
  const GcOptions& options_;
  uint64_t before_;
  GcPlan plan_;
  uint64_t listed_ = 0;
  std::map<std::string, Version> versions_;  // by raw compiler version
  std::vector<RemoteEntry> index_files_;
  std::vector<RemoteEntry> lease_files_;
  // Every (version, key) once, with the index files that hold it.
  std::map<std::pair<std::string, std::string>, std::pair<ai::Entry, std::vector<std::string>>>
      entries_;
  std::map<std::string, Tally> kept_;
  bool all_incomplete_ = false;
  bool lease_everywhere_ = false;
};

// Phase 1: the dropped entries leave their index files. Each file is read at the head again and
// published only if unchanged since; an entry pushed again meanwhile (a new created_at) stays.
void drop_entries(storage::Store& store, GcPlan& plan, const GcOptions& options,
                  const net::RetryPolicy& conflicts) {
  std::set<std::string> files;
  for (const auto& entry : plan.dropped)
    files.insert(entry.index_files.begin(), entry.index_files.end());
  int attempts = 0;
  remote::commit_on_head(
      store, conflicts, "gc's rewrite of the index", attempts, [&](const std::string& head) {
        std::vector<std::unique_ptr<sys::TempFile>> contents;
        std::vector<storage::CommitOperation> ops;
        for (const auto& path : files) {
          storage::SmallFile read = store.read_versioned(path, head, remote::kMaxIndexFileBytes);
          if (!read.content) continue;
          ai::IndexFile index = ai::parse_index(*read.content, store.name() + "/" + path);
          size_t before = index.entries.size();
          std::erase_if(index.entries,
                        [&](const auto& item) { return expired(item.second, options); });
          if (index.entries.size() == before) continue;
          // An emptied shard stays, empty: its rewrite is conditional, a deletion is not.
          contents.push_back(std::make_unique<sys::TempFile>(ai::serialize_index(index)));
          ops.push_back({storage::CommitOperation::Kind::Add, path, contents.back()->path(),
                         read.expected()});
        }
        plan.index_files_rewritten = ops.size();
        if (ops.empty()) return;
        store.commit(
            ops, "neuron-cache gc: drop " + std::to_string(plan.dropped.size()) + " index entries",
            head);
      });
  plan.attempts += attempts;
}

// MODULE_ names every index entry and registry file at `head` references, by compiler folder
// ("neuronxcc-<v>/MODULE_<name>"), for the compiler folders of `folders`.
std::set<std::string> referenced_at(storage::Store& store, const std::string& head,
                                    const std::vector<GcFolder>& folders) {
  std::set<std::string> out;
  std::set<std::string> dirs;
  for (const auto& folder : folders) dirs.insert(folder.path.substr(0, folder.path.find('/')));
  std::vector<RemoteEntry> index =
      store.list_or_failure(std::string(ai::kRemoteDir), true, head).value();
  std::erase_if(index,
                [](const RemoteEntry& e) { return e.is_directory || !e.path.ends_with(".json"); });
  for (const auto& file : index) {
    // Never downloaded: it may reference anything, and nothing is deleted on a partial view.
    if (file.size > remote::kMaxIndexFileBytes)
      throw operational_error("the index file " + printable(file.path, kShownName) +
                              " is larger than an index file may be: gc deletes no folder it "
                              "may reference");
  }
  std::vector<storage::Read<std::string>> texts = remote::read_listed_files(store, head, index);
  for (size_t i = 0; i < texts.size(); ++i) {
    // What cannot be read now may reference anything: nothing is deleted on a partial view.
    ai::IndexFile file = ai::parse_index(texts[i].value(), store.name() + "/" + index[i].path);
    if (!file.unreadable.empty())
      throw operational_error("an index entry of " + index[i].path +
                              " cannot be read: gc deletes no folder it may reference");
    for (const auto& [key, entry] : file.entries) {
      for (const auto& module : entry.modules) out.insert(entry.compiler_dir() + "/" + module.name);
    }
  }
  for (const auto& dir : dirs) {
    std::string registry = dir + "/" + std::string(layout::kRegistryDir);
    std::vector<RemoteEntry> files = store.list_or_failure(registry, true, head).value();
    for (const auto& file : files) {
      if (std::string stem = stem_of(file.path); !stem.empty())
        out.insert(dir + "/" + std::string(layout::kModulePrefix) + stem);
    }
  }
  return out;
}

// S3 and folders delete without a condition: a push that found a folder's files already in the
// store and published its entry while gc deleted them leaves an entry whose files are gone. Rare
// (the folder was unreferenced for longer than the grace), but said, with what to do.
void check_after_deletion(storage::Store& store, GcPlan& plan) {
  std::set<std::string> referenced = referenced_at(store, store.head(), plan.removed);
  for (const auto& folder : plan.removed) {
    if (referenced.count(folder.path) == 0 ||
        std::find(plan.spared.begin(), plan.spared.end(), folder.path) != plan.spared.end())
      continue;
    plan.problems.push_back(
        "a push referenced " + printable(folder.path, kShownName) +
        " while gc deleted it: its index entry now names files the store lacks; push that "
        "configuration again");
  }
}

// Phase 2: the folders still unreferenced at the head, and the lease files, go in one
// publication conditional on that head.
void delete_folders(storage::Store& store, GcPlan& plan, const net::RetryPolicy& conflicts) {
  int attempts = 0;
  remote::commit_on_head(store, conflicts, "gc's deletion", attempts, [&](const std::string& head) {
    std::set<std::string> referenced = referenced_at(store, head, plan.removed);
    std::vector<storage::CommitOperation> ops;
    plan.spared.clear();
    for (const auto& folder : plan.removed) {
      if (referenced.count(folder.path) != 0) {
        plan.spared.push_back(folder.path);
        continue;
      }
      for (const auto& path : folder.file_paths)
        ops.push_back({storage::CommitOperation::Kind::Delete, path, {}});
    }
    for (const auto& lease : plan.leases)
      ops.push_back({storage::CommitOperation::Kind::Delete, lease.path, {}});
    if (ops.empty()) return;
    storage::CommitResult result = store.commit(
        ops,
        "neuron-cache gc: remove " + std::to_string(plan.removed.size()) + " MODULE folders and " +
            std::to_string(plan.leases.size()) + " lease files",
        head);
    plan.files_deleted = result.deleted;
  });
  plan.attempts += attempts;
  if (store.kind() != storage::Kind::Hub && !plan.removed.empty())
    check_after_deletion(store, plan);
  for (const auto& path : plan.spared) {
    auto it = std::find_if(plan.removed.begin(), plan.removed.end(),
                           [&](const GcFolder& f) { return f.path == path; });
    plan.freed.count -= it->files.count;
    plan.freed.bytes -= it->files.bytes;
    plan.removed.erase(it);
  }
}

// Phase 3: the leftovers, each checked again by the store. A failure is a problem line, never
// a failed gc: what stays is found again by the next run.
void remove_leftovers(storage::Store& store, GcPlan& plan, const GcOptions& options) {
  storage::LeftoverRemoval removal;
  try {
    removal = store.remove_leftovers(plan.leftovers, leftover_ages(options));
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::Operational) throw;
    removal.kept.push_back("the leftovers: " + std::string(error.what()));
  }
  plan.leftovers_removed = removal.removed;
  for (const auto& why : removal.kept) {
    if (plan.problems.size() < kMaxProblems)
      plan.problems.push_back(printable("not removed: " + why, 400));
  }
}

}  // namespace

std::optional<Unreferenced> unreferenced_named(std::string_view name) {
  if (name == "auto") return Unreferenced::Auto;
  if (name == "keep") return Unreferenced::Keep;
  if (name == "remove") return Unreferenced::Remove;
  return std::nullopt;
}

GcPlan plan_gc(storage::Store& store, const GcOptions& options) {
  GcOptions resolved = options;
  if (resolved.now == 0) resolved.now = static_cast<int64_t>(std::time(nullptr));
  return Survey(store, resolved).run();
}

void squash_after_gc(storage::Store& store, GcPlan& plan) {
  uint64_t before = store.requests();
  plan.squashed_revision = store.squash_history(
      "neuron-cache gc: squash the history to free the storage of deleted files");
  plan.requests += store.requests() - before;
}

GcPlan collect_garbage(storage::Store& store, const GcOptions& options, GcRun run,
                       const net::RetryPolicy& conflicts) {
  if (run.squash && !run.apply)
    throw input_error(
        "squashing rewrites the Hub repo's history: apply the removal too "
        "(--apply)");
  if (run.squash && store.kind() != storage::Kind::Hub) {
    throw input_error(storage::describe(&store) +
                      " keeps no history: a deletion frees its bytes at once; leave out --squash");
  }
  if (run.apply) {
    if (std::string why = store.why_not_writable(); !why.empty())
      throw input_error("gc cannot remove anything from " + storage::describe(&store) + ": " + why);
  }
  try {
    GcPlan plan = plan_gc(store, options);
    if (run.apply) apply_gc(store, plan, options, conflicts);
    if (run.squash) squash_after_gc(store, plan);
    return plan;
  } catch (const Error& error) {
    throw Error(error.kind(), "gc of " + storage::describe(&store) + " failed: " + error.what());
  }
}

void apply_gc(storage::Store& store, GcPlan& plan, const GcOptions& options,
              const net::RetryPolicy& conflicts) {
  GcOptions resolved = options;
  if (resolved.now == 0) resolved.now = static_cast<int64_t>(std::time(nullptr));
  uint64_t before = store.requests();
  if (!plan.dropped.empty()) drop_entries(store, plan, resolved, conflicts);
  if (!plan.removed.empty() || !plan.leases.empty()) delete_folders(store, plan, conflicts);
  if (!plan.leftovers.empty()) remove_leftovers(store, plan, resolved);
  plan.applied = true;
  plan.requests += store.requests() - before;
}

}  // namespace neuron_cache::maintenance
