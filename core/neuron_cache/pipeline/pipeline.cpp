#include "neuron_cache/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "neuron_cache/compile/capture.h"
#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/export_dir.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/pipeline/hub_keys.h"
#include "neuron_cache/pipeline/registry_memo.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/version.h"

namespace neuron_cache::pipeline {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

manifest::Manifest load_selected(const Options& options) {
  if (options.manifest.empty()) return {};  // `run` without a manifest: no configurations
  manifest::Manifest manifest = manifest::load_manifest(options.manifest);
  if (options.configs.empty()) return manifest;
  std::vector<manifest::Configuration> selected;
  for (const auto& name : options.configs) {
    const manifest::Configuration* found = manifest.find(name);
    if (!found) {
      std::string known;
      for (const auto& c : manifest.configurations) known += (known.empty() ? "" : ", ") + c.name;
      throw input_error("no configuration named \"" + name + "\" in " + options.manifest.string() +
                        " (it has: " + known + ")");
    }
    selected.push_back(*found);
  }
  manifest.configurations = std::move(selected);
  return manifest;
}

std::optional<int64_t> number_of(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::vector<plan::RegistryCandidate> candidates_of(const remote::RegistryScan& scan) {
  std::vector<plan::RegistryCandidate> out;
  for (const auto& [model_id, hits] : scan.hits) {
    for (const auto& hit : hits) {
      if (hit.row.mode == "training") continue;  // no inference configuration to match
      // Made from another config.json of the model: optimum-neuron's proxy would not match it.
      if (hit.architecture == remote::Architecture::Other) continue;
      out.push_back({model_id,
                     hit.row.task,
                     number_of(hit.row.batch_size),
                     number_of(hit.row.sequence_length),
                     number_of(hit.row.tensor_parallel),
                     hit.row.dtype,
                     hit.row.instance_type,
                     {hit.compiler_dir, hit.optimum_version, hit.path},
                     hit.same_architecture_as,
                     hit.traced});
    }
  }
  return out;
}

}  // namespace

config::ManifestLayer manifest_layer(const manifest::Manifest& manifest, const fs::path& file) {
  config::ManifestLayer layer;
  layer.file = file.string();
  layer.cache_repo = manifest.cache_repo;
  if (manifest.cache_dir) {
    fs::path folder = file.empty() ? fs::current_path() : fs::absolute(file).parent_path();
    layer.cache_dir = (folder / *manifest.cache_dir).lexically_normal().string();
  }
  layer.compiler_version = manifest.compiler_version;
  return layer;
}

std::string tool_version() {
  return std::string("neuron-cache ") + kVersion;
}

PrefetchStep& operator+=(PrefetchStep& into, const PrefetchStep& later) {
  into.result += later.result;
  into.hits += later.hits;
  into.seconds += later.seconds;
  return into;
}

PushStep& operator+=(PushStep& into, const PushStep& later) {
  if (later.attempted) {
    if (!into.attempted || !later.skipped_reason.empty())
      into.skipped_reason = later.skipped_reason;
    into.attempted = true;
  } else if (!into.attempted && !later.skipped_reason.empty()) {
    into.skipped_reason = later.skipped_reason;
  }
  into.result += later.result;
  into.seconds += later.seconds;
  return into;
}

size_t CompileStep::failed() const {
  size_t n = 0;
  for (const auto& outcome : outcomes) n += outcome.ok ? 0 : 1;
  return n;
}

Pipeline::Pipeline(const config::Settings& settings, Remotes remotes, Options options)
    : settings_(settings), remotes_(std::move(remotes)), options_(std::move(options)) {
  if (options_.configs.size() > 0 && options_.manifest.empty()) {
    throw input_error("--config needs a manifest: the configuration is declared there");
  }
  // NEURON_CACHE_RETRY_BASE_MS shortens the waits between commit conflicts too.
  if (settings_.retry_base())
    options_.push.conflicts = net::retry_policy(settings_, options_.push.conflicts.max_attempts);
  manifest_ = load_selected(options_);
  if (!options_.manifest.empty())
    settings_ = settings_.with_manifest(manifest_layer(manifest_, options_.manifest));
  repo_ = settings_.cache_repo.value;
  repo_origin_ = settings_.cache_repo.origin;
  if (!settings_.cache_repo_note.empty()) note(false, settings_.cache_repo_note);
  root_ = settings_.local_cache_root();
  compiler_version_ = settings_.compiler_version.value;
  const std::string& installed = settings_.installed_compiler.value;
  if (!installed.empty() && installed != compiler_version_) {
    // Only the manifest's compiler_version takes the place of the installed one (with
    // --compiler-version, neuronx-cc is never asked).
    note(true, "the manifest declares neuronx-cc " + compiler_version_ +
                   " but the installed one is " + installed +
                   ": keys use the manifest's version; a compile with the installed compiler "
                   "would not match them");
  }
  if (compiler_version_.empty() && !manifest_.configurations.empty()) {
    compiler_version_ = settings_.require_compiler_version();
  }
  cache_ = std::make_unique<local::LocalCache>(root_, trusted_roots());
  local_index_ = std::make_unique<local::LocalIndex>(*cache_);
  open_store();
}

void Pipeline::open_store() {
  if (repo_.empty() || !remotes_.open_store) return;
  std::unique_ptr<storage::Store> backend;
  try {
    backend = remotes_.open_store(settings_);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::Input) throw;
    cache_problem("the cache store " + repo_ + " cannot be used: " + error.what(),
                  "nothing is read from it or written to it in this run");
  }
  if (!backend) return;
  store_ = backend.get();
  store_layers_.push_back(std::move(backend));
  if (options_.read_only) {
    store_layers_.push_back(std::make_unique<storage::ReadOnlyStore>(*store_));
    store_ = store_layers_.back().get();
  }
  writer_ = store_;
  if (!options_.strict) {
    auto misses = std::make_unique<storage::MissOnFailureStore>(*store_);
    misses_ = misses.get();
    store_ = misses.get();
    store_layers_.push_back(std::move(misses));
  }
  repo_ = store_->name();
  requests_at_start_ = store_->requests();
  log::debug("decide", "cache store " + repo_ + " on " + storage::describe(store_) + " (from " +
                           repo_origin_ + ")" + (options_.read_only ? ", read-only" : "") +
                           (options_.strict ? ", --strict: its failures fail the run"
                                            : ", its failures count as misses"));
}

