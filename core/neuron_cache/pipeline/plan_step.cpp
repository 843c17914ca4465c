#include "neuron_cache/pipeline/plan_step.h"

#include <algorithm>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/store_name.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/pipeline/registry_memo.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::pipeline {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

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

// A configuration whose registry answer did not come from its architecture digest says how it
// was found instead (or why it was not).
void explain_architectures(plan::Plan& plan, const std::map<std::string, std::string>& notes) {
  for (auto& row : plan.rows) {
    if (row.status != plan::Status::Compile && row.status != plan::Status::Registry) continue;
    if (!row.target.unkeyed.empty()) continue;  // its reason already says the model is unread
    auto note = notes.find(row.target.inputs.model_id);
    if (note != notes.end()) row.reason += "; " + note->second;
  }
}

// What becomes of an unkeyed configuration in this command, then how it gets a key. Only a
// command that compiles compiles it: plan and prefetch only cannot look it up.
std::string unkeyed_fallback(bool compiles) {
  std::string done = compiles ? "compiled, but not recorded in the cache index or pushed"
                              : "not looked up in the cache";
  return done +
         "; a run that can read the model from the Hub keys it, or pin the model's revision to a "
         "40-hex commit and set its model_type in the manifest";
}

// Why an offline store was not asked, by the variable to unset: "HF_HUB_OFFLINE is set".
std::string offline_cause(const config::Settings& settings) {
  const std::string& variable = settings.offline_origin.origin;
  return variable.ends_with("_OFFLINE") ? variable + " is set" : "offline";
}

}  // namespace

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

Planner::Planner(RunContext& run, LockedMode& locked) : run_(run), locked_(locked) {}

Planner::~Planner() = default;

std::vector<plan::Target> Planner::targets() {
  storage::ModelSource* models = run_.remotes.models;
  resolver_ = std::make_unique<plan::ModelResolver>(
      models && !models->offline() ? models : nullptr, run_.manifest_dir(),
      sys::RootedFile(run_.root, std::string(ai::kLocalDir) + "/models.json"));
  plan::ModelResolver& resolver = *resolver_;
  plan::KeyContext context;
  context.compiler_version = run_.compiler_version;
  context.optimum_neuron_version = run_.manifest.optimum_neuron_version;
  context.env_flags = plan::flag_words(run_.settings.cc_flags.value);
  // Keys cannot be made without revisions: with the Hub unreachable, a revision no earlier run
  // remembered leaves its configuration unkeyed (never looked up, recorded or pushed).
  std::vector<plan::Target> targets = plan::make_targets(run_.manifest, context, resolver);
  std::vector<std::string> remembered;
  for (const auto& used : resolver.from_memo()) {
    if (run_.options.strict)  // throws
      run_.cache_problem("the Hub could not resolve " + used, "using the revision remembered");
    // "model@main -> <commit> (why)": the why only when no outage warning said it.
    remembered.push_back(run_.caused_by_outage(used) ? used.substr(0, used.find(" (")) : used);
  }
  if (!remembered.empty())
    run_.note(true, "the Hub could not resolve " + count_of(remembered.size(), "revision") +
                        ": using what an earlier run remembered: " + list_of(remembered));
  note_unkeyed(targets);
  if (run_.store && run_.store->kind() == storage::Kind::Hub) run_.hub_slow = resolver.slow_hub();
  return targets;
}

void Planner::note_unkeyed(std::vector<plan::Target>& targets) {
  const std::string fallback = unkeyed_fallback(run_.options.compiles);
  std::vector<std::string> outage;
  for (auto& target : targets) {
    if (target.unkeyed.empty()) continue;
    std::string detail = target.unkeyed;
    target.unkeyed = run_.brief(detail);
    if (target.unkeyed == detail) {
      run_.cache_problem(target.configuration.name + " has no cache key: " + detail, fallback);
      continue;
    }
    target.unkeyed = target.inputs.model_id + " could not be resolved: " + target.unkeyed;
    outage.push_back(target.configuration.name);
  }
  if (outage.empty()) return;
  std::string what = count_of(outage.size(), "configuration") + " (" + list_of(outage) +
                     ") have no cache key, their models being unreadable";
  if (run_.options.strict) throw operational_error(what);
  run_.note(true, what + ": " + fallback);
}

plan::Target Planner::profile_target(const std::string& name) {
  if (auto problem = cache_key::profile_name_problem(name)) {
    throw input_error(*problem +
                      ": a profile name starts with a letter or digit and has only "
                      "letters, digits, '.', '_' and '-' (at most " +
                      std::to_string(cache_key::kMaxProfileName) + " characters)");
  }
  if (run_.compiler_version.empty())
    run_.compiler_version = run_.settings.require_compiler_version();
  plan::Target target;
  target.configuration.name = name;
  target.inputs = cache_key::profile_inputs(name, run_.compiler_version,
                                            plan::flag_words(run_.settings.cc_flags.value));
  target.key = cache_key::key_of(target.inputs);
  return target;
}

std::set<std::string> Planner::declared_keys() {
  std::set<std::string> keys;
  for (const auto& target : targets()) {
    if (!target.unkeyed.empty()) {
      throw input_error("the key of " + target.configuration.name + " in " + run_.manifest.path +
                        " is unknown (" + target.unkeyed +
                        "): gc would take its entries for undeclared; run it when the Hub can be "
                        "reached");
    }
    keys.insert(target.key);
  }
  return keys;
}

plan::Plan Planner::make_plan() {
  return make_plan(run_.lock ? locked_.locked_targets() : targets());
}

plan::Plan Planner::make_plan(const std::vector<plan::Target>& targets) {
  std::string hub_problem;
  run_.remote.reset();
  if (run_.repo.empty()) {
    hub_problem = "no cache repo is set";
  } else if (!run_.store && run_.remotes.open_store) {
    hub_problem = "the cache store " + run_.repo + " could not be opened";
  } else if (run_.online_store() == nullptr) {
    hub_problem = offline_cause(run_.settings);
  } else {
    try {
      auto index = run_.lock ? locked_.locked_index()
                             : std::make_unique<remote::RemoteIndex>(
                                   remote::RemoteIndex::open(*run_.store, run_.memo_folder()));
      // Read here when a push follows; else on first need (a row not complete locally).
      if (head_when_local_ && run_.hub_slow.empty()) index->revision();
      run_.remote = std::move(index);
    } catch (const Error& error) {
      rethrow_local_disk(error);
      std::string what = storage::describe_part(run_.store, "cache") + " could not be read: ";
      run_.cache_problem(what + error.what(),
                         "every configuration not complete locally will be compiled");
      hub_problem = what + run_.brief(error.what());
    }
  }
  try {
    plan::Plan plan =
        plan::make_plan(targets, *run_.local_index, run_.remote.get(), hub_problem, run_.trust);
    describe_repo(plan);
    note_foreign_links(*run_.cache, run_.compiler_version, plan);
    if (run_.remote && !run_.lock) read_registry(plan);
    if (!short_version_.empty()) throw input_error(short_version_);
    if (run_.remote) {
      for (const auto& problem : run_.remote->problems()) run_.note(true, problem);
    }
    run_.report_misses();
    log_decisions(plan);
    if (run_.lock) untrusted_lock_ = untrusted_in_lock(plan);
    if (!untrusted_lock_.empty()) throw input_error(untrusted_lock_);
    return plan;
  } catch (const Error& error) {
    rethrow_local_disk(error);
    // The manifest's or the lock's to fix, not the store's failure.
    if (!short_version_.empty() || !untrusted_lock_.empty()) throw;
    // The head and the index downloads happen lazily inside make_plan.
    bool head = run_.remote && !run_.remote->revision_read();
    run_.cache_problem(storage::describe_part(run_.store, head ? "cache" : "index") +
                           " could not be read: " + error.what(),
                       "every configuration not complete locally will be compiled");
    run_.remote.reset();
    plan::Plan plan =
        plan::make_plan(targets, *run_.local_index, nullptr, run_.brief(error.what()), run_.trust);
    describe_repo(plan);
    note_foreign_links(*run_.cache, run_.compiler_version, plan);
    log_decisions(plan);
    return plan;
  }
}

void Planner::log_decisions(const plan::Plan& plan) const {
  if (!log::enabled()) return;
  if (!plan.hub_problem.empty()) log::debug("decide", "store not read: " + plan.hub_problem);
  for (const auto& row : plan.rows) log_decision(row);
}

remote::ScanModels Planner::registry_models(const std::vector<const plan::Target*>& targets,
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

std::string Planner::short_version_problem(const std::string& version,
                                           const std::vector<std::string>& full) const {
  std::string names;
  for (const auto& v : full) names += (names.empty() ? "" : ", ") + v;
  return "compiler_version " + version + " is not a full neuronx-cc version: " + run_.repo +
         " holds " + names +
         ", and libneuronxla names cache folders by the full version (neuronx-cc --version "
         "prints it), so no cached folder can match; set compiler_version to the full version";
}

void Planner::read_registry(plan::Plan& plan) {
  std::map<std::string, std::vector<const plan::Target*>> models_by_version;
  for (const auto& row : plan.rows) {
    if (row.status == plan::Status::Compile)
      models_by_version[row.target.inputs.compiler_version].push_back(&row.target);
  }
  if (models_by_version.empty()) return;
  RegistryMemo memo(run_.memo_folder().child("registry.json"), run_.repo, run_.remote->revision());
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
    refuse_unsigned_registry(plan);
    explain_architectures(plan, notes);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    run_.note(true, std::string("optimum-neuron's registry in ") + run_.repo +
                        " could not be read: " + error.what());
  }
  // Not a store failure: make_plan refuses the manifest after the registry read.
  short_version_ = short_version;
  if (has_registry && run_.remote->compiler_versions().empty()) {
    plan.notes.push_back(
        run_.repo +
        " has no neuron-cache index yet (optimum-cli wrote it): configurations its "
        "registry lists are compiled through optimum-neuron, which fetches their NEFFs "
        "from it; push then indexes them, so later runs prefetch them directly");
  }
}