storage::Store* Pipeline::online_store() const {
  return store_ && !store_->offline() ? store_ : nullptr;
}

void Pipeline::report_misses() {
  if (!misses_) return;
  const std::vector<std::string> problems = misses_->problems();
  for (; misses_reported_ < problems.size(); ++misses_reported_) {
    note(true, problems[misses_reported_] + ": counted as not cached");
  }
}

Pipeline::~Pipeline() = default;

fs::path Pipeline::manifest_dir() const {
  // fs::absolute("") throws: `run` needs no manifest.
  if (options_.manifest.empty()) return fs::current_path();
  return fs::absolute(options_.manifest).parent_path();
}

std::vector<fs::path> Pipeline::trusted_roots() const {
  if (settings_.hf_hub_cache.value.empty()) return {};
  return {settings_.hf_hub_cache.value};
}

size_t Pipeline::store_requests() const {
  return store_ ? store_->requests() - requests_at_start_ : 0;
}

void Pipeline::note(bool warning, const std::string& text) {
  announce_outages();
  if (warning && outages_.caused(text)) {
    log::debug("decide", text);  // the outage's warning said it, and what the run does instead
    return;
  }
  say(warning, text);
}

void Pipeline::say(bool warning, const std::string& text) {
  notices_.push_back({warning, text});
  if (on_progress) on_progress((warning ? "warning: " : "") + text);
}

void Pipeline::cache_problem(const std::string& what, const std::string& fallback) {
  if (options_.strict)
    throw operational_error(what + " (an error under --strict; without it: " + fallback + ")");
  note(true, what + ": " + fallback);
}

void Pipeline::announce_outages() {
  const std::string fallback =
      "configurations not complete locally count as misses and nothing is pushed";
  if (store_) {
    std::string advice = store_->kind() == storage::Kind::S3
                             ? "check the network and the S3 endpoint"
                             : "check the network and HF_ENDPOINT";
    std::string said = outages_.announce(store_->unreachable(), fallback, advice);
    if (!said.empty()) say(true, said);
  }
  if (remotes_.models) {
    std::string said = outages_.announce(remotes_.models->unreachable(),
                                         "models are keyed from what earlier runs remembered",
                                         "check the network and HF_ENDPOINT");
    if (!said.empty()) say(true, said);
  }
}

std::string Pipeline::brief(const std::string& detail) {
  announce_outages();
  return outages_.brief(detail);
}

std::vector<plan::Target> Pipeline::targets() {
  storage::ModelSource* models = remotes_.models;
  resolver_ = std::make_unique<plan::ModelResolver>(
      models && !models->offline() ? models : nullptr, manifest_dir(),
      sys::RootedFile(root_, std::string(ai::kLocalDir) + "/models.json"));
  plan::ModelResolver& resolver = *resolver_;
  plan::KeyContext context;
  context.compiler_version = compiler_version_;
  context.optimum_neuron_version = manifest_.optimum_neuron_version;
  context.env_flags = plan::flag_words(settings_.cc_flags.value);
  // Keys cannot be made without revisions: with the Hub unreachable, a revision no earlier run
  // remembered leaves its configuration unkeyed (compiled, never recorded or pushed).
  std::vector<plan::Target> targets = plan::make_targets(manifest_, context, resolver);
  std::vector<std::string> remembered;
  for (const auto& used : resolver.from_memo()) {
    if (options_.strict)  // throws
      cache_problem("the Hub could not resolve " + used, "using the revision remembered");
    announce_outages();
    // "model@main -> <commit> (why)": the why only when no outage warning said it.
    remembered.push_back(outages_.caused(used) ? used.substr(0, used.find(" (")) : used);
  }
  if (!remembered.empty())
    note(true, "the Hub could not resolve " + count_of(remembered.size(), "revision") +
                   ": using what an earlier run remembered: " + list_of(remembered));
  note_unkeyed(targets);
  return targets;
}

void Pipeline::note_unkeyed(std::vector<plan::Target>& targets) {
  static const std::string kFallback =
      "compiled, but not recorded in the cache index or pushed; a run that can read the model "
      "from the Hub keys it (or give the model's model_type and a 40-hex revision in the "
      "manifest so no Hub is needed)";
  std::vector<std::string> outage;
  for (auto& target : targets) {
    if (target.unkeyed.empty()) continue;
    std::string detail = target.unkeyed;
    target.unkeyed = brief(detail);
    if (target.unkeyed == detail) {
      cache_problem(target.configuration.name + " has no cache key: " + detail, kFallback);
      continue;
    }
    target.unkeyed = target.inputs.model_id + " could not be resolved: " + target.unkeyed;
    outage.push_back(target.configuration.name);
  }
  if (outage.empty()) return;
  std::string what = count_of(outage.size(), "configuration") + " (" + list_of(outage) +
                     ") have no cache key, their models being unreadable";
  if (options_.strict) throw operational_error(what);
  note(true, what + ": " + kFallback);
}

plan::Target Pipeline::profile_target(const std::string& name) {
  if (auto problem = cache_key::profile_name_problem(name)) {
    throw input_error(*problem +
                      ": a profile name starts with a letter or digit and has only "
                      "letters, digits, '.', '_' and '-' (at most " +
                      std::to_string(cache_key::kMaxProfileName) + " characters)");
  }
  if (compiler_version_.empty()) compiler_version_ = settings_.require_compiler_version();
  plan::Target target;
  target.configuration.name = name;
  target.inputs = cache_key::profile_inputs(name, compiler_version_,
                                            plan::flag_words(settings_.cc_flags.value));
  target.key = cache_key::key_of(target.inputs);
  return target;
}

std::set<std::string> Pipeline::declared_keys() {
  std::set<std::string> keys;
  for (const auto& target : targets()) {
    if (!target.unkeyed.empty()) {
      throw input_error("the key of " + target.configuration.name + " in " + manifest_.path +
                        " is unknown (" + target.unkeyed +
                        "): gc would take its entries for undeclared; run it when the Hub can be "
                        "reached");
    }
    keys.insert(target.key);
  }
  return keys;
}

plan::Plan Pipeline::make_plan() {
  return make_plan(lock_ ? locked_targets() : targets());
}