// optimum-neuron writes no signature: with signatures required, its registry entries are not
// reused (the compile step keeps optimum-neuron's hub proxy away from them too).
// A locked build installs the lock's bytes or fails: an entry the trust policy refuses is the
// lock's problem, never a compile.
std::string Planner::untrusted_in_lock(const plan::Plan& plan) const {
  std::string refused;
  for (const auto& row : plan.rows) {
    if (row.refused.empty()) continue;
    const lockfile::Locked* locked = run_.lock->find(row.target.configuration.name);
    std::string was = locked && !locked->signed_by.empty()
                          ? " (locked as signed by " + list_of(locked->signed_by) + ")"
                          : "";
    refused +=
        (refused.empty() ? "" : "; ") + row.target.configuration.name + ": " + row.refused + was;
  }
  if (refused.empty()) return "";
  return "the lock's entries are not trusted: " + refused +
         ": lock again (neuron-cache lock) from entries a trusted key signed, or trust the key "
         "that signed them";
}

void Planner::refuse_unsigned_registry(plan::Plan& plan) const {
  if (!run_.trust.require) return;
  for (auto& row : plan.rows) {
    if (row.status != plan::Status::Registry) continue;
    row.status = plan::Status::Compile;
    row.refused = "optimum-neuron's registry lists it (" + row.registry->path +
                  "), but optimum-neuron signs nothing and signatures are required (" +
                  run_.trust.require_origin + ")";
    row.reason = "not reused from " + run_.repo + ": " + row.refused;
    row.registry.reset();
  }
}

RegistryAnswer Planner::scan_registry(const std::string& compiler_version,
                                      const remote::ScanModels& models) {
  remote::RegistryScan scan =
      remote::scan_registry(*run_.store, compiler_version, models, run_.remote->revision());
  for (const auto& problem : scan.problems)
    run_.note(true, "skipped an unreadable registry entry: " + problem);
  return {scan.has_registry, scan.compiler_dirs, candidates_of(scan), scan.complete};
}

void Planner::describe_repo(plan::Plan& plan) const {
  plan.repo = run_.repo;
  plan.repo_origin = run_.repo_origin;
  if (run_.store) {
    plan.store = storage::kind_name(run_.store->kind());
  } else if (!run_.repo.empty()) {
    // Not opened (its failure was said): still named by its kind, never taken for the Hub.
    try {
      plan.store =
          storage::kind_name(store_name::parse_store_name(run_.repo, "the cache repo").kind);
    } catch (const Error&) {
      // A name that is no store: the plan names none.
    }
  }
  if (!run_.settings.cache_repo_note.empty()) plan.notes.push_back(run_.settings.cache_repo_note);
}

plan::Plan Planner::plan_run(const plan::Target& target) {
  plan::Plan plan = make_plan(std::vector<plan::Target>{target});
  plan::PlanRow& row = plan.rows.front();
  if (!run_.remote || row.status == plan::Status::Compile) return plan;
  const ai::Entry* hub = nullptr;
  try {
    run_.remote->load(plan::shards_of({&row.target}));  // a complete local entry did not read it
    hub = run_.remote->find(target.inputs.compiler_version, target.key);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    run_.cache_problem(
        storage::describe_part(run_.store, "index") + " could not be read: " + error.what(),
        "what " + storage::describe(run_.store) + " has beyond the local cache will be compiled");
  }
  std::optional<ai::Entry> local =
      run_.local_index->find(target.inputs.compiler_version, target.key);
  if (!hub || !local) return plan;
  if (auto why = plan::refusal(*hub, run_.trust)) {
    // The local entry is this machine's own; the store's, refused, adds nothing to it.
    if (row.status != plan::Status::Local) row.refused = *why;
    log::debug("decide", target.configuration.name + ": the store's entry is not used: " + *why);
    return plan;
  }
  if (row.status == plan::Status::Local && ai::covers(*local, *hub)) return plan;
  // Another machine's run added folders: fetch them, and keep this cache's own complete ones.
  ai::Entry wanted = ai::merged(run_.complete_part(*local), *hub);
  local::LocalIndex::Missing missing = run_.local_index->missing(wanted);
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
  row.reason = "the entry in " + run_.repo + " has compiled graphs this cache lacks";
  return plan;
}

}  // namespace neuron_cache::pipeline