namespace {

// Registry links left pointing at another root by a copy or move of the cache (optimum-neuron's
// aliases are absolute): how they are read, so that a configuration that looks incomplete is
// explained.
void note_foreign_links(const local::LocalCache& cache, const std::string& compiler_version,
                        plan::Plan& plan) {
  if (compiler_version.empty() || !cache.exists()) return;
  try {
    auto compiler =
        sys::SafeDir::open(cache.root()).open_subdir(layout::compiler_dir_name(compiler_version));
    if (!compiler) return;
    for (auto& line :
         local::describe_foreign_links(cache.foreign_registry_links(*compiler), cache.root()))
      plan.notes.push_back(std::move(line));
  } catch (const Error&) {
    // Only an explanation: an unreadable registry shows up in the rows themselves.
  }
}

}  // namespace

plan::Plan Pipeline::make_plan(const std::vector<plan::Target>& targets) {
  std::string hub_problem;
  remote_.reset();
  if (repo_.empty()) {
    hub_problem = "no cache repo is set";
  } else if (!store_ && remotes_.open_store) {
    hub_problem = "the cache store " + repo_ + " could not be opened";
  } else if (online_store() == nullptr) {
    hub_problem = "offline: " + storage::describe(store_) + " was not asked";
  } else {
    try {
      auto index = lock_ ? locked_index()
                         : std::make_unique<remote::RemoteIndex>(
                               remote::RemoteIndex::open(*store_, memo_folder()));
      // Read here when a push follows; else on first need (a row not complete locally).
      if (head_when_local_) index->revision();
      remote_ = std::move(index);
    } catch (const Error& error) {
      rethrow_local_disk(error);
      std::string what = storage::describe_part(store_, "cache") + " could not be read: ";
      cache_problem(what + error.what(),
                    "every configuration not complete locally will be compiled");
      hub_problem = what + brief(error.what());
    }
  }
  try {
    plan::Plan plan = plan::make_plan(targets, *local_index_, remote_.get(), hub_problem);
    describe_repo(plan);
    note_foreign_links(*cache_, compiler_version_, plan);
    if (remote_ && !lock_) read_registry(plan);
    if (!short_version_.empty()) throw input_error(short_version_);
    if (remote_) {
      for (const auto& problem : remote_->problems()) note(true, problem);
    }
    report_misses();
    log_decisions(plan);
    return plan;
  } catch (const Error& error) {
    rethrow_local_disk(error);
    if (!short_version_.empty()) throw;  // the manifest's to fix, not the store's failure
    // The head and the index downloads happen lazily inside make_plan.
    bool head = remote_ && !remote_->revision_read();
    cache_problem(storage::describe_part(store_, head ? "cache" : "index") +
                      " could not be read: " + error.what(),
                  "every configuration not complete locally will be compiled");
    remote_.reset();
    plan::Plan plan = plan::make_plan(targets, *local_index_, nullptr, brief(error.what()));
    describe_repo(plan);
    note_foreign_links(*cache_, compiler_version_, plan);
    log_decisions(plan);
    return plan;
  }
}

namespace {

// The debug log's line for one planned configuration: its key and why it has its status (a
// miss's reason names the nearest cached configuration).
void log_decision(const plan::PlanRow& row) {
  const plan::Target& target = row.target;
  std::string key =
      target.unkeyed.empty() ? "key " + target.key : "no key (" + target.unkeyed + ")";
  std::string text = target.configuration.name + " [" + key + ", neuronx-cc " +
                     target.inputs.compiler_version +
                     "]: " + std::string(plan::status_name(row.status)) + ": " + row.reason;
  log::debug("decide", text);
}

// A configuration whose registry answer did not come from its architecture digest says how it
// was found instead (or why it was not).
void explain_architectures(plan::Plan& plan, const std::map<std::string, std::string>& notes) {
  for (auto& row : plan.rows) {
    if (row.status != plan::Status::Compile && row.status != plan::Status::Registry) continue;
    auto note = notes.find(row.target.inputs.model_id);
    if (note != notes.end()) row.reason += "; " + note->second;
  }
}

}  // namespace

void Pipeline::log_decisions(const plan::Plan& plan) const {
  if (!log::enabled()) return;
  if (!plan.hub_problem.empty()) log::debug("decide", "store not read: " + plan.hub_problem);
  for (const auto& row : plan.rows) log_decision(row);
}

remote::ScanModels Pipeline::registry_models(const std::vector<const plan::Target*>& targets,
                                             std::map<std::string, std::string>& notes) {
  remote::ScanModels models;
  std::set<std::string> asked;  // once per model, task and revision, not per configuration
  for (const plan::Target* target : targets) {
    const std::string& model = target->inputs.model_id;
    auto& by_task = models[model];
    std::string question = model + "\n" + target->inputs.task + "\n" +
                           target->inputs.checkpoint_revision.value_or("") + "\n" +
                           target->configuration.checkout.value_or("");
    if (!asked.insert(question).second) continue;
    std::string why;
    std::optional<remote::TaskArchitecture> architecture =
        resolver_ ? resolver_->architecture(*target, &why) : std::nullopt;
    if (architecture) {
      if (!architecture->note.empty()) notes[model] = architecture->note;
      by_task[target->inputs.task] = std::move(*architecture);
    } else {
      notes[model] = "its config.json was not read (" + why +
                     "): its registry entries are found through its own aliases only, and "
                     "alias-less digest folders are not seen";
    }
  }
  for (const auto& [model, note] : notes) log::debug("decide", model + ": " + note);
  return models;
}

std::string Pipeline::short_version_problem(const std::string& version,
                                            const std::vector<std::string>& full) const {
  std::string names;
  for (const auto& v : full) names += (names.empty() ? "" : ", ") + v;
  return "compiler_version " + version + " is not a full neuronx-cc version: " + repo_ + " holds " +
         names +
         ", and libneuronxla names cache folders by the full version (neuronx-cc --version "
         "prints it), so no cached folder can match; set compiler_version to the full version";
}

void Pipeline::read_registry(plan::Plan& plan) {
  std::map<std::string, std::vector<const plan::Target*>> models_by_version;
  for (const auto& row : plan.rows) {
    if (row.status == plan::Status::Compile)
      models_by_version[row.target.inputs.compiler_version].push_back(&row.target);
  }
  if (models_by_version.empty()) return;
  RegistryMemo memo(memo_folder().child("registry.json"), repo_, remote_->revision());
  bool has_registry = false;
  std::string short_version;
  std::map<std::string, std::string> notes;  // how each model's architecture was found
  try {
    for (const auto& [version, targets] : models_by_version) {
      remote::ScanModels models = registry_models(targets, notes);
      std::optional<RegistryAnswer> answer = memo.recall(version, models);
      if (!answer) {
        answer = scan_registry(version, models);
        memo.remember(version, models, *answer);
      }
      if (auto full = layout::full_versions_of(version, answer->compiler_dirs); !full.empty()) {
        short_version = short_version_problem(version, full);
      }
      has_registry = has_registry || answer->has_registry;
      plan::mark_registry_hits(plan, answer->candidates);
    }
    explain_architectures(plan, notes);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    note(true, std::string("optimum-neuron's registry in ") + repo_ +
                   " could not be read: " + error.what());
  }
  // Not a store failure: make_plan refuses the manifest after the registry read.
  short_version_ = short_version;
  if (has_registry && remote_->compiler_versions().empty()) {
    plan.notes.push_back(
        repo_ +
        " has no neuron-cache index yet (optimum-cli wrote it): configurations its "
        "registry lists are compiled through optimum-neuron, which fetches their NEFFs "
        "from it; push then indexes them, so later runs prefetch them directly");
  }
}

RegistryAnswer Pipeline::scan_registry(const std::string& compiler_version,
                                       const remote::ScanModels& models) {
  remote::RegistryScan scan =
      remote::scan_registry(*store_, compiler_version, models, remote_->revision());
  for (const auto& problem : scan.problems)
    note(true, "skipped an unreadable registry entry: " + problem);
  return {scan.has_registry, scan.compiler_dirs, candidates_of(scan), scan.complete};
}

void Pipeline::describe_repo(plan::Plan& plan) const {
  plan.repo = repo_;
  plan.repo_origin = repo_origin_;
  if (store_) plan.store = storage::kind_name(store_->kind());
  if (!settings_.cache_repo_note.empty()) plan.notes.push_back(settings_.cache_repo_note);
}

ai::Entry Pipeline::complete_part(const ai::Entry& entry) const {
  ai::Entry out = entry;
  std::erase_if(out.modules, [&](const ai::ModuleRecord& module) {
    return !local_index_->module_complete(entry.compiler_dir(), module);
  });
  std::erase_if(out.registry, [&](const ai::FileRecord& file) {
    return !local_index_->registry_file_present(entry.compiler_dir(), file);
  });
  return out;
}

plan::Plan Pipeline::plan_run(const plan::Target& target) {
  plan::Plan plan = make_plan(std::vector<plan::Target>{target});
  plan::PlanRow& row = plan.rows.front();
  if (!remote_ || row.status == plan::Status::Compile) return plan;
  const ai::Entry* hub = nullptr;
  try {
    remote_->load(plan::shards_of({&row.target}));  // a complete local entry did not read it
    hub = remote_->find(target.inputs.compiler_version, target.key);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    cache_problem(
        storage::describe_part(store_, "index") + " could not be read: " + error.what(),
        "what " + storage::describe(store_) + " has beyond the local cache will be compiled");
  }
  std::optional<ai::Entry> local = local_index_->find(target.inputs.compiler_version, target.key);
  if (!hub || !local) return plan;
  if (row.status == plan::Status::Local && ai::covers(*local, *hub)) return plan;
  // Another machine's run added folders: fetch them, and keep this cache's own complete ones.
  ai::Entry wanted = ai::merged(complete_part(*local), *hub);
  local::LocalIndex::Missing missing = local_index_->missing(wanted);
  row.entry = wanted;
  row.recorded = false;  // prefetch writes the union
  row.bytes_to_download = missing.bytes;
  row.files_to_download = missing.files;
  if (missing.files == 0) {
    row.status = plan::Status::Local;
    row.reason = "complete in the local cache";
    return plan;
  }
  row.status = plan::Status::Store;
  row.reason = "the entry in " + repo_ + " has compiled graphs this cache lacks";
  return plan;
}

namespace {

// The configurations complete locally (found so, or just fetched) are in use: cleanup --max-size
// keeps their folders longest.
void record_local_use(const std::filesystem::path& root, const plan::Plan& plan) {
  std::vector<local::EntryName> used;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local || !row.entry) continue;
    for (const auto& module : row.entry->modules) {
      used.emplace_back(row.entry->compiler_dir(), module.name);
    }
  }
  local::record_use(root, used);
}

}  // namespace

PrefetchStep Pipeline::prefetch(plan::Plan& plan) {
  auto start = std::chrono::steady_clock::now();
  PrefetchStep step;
  try {
    // Watching from before the entries land: the first compile then seeds only those.
    if (manifest_.compile) seed_views();
  } catch (const Error&) {
    // The compile step reports it, if it has anything to compile.
  }
  std::vector<ai::Entry> entries;
  for (const auto& row : plan.rows) {
    if (row.status == plan::Status::Store && row.entry) entries.push_back(*row.entry);
    // Complete locally through the Hub's entry only (fetched by an older run or by
    // optimum-neuron): record it, so later runs know it without the Hub.
    if (row.status == plan::Status::Local && row.entry && !row.recorded) {
      local_index_->write(*row.entry);
    }
  }
  if (entries.empty() || !store_ || !remote_) {
    record_local_use(root_, plan);
    step.seconds = seconds_since(start);
    return step;
  }
  if (on_progress)
    on_progress("prefetching " + std::to_string(entries.size()) + " configurations from " + repo_);
  try {
    step.result = remote::prefetch(*store_, remote_->revision(), *local_index_, entries,
                                   [this](const std::string& line) {
                                     if (on_progress) on_progress(line);
                                   });
  } catch (const Error& error) {
    rethrow_local_disk(error);
    cache_problem(std::string("prefetch from ") + repo_ + " failed: " + error.what(),
                  "the configurations will be compiled");
    for (const auto& entry : entries) step.result.failed.emplace(entry.key, brief(error.what()));
  }
  if (lock_ && !step.result.failed.empty()) refetch_locked_at_head(entries, step.result);
  for (auto& row : plan.rows) {
    if (row.status != plan::Status::Store) continue;
    if (auto it = step.result.failed.find(row.target.key); it != step.result.failed.end()) {
      cache_problem("could not fetch " + row.target.configuration.name + ": " + it->second,
                    "it will be compiled");
      row.status = plan::Status::Compile;
      row.reason = "fetching from " + storage::describe(store_) + " failed: " + brief(it->second);
      log_decision(row);
      continue;
    }
    row.status = plan::Status::Local;
    ++step.hits;
  }
  record_local_use(root_, plan);
  report_misses();
  step.seconds = seconds_since(start);
  return step;
}

sys::RootedFile Pipeline::memo_folder() const {
  return sys::RootedFile(root_, std::string(ai::kLocalDir) + "/hub");
}

std::string Pipeline::why_not_push(bool nothing_new) {
  if (options_.read_only) return "--read-only: nothing is written to " + storage::describe(store_);
  if (repo_.empty()) return "no cache repo is set";
  if (!store_) return remotes_.open_store ? "the cache store could not be opened" : "offline";
  if (store_->offline()) return "offline";
  announce_outages();
  if (!store_->unreachable().empty()) {
    return outages_.brief(store_->unreachable()) +
           ": nothing was pushed; what was compiled stays in the local cache and the next run "
           "with " +
           storage::describe(store_->kind()) + " pushes it";
  }
  if (nothing_new) return "nothing new to push";
  return "";
}

std::string Pipeline::read_only_token() {
  // Asked once, before any write request: a read token would only collect 403s.
  std::string cannot = store_->why_not_writable();
  if (cannot.empty()) return "";
  std::string why = cannot + " (or pass --read-only to `ci` or `run` to not push on purpose)";
  // One message: the push line (and the report) carry it; --strict makes it an error.
  if (options_.strict) cache_problem("push to " + repo_ + " failed: " + why, "skipping the push");
  return why;
}

bool Pipeline::owes_push(const plan::Plan& plan) const {
  if (compiled_here_) return *compiled_here_ > 0;
  return std::any_of(plan.rows.begin(), plan.rows.end(), [](const plan::PlanRow& row) {
    return row.status == plan::Status::Local && row.entry;
  });
}

void Pipeline::refuse_skip_when_strict(bool owed, const std::string& reason) {
  if (!owed || !options_.strict || options_.read_only || reason.empty()) return;
  cache_problem(
      "push to " + (repo_.empty() ? std::string("the cache store") : repo_) + " skipped: " + reason,
      "skipping the push");
}

std::vector<std::string> Pipeline::covered_on_hub(const std::vector<const plan::PlanRow*>& rows) {
  if (!remote_) return {};
  std::vector<const plan::Target*> targets;
  for (const plan::PlanRow* row : rows) targets.push_back(&row->target);
  try {
    // A plan whose entries were all complete locally did not read the Hub's index.
    remote_->load(plan::shards_of(targets));
  } catch (const Error&) {
    return {};  // unknown: every one is offered to push, which reads the index again
  }
  std::vector<std::string> found;
  for (const plan::PlanRow* row : rows) {
    const ai::Entry* hub = remote_->find(row->target.inputs.compiler_version, row->target.key);
    if (hub && ai::covers(*hub, *row->entry)) found.push_back(ai::contents_id(*row->entry));
  }
  return found;
}

std::vector<ai::Entry> Pipeline::not_on_hub(const plan::Plan& plan) {
  std::vector<const plan::PlanRow*> local;
  std::vector<std::string> ids;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local || !row.entry) continue;
    local.push_back(&row);
    ids.push_back(ai::contents_id(*row.entry));
  }
  // Remembered by contents, not by key: an entry that grew since is offered again.
  HubKeys on_hub(memo_folder().child("on-hub.json"), repo_, remote_ ? remote_->revision() : "");
  if (on_hub.has_all(ids)) {  // a warm run: nothing new, and no shard read
    log::debug("decide", "push: every local entry was on " + repo_ + " at its last push");
    return {};
  }
  std::vector<std::string> found = covered_on_hub(local);
  on_hub.remember(found);
  std::set<std::string> there(found.begin(), found.end());
  std::vector<ai::Entry> entries;
  for (const plan::PlanRow* row : local) {
    if (there.count(ai::contents_id(*row->entry))) {
      log::debug("decide", "push: " + row->target.configuration.name + " is on " + repo_ +
                               " already, with every file this cache has");
      continue;
    }
    log::debug("decide", "push: " + row->target.configuration.name + " is offered to " + repo_);
    if (auto entry = local_index_->find(row->target.inputs.compiler_version, row->target.key))
      entries.push_back(*entry);
  }
  return entries;
}

PushStep Pipeline::push(const plan::Plan& plan) {
  PushStep step = push_entries(plan);
  finish_leases(plan, step);
  // In the order they happened: the last commit is the store's head.
  PushStep all;
  for (const PushStep& early : early_pushes_) all += early;
  all += step;
  return all;
}

PushStep Pipeline::push_entries(const plan::Plan& plan) {
  auto start = std::chrono::steady_clock::now();
  PushStep step;
  for (const auto& row : plan.rows) {
    // The plan's warning about configurations without a key said they are not pushed.
    if (!row.target.unkeyed.empty())
      log::debug("decide", "not pushed: " + row.target.configuration.name + ": no cache key");
  }
  step.skipped_reason = why_not_push(false);
  refuse_skip_when_strict(owes_push(plan), step.skipped_reason);
  std::vector<ai::Entry> entries;
  if (step.skipped_reason.empty()) {
    entries = not_on_hub(plan);
    if (entries.empty()) step.skipped_reason = why_not_push(true);
  }
  if (step.skipped_reason.empty()) step.skipped_reason = read_only_token();
  if (!step.skipped_reason.empty()) {
    log::debug("decide", "push skipped: " + step.skipped_reason);
    step.seconds = seconds_since(start);
    return step;
  }
  step.attempted = true;
  if (on_progress)
    on_progress("pushing " + std::to_string(entries.size()) + " configurations to " + repo_);
  try {
    step.result = remote::push(*writer_, *local_index_, entries, options_.push);
    for (const auto& [key, why] : step.result.skipped)
      note(true, "not pushed: " + key + ": " + why);
    if (!step.result.commit.landed_unanswered.empty())
      note(false, step.result.commit.landed_unanswered);
    if (size_t aborted = step.result.commit.uploads_aborted; aborted > 0) {
      note(false, "aborted " + count_of(aborted, "multipart upload") +
                      " abandoned more than a day ago in " + repo_);
    }
    for (const auto& warning : step.result.commit.warnings) note(true, warning);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    step.skipped_reason = error.what();
    cache_problem(std::string("push to ") + repo_ + " failed: " + error.what(),
                  "the compiled artifacts stay in the local cache only");
  }
  step.seconds = seconds_since(start);
  return step;
}

}  // namespace neuron_cache::pipeline

namespace neuron_cache::pipeline {

PushStep Pipeline::push_modules(const std::vector<std::string>& modules) {
  PushStep step;
  step.skipped_reason = why_not_push(modules.empty());
  refuse_skip_when_strict(!modules.empty(), step.skipped_reason);
  if (!step.skipped_reason.empty()) return step;
  step.attempted = true;
  try {
    step.result = remote::push_modules(*writer_, *local_index_, modules, options_.push);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    step.skipped_reason = error.what();
    cache_problem(std::string("push to ") + repo_ + " failed: " + error.what(),
                  "the compiled graphs stay in the local cache only");
  }
  return step;
}

}  // namespace neuron_cache::pipeline

namespace neuron_cache::pipeline {

std::map<std::string, std::string> Pipeline::export_artifacts(const plan::Plan& plan,
                                                              const std::filesystem::path& dir) {
  std::map<std::string, std::string> exports;
  for (const auto& row : plan.rows) {
    if (row.status != plan::Status::Local) continue;
    auto entry = local_index_->find(row.target.inputs.compiler_version, row.target.key);
    if (!entry) continue;
    const std::string& name = row.target.configuration.name;
    try {
      exports[name] =
          local::export_configuration(*cache_, *entry, std::filesystem::absolute(dir), name)
              .string();
    } catch (const Error& error) {
      rethrow_local_disk(error);
      // One configuration that cannot be exported does not keep the others from it.
      cache_problem("cannot export " + name + ": " + error.what(), "it has no export folder");
    }
  }
  return exports;
}

}  // namespace neuron_cache::pipeline
