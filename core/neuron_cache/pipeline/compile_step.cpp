// The compile step of the pipeline: each miss runs the manifest's compile command against a
// staging cache (compile/capture.h): a seeded view of the cache (compile/seed_view.h) that one
// SeedViews object keeps up to date for all runs of the process, so the MODULE_ folders a run
// produced or reused are known exactly, at a cost that does not grow with the cache; only then
// are they moved into the cache and recorded in the artifact index.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "neuron_cache/compile/capture.h"
#include "neuron_cache/compile/runner.h"
#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/hf_file_cache.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/manifest/command_template.h"
#include "neuron_cache/pipeline/compile_step.h"
#include "neuron_cache/pipeline/lease_step.h"
#include "neuron_cache/sys/duration.h"
#include "neuron_cache/sys/safe_dir.h"
#include "neuron_cache/transfer/fetch.h"

namespace neuron_cache::pipeline {

namespace {

// --output-dir made absolute; std::filesystem throws its own exception for an empty path.
std::filesystem::path absolute_output_dir(const std::filesystem::path& dir) {
  if (dir.empty()) {
    throw input_error("--output-dir is empty: give the folder for the compiled models and logs");
  }
  return std::filesystem::absolute(dir);
}

}  // namespace

namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

// Replaces every `from` in `text` with `to`.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// The compiler's model.log of each failed MODULE folder lives in the staging cache, which is
// deleted when the run ends, so a tail saying "see .../model.log" would point at nothing: copy
// each beside the command's log (<name>.model.log, or <name>.<MODULE>.model.log for several)
// and make the tail point at the copy.
void keep_model_logs(const fs::path& staging, const std::vector<compile::CapturedModule>& failed,
                     const fs::path& output_dir, const std::string& name, std::string& tail) {
  for (const auto& module : failed) {
    fs::path log = staging / module.compiler_dir / module.name / "model.log";
    std::error_code error;
    // Only the compiler's own regular file: a link could point anywhere.
    if (!fs::is_regular_file(fs::symlink_status(log, error))) continue;
    std::string suffix = failed.size() == 1 ? ".model.log" : "." + module.name + ".model.log";
    fs::path kept = output_dir / (name + suffix);
    if (!fs::copy_file(log, kept, fs::copy_options::overwrite_existing, error)) {
      tail +=
          "\n(the compiler's log " + log.string() + " could not be kept: " + error.message() + ")";
      continue;
    }
    std::string before = tail;
    replace_all(tail, log.string(), kept.string());
    if (tail == before) tail += "\nthe compiler's log: " + kept.string();
  }
}

// `out` failed for `why`: the last lines of the command's log, and the compiler's model.log of
// each failed folder kept beside it.
void fail_with_logs(CompileOutcome& out, const std::string& why, const fs::path& staging,
                    const std::vector<compile::CapturedModule>& failed) {
  out.error = why;
  out.log_tail = compile::log_tail(out.log_file);
  fs::path log(out.log_file);
  keep_model_logs(staging, failed, log.parent_path(), out.configuration, out.log_tail);
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

// Why a run whose command succeeded failed all the same: its graphs bear the marks of a failed
// compile, or what it reused is unknown. Nothing when it did not.
std::optional<std::string> failure_problem(const compile::CaptureResult& captured) {
  if (captured.usage_lost) {
    return "inotify dropped events while the command ran, so which cached MODULE_ folders it "
           "reused is unknown: run it again (its new entries were kept)";
  }
  if (!captured.failed.empty()) {
    return "the compiler left " + std::to_string(captured.failed.size()) +
           " failed MODULE_ folder(s), e.g. " + captured.failed.front().name;
  }
  return std::nullopt;
}

// Whether the run left no MODULE_ folder at all in its staging cache.
bool nothing_captured(const compile::CaptureResult& c) {
  return c.produced.empty() && c.used.empty() && c.failed.empty() && c.proxied.empty() &&
         c.unlinked.empty();
}

// Why the captured run cannot be recorded, or nothing when it can.
std::optional<std::string> capture_problem(const compile::CaptureResult& captured,
                                           const std::string& compiler_dir) {
  if (auto problem = failure_problem(captured)) return problem;
  if (captured.produced.empty() && captured.used.empty()) {
    return "the command succeeded but neither produced nor used a MODULE_ folder in "
           "NEURON_COMPILE_CACHE_URL: does it compile through libneuronxla's cache? (a "
           "--no_cache in NEURON_CC_FLAGS or a cache of its own bypasses it)";
  }
  for (const auto& list : {captured.produced, captured.used}) {
    for (const auto& module : list) {
      if (module.compiler_dir != compiler_dir) {
        return "the command compiled with " + module.compiler_dir + " but the keys are for " +
               compiler_dir + ": install that compiler or set compiler_version to match";
      }
    }
  }
  return std::nullopt;
}

constexpr const char* kReusedThroughProxy = "reused from the Hub through optimum-neuron";

// Whether the command reads a Hub cache through optimum-neuron's hub proxy: the pipeline gave it
// one (a Hub store), or the manifest's compile env names one.
// With signatures required, the compile command's CUSTOM_CACHE_REPO: a name huggingface_hub
// refuses as a repo id ("--" in it), so optimum-neuron's hub proxy cannot be made and it says
// "Bypassing Hub cache": no NEFF nobody signed reaches the compiler, from the store or from
// optimum-neuron's default public repo, to be recorded and signed as compiled here.
constexpr const char* kNoHubCache = "neuron-cache--signatures-required--no-hub-cache";

// Where the signing key is, kept from the commands a run starts: they need it for nothing.
constexpr const char* kSigningKeyVariable = "NEURON_CACHE_SIGNING_KEY";

bool proxy_possible(const std::map<std::string, std::string>& child_env) {
  auto repo = child_env.find("CUSTOM_CACHE_REPO");
  return repo != child_env.end() && !repo->second.empty() && repo->second != kNoHubCache;
}

// Why a command that reads a Hub cache through the proxy and left no MODULE_ folder at all
// cannot be recorded, and what else it may mean.
std::string nothing_linked(const std::map<std::string, std::string>& child_env) {
  return "the command succeeded and left no MODULE_ folder in its cache: optimum-neuron's hub "
         "proxy (reading " +
         child_env.at("CUSTOM_CACHE_REPO") +
         ") hands libneuronxla the NEFFs it finds from the HF file cache without linking them "
         "there, so which graphs it used is unknown. If the command does not compile through "
         "libneuronxla's cache at all (a --no_cache in NEURON_CC_FLAGS, a cache of its own), "
         "nothing of it is ever cached";
}

uint64_t bytes_of(const ai::Entry& entry) {
  uint64_t total = 0;
  for (const auto& module : entry.modules) {
    for (const auto& file : module.files) total += file.size;
  }
  return total;
}

ai::Entry make_entry(const plan::Target& target, const local::LocalIndex& index,
                     const compile::CaptureResult& captured, double seconds) {
  ai::Entry entry;
  entry.key = target.key;
  entry.inputs = target.inputs;
  entry.configuration = target.configuration.name;
  std::string compiler_dir = entry.compiler_dir();
  for (const auto& list : {captured.produced, captured.used}) {
    for (const auto& module : list)
      entry.modules.push_back(index.record_module(compiler_dir, module.name));
  }
  std::sort(entry.modules.begin(), entry.modules.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string prefix = compiler_dir + "/";
  for (const auto& path : captured.registry_files) {
    if (!path.starts_with(prefix)) continue;
    entry.registry.push_back(index.record_registry_file(compiler_dir, path.substr(prefix.size())));
  }
  entry.compile_seconds = seconds;
  entry.tool = tool_version();
  entry.created_at = ai::utc_now();
  return entry;
}

// The command's NEURON_CC_FLAGS: the configuration's flags, then the user's without the cache
// options (a --cache_dir there would win over NEURON_COMPILE_CACHE_URL and bypass the staging
// cache); the same words, in the same order, as the key's flags.
std::string child_cc_flags(std::vector<std::string> flags, const config::Settings& settings) {
  for (auto& word : plan::flag_words(settings.cc_flags.value)) {
    flags.push_back(std::move(word));
  }
  return join_words(flags);
}

constexpr const char* kNotSeeded = "not reusable by compiles from the local cache: ";

// A number of an entry's neuron config under either of its names (decoder, traced export).
std::optional<int64_t> neuron_number(const registry::Json& neuron, const char* name,
                                     const char* traced_name) {
  for (const char* key : {name, traced_name}) {
    if (neuron.is_object() && neuron.contains(key) && neuron[key].is_number_integer())
      return neuron[key].get<int64_t>();
  }
  return std::nullopt;
}

// The manifest's name for the configuration a registry entry describes, else the entry's model,
// batch size and sequence length.
std::string configuration_of(const registry::Record& record,
                             const std::vector<manifest::Configuration>& configurations) {
  auto batch = neuron_number(record.neuron, "batch_size", "static_batch_size");
  auto sequence = neuron_number(record.neuron, "sequence_length", "static_sequence_length");
  for (const auto& c : configurations) {
    if (c.model_id == record.model_id && batch == c.batch_size && sequence == c.sequence_length)
      return c.name;
  }
  return record.model_id + (batch ? " batch_size=" + std::to_string(*batch) : "") +
         (sequence ? " sequence_length=" + std::to_string(*sequence) : "");
}

// The configurations one compile command exported, by entry hash: the registry entries it wrote
// (an alias and its primary file are one entry) and the traced export folders it left (named by
// their entry's hash).
std::map<std::string, std::string> exported_configurations(
    const fs::path& staging, const compile::CaptureResult& captured,
    const std::vector<manifest::Configuration>& configurations) {
  std::map<std::string, std::string> exported;
  sys::SafeDir stage = sys::SafeDir::open(staging);
  for (const auto& path : captured.registry_files) {
    std::string marker = "/" + std::string(layout::kRegistryDir) + "/";
    size_t at = path.find(marker);
    auto where =
        at == std::string::npos ? std::nullopt : registry::locate(path.substr(at + marker.size()));
    if (!where || exported.contains(where->hash)) continue;
    size_t slash = path.rfind('/');
    try {
      auto dir = stage.open_path(path.substr(0, slash));
      if (!dir) continue;
      registry::Record record =
          registry::read_record(*where, dir->read_small_file(path.substr(slash + 1), 1 << 20));
      exported[where->hash] = configuration_of(record, configurations);
    } catch (const Error&) {
      // An alias (a link, never followed) or a file that is not an entry: its primary file or
      // nothing tells the configuration.
    }
  }
  for (const auto& list : {captured.produced, captured.used}) {
    for (const auto& module : list) {
      std::string hash = module.name.substr(std::string_view("MODULE_").size());
      if (layout::is_traced_module_name(module.name) && !exported.contains(hash))
        exported[hash] = "the traced export " + module.name;
    }
  }
  return exported;
}

// torch-neuronx of the Neuron SDK 2.31 (optimum-neuron 0.4.7) counts the graphs a process traces
// into their hashes: what one command exported after its first configuration is keyed by that
// process's history, and no later run of one configuration finds it. Once, naming them all.
void warn_of_shared_processes(const std::vector<CompileOutcome>& outcomes,
                              const std::function<void(const std::string&)>& warn) {
  std::string commands;
  for (const auto& o : outcomes) {
    if (o.exported_configurations.size() < 2) continue;
    std::string names;
    for (const auto& name : o.exported_configurations) names += (names.empty() ? "" : ", ") + name;
    if (!commands.empty()) commands += "; ";
    commands += "the command of " + o.configuration + " exported " + names;
  }
  if (commands.empty()) return;
  warn("one compile command exported several configurations in one process (" + commands +
       "): with the Neuron SDK 2.31 (optimum-neuron 0.4.7) torch-neuronx bakes a per-process "
       "counter into graph hashes, so the keys recorded after a process's first configuration "
       "are reproduced by no later run. Compile templates must export one configuration per "
       "process: render {model_id}, {batch_size}, {sequence_length}, ... into the command");
}

// The same entry is reported by every run that could have used it: once is enough.
std::vector<std::string> unique_notes(const std::vector<CompileOutcome>& outcomes) {
  std::vector<std::string> texts;
  std::set<std::string> seen;
  for (const auto& outcome : outcomes) {
    for (const auto& text : outcome.notes) {
      if (seen.insert(text).second) texts.push_back(text);
    }
  }
  return texts;
}

// "still compiling llama-bs1: 12 min so far, expected about 31 min from its last compile; log:
// /ci/out/llama-bs1.log"
std::string still_compiling(const std::string& name, double seconds, double expected_seconds,
                            const std::string& log_file) {
  std::string line = "still compiling " + name + ": " + sys::duration_text(seconds) + " so far, ";
  line += expected_seconds > 0
              ? "expected about " + sys::duration_text(expected_seconds) + " from its last compile"
              : "expected time unknown (no earlier compile of it recorded)";
  return line + "; log: " + log_file;
}

}  // namespace

struct Compiler::Heartbeats {
  std::chrono::seconds every;
  std::vector<double> expected_seconds;  // by row
};

Compiler::Compiler(RunContext& run) : run_(run) {}

Compiler::~Compiler() = default;

compile::SeedViews* Compiler::seed_views() {
  // NEURON_CACHE_SEED=0: the staging cache starts empty, so every run compiles all it needs
  // itself. Slower but needs neither hard links nor inotify (what happens anyway when inotify
  // cannot watch a run).
  if (!run_.settings.seeding) return nullptr;
  std::call_once(seed_views_once_, [this] {
    seed_views_ = std::make_unique<compile::SeedViews>(run_.root, run_.trusted_roots());
  });
  return seed_views_.get();
}

std::unique_ptr<compile::CaptureCache> Compiler::capture_cache(const std::string& label) {
  if (compile::SeedViews* views = seed_views()) {
    return std::make_unique<compile::CaptureCache>(*views, label);
  }
  return std::make_unique<compile::CaptureCache>(run_.root, label);
}

void Compiler::add_hub_env(std::map<std::string, std::string>& env) const {
  if (run_.trust.require) {
    env["CUSTOM_CACHE_REPO"] = kNoHubCache;  // over the manifest's own: see kNoHubCache
    return;
  }
  const std::string hub_repo =
      run_.store && run_.store->kind() == storage::Kind::Hub ? run_.store->name() : "";
  if (hub_repo.empty()) return;
  // What the manifest's compile env sets explicitly stays as it is.
  env.try_emplace("CUSTOM_CACHE_REPO", hub_repo);
  env.try_emplace("HF_ENDPOINT", run_.settings.endpoint.value);
  if (!run_.settings.hf_hub_cache.value.empty())
    env.try_emplace("HF_HUB_CACHE", run_.settings.hf_hub_cache.value);
  if (!run_.settings.token.value.empty()) env.try_emplace("HF_TOKEN", run_.settings.token.value);
  if (run_.store->offline()) env.try_emplace("HF_HUB_OFFLINE", "1");
}

double Compiler::expected_seconds(const plan::PlanRow& row) const {
  for (const auto& nearest : row.nearest) {
    if (run_.remote) {
      for (const ai::Entry* entry : run_.remote->entries_of(row.target.inputs)) {
        if (entry->key == nearest.key && entry->compile_seconds > 0) return entry->compile_seconds;
      }
    }
    for (const auto& version : run_.local_index->compiler_versions()) {
      auto entry = run_.local_index->find(version, nearest.key);
      if (entry && entry->compile_seconds > 0) return entry->compile_seconds;
    }
  }
  return 0;
}

CompileOutcome Compiler::compile_one(const plan::PlanRow& row, std::chrono::seconds heartbeat,
                                     double expected_seconds) {
  const plan::Target& target = row.target;
  const bool listed_in_registry = row.status == plan::Status::Registry;
  const manifest::Configuration& c = target.configuration;
  CompileOutcome out;
  out.configuration = c.name;
  out.key = target.key;
  if (!run_.manifest.compile) {
    out.error = "the manifest has no compile: section, so a miss cannot be compiled";
    return out;
  }
  fs::path output_dir = absolute_output_dir(run_.options.output_dir);
  sys::make_directories(output_dir);
  std::unique_ptr<compile::CaptureCache> capture = capture_cache(c.name);
  out.notes = capture->not_seeded();
  compile::CommandRun run;
  // {revision} is the commit the key was made for, not a branch that may have moved since.
  manifest::Configuration pinned = c;
  if (target.inputs.checkpoint_revision) pinned.revision = target.inputs.checkpoint_revision;
  run.argv = manifest::render_command(run_.manifest.compile->command, pinned,
                                      (output_dir / c.name).string());
  run.set_env = run_.manifest.compile->env;
  add_hub_env(run.set_env);
  run.unset_env.push_back(kSigningKeyVariable);
  run.set_env["NEURON_COMPILE_CACHE_URL"] = capture->dir().string();
  run.set_env["NEURON_CC_FLAGS"] = child_cc_flags(c.compiler_flags, run_.settings);
  run.log_file = output_dir / (c.name + ".log");
  out.log_file = run.log_file.string();
  run.heartbeat_every = heartbeat;
  run.heartbeat = [this, name = c.name, expected_seconds, log = out.log_file](double seconds) {
    run_.progress(still_compiling(name, seconds, expected_seconds, log));
  };

  log::debug("decide",
             c.name + ": compiling (" +
                 (listed_in_registry ? "optimum-neuron's registry lists it" : "no cached entry") +
                 "), cache " + capture->dir().string() + ", log " + run.log_file.string());
  compile::RunOutcome ran = compile::run_command(run);
  out.seconds = ran.seconds;
  out.exit_code = ran.exit_code;
  compile::CaptureResult captured = capture->collect(ran.started && ran.exit_code == 0);
  out.modules_produced = captured.produced.size();
  out.modules_used = captured.used.size();
  if (auto exported =
          exported_configurations(capture->dir(), captured, run_.manifest.configurations);
      exported.size() > 1) {
    for (const auto& [hash, name] : exported) out.exported_configurations.push_back(name);
    std::sort(out.exported_configurations.begin(), out.exported_configurations.end());
  }
  log::debug("decide", c.name + ": the compile command ended (exit " +
                           std::to_string(ran.exit_code) + ", " +
                           std::to_string(static_cast<long>(ran.seconds)) +
                           " s): " + std::to_string(captured.produced.size()) +
                           " graphs compiled, " + std::to_string(captured.used.size()) +
                           " taken from the cache, " + std::to_string(captured.proxied.size()) +
                           " linked by optimum-neuron's hub proxy, " +
                           std::to_string(captured.unlinked.size()) + " left by it without a NEFF");
  // Complete NEFFs are worth keeping even when the run failed (traced exports of a failed run
  // are not complete, see collect); without an index entry they are never pushed as the
  // configuration's artifacts.
  capture->adopt(captured);
  if (!ran.started) {
    out.error = "the compile command could not start: " + ran.start_error;
    return out;
  }
  if (ran.exit_code != 0) {
    fail_with_logs(out,
                   ran.signal
                       ? "the compile command was killed by signal " + std::to_string(ran.signal)
                       : "the compile command exited with status " + std::to_string(ran.exit_code),
                   capture->dir(), captured.failed);
    return out;
  }
  finish_one(target, captured, *capture, run.set_env, ran.seconds, out);
  return out;
}

void Compiler::finish_one(const plan::Target& target, compile::CaptureResult& captured,
                          const compile::CaptureCache& capture,
                          const std::map<std::string, std::string>& child_env, double seconds,
                          CompileOutcome& out) {
  if (auto problem = failure_problem(captured)) {
    return fail_with_logs(out, *problem, capture.dir(), captured.failed);
  }
  if (!adopt_from_proxy(captured, capture, child_env, out)) return;
  if (captured.produced.empty() && (out.modules_from_hub > 0 || !out.not_recorded.empty())) {
    out.reused = kReusedThroughProxy;
  }
  if (!out.not_recorded.empty()) {
    out.ok = true;
    return;
  }
  if (auto problem = capture_problem(captured, layout::compiler_dir_name(run_.compiler_version))) {
    return fail_with_logs(out, *problem, capture.dir(), captured.failed);
  }
  out.ok = true;
  if (!target.unkeyed.empty()) return;  // no key to record it under: the NEFFs stay cached
  // A configuration reused through the proxy cost no compile time here: recording the command's
  // time would have later machines report compile time saved that nobody ever spent.
  ai::Entry entry =
      make_entry(target, *run_.local_index, captured, captured.produced.empty() ? 0 : seconds);
  if (!out.reused.empty()) out.bytes_reused = bytes_of(entry);
  run_.local_index->write(entry);
  out.recorded = true;
}

bool Compiler::adopt_from_proxy(compile::CaptureResult& captured,
                                const compile::CaptureCache& capture,
                                const std::map<std::string, std::string>& child_env,
                                CompileOutcome& out) {
  out.modules_from_hub = captured.proxied.size() + captured.unlinked.size();
  if (out.modules_from_hub > 0 && run_.trust.require) {
    out.error = "optimum-neuron's hub proxy gave the command " +
                count_of(out.modules_from_hub, "graph") +
                " from a Hub cache, which nobody signed, and signatures are required (" +
                run_.trust.require_origin +
                "): nothing of it is recorded; make the command compile without a Hub cache "
                "(no CUSTOM_CACHE_REPO of its own)";
    return false;
  }
  if (out.modules_from_hub > 0) {
    Adoption adoption = complete_from_store(captured, capture, child_env);
    out.bytes_downloaded = adoption.bytes_downloaded;
    out.bytes_linked = adoption.bytes_linked;
    if (adoption.store_failed && run_.options.strict) {
      out.error = adoption.problem + " (an error under --strict)";
      return false;
    }
    out.not_recorded = adoption.problem;
  } else if (nothing_captured(captured) && proxy_possible(child_env)) {
    out.not_recorded = nothing_linked(child_env);
  }
  return true;
}

namespace {

// "optimum-neuron's hub proxy left 2 MODULE folder(s) without their NEFF"
std::string left_by_proxy(const compile::CaptureResult& captured) {
  return "optimum-neuron's hub proxy left " +
         std::to_string(captured.proxied.size() + captured.unlinked.size()) +
         " MODULE folder(s) without their NEFF";
}

// The files the hub proxy linked into the staging cache `stage`, read from the HF file cache
// `hub_cache` (local::open_hf_blob): a candidate only when the blob's name is the id the store
// lists (the sha256 of an LFS file, the git blob id of a regular one, as huggingface_hub names
// blobs), which stage_verified / stage_verified_blob then check against the bytes.
transfer::LocalCandidate hf_links(const sys::SafeDir& stage, const std::string& compiler_dir,
                                  const fs::path& hub_cache) {
  if (hub_cache.empty()) return {};
  return [&stage, compiler_dir, hub_cache](const std::string& module,
                                           const storage::RemoteEntry& file) {
    std::string path = compiler_dir + "/" + module + "/" + file.path;
    size_t slash = path.rfind('/');
    auto dir = stage.open_path(path.substr(0, slash));
    auto blob = dir ? local::open_hf_blob(hub_cache, *dir, path.substr(slash + 1)) : std::nullopt;
    const std::string& id = file.listed_sha256.empty() ? file.git_blob_id : file.listed_sha256;
    if (!blob || id.empty() || blob->id != id) return sys::UniqueFd();
    return std::move(blob->fd);
  };
}

// When the proxy read another repo than the store: why the store may lack what it used.
std::string other_repo(const std::map<std::string, std::string>& child_env,
                       const std::string& store) {
  if (!proxy_possible(child_env) || child_env.at("CUSTOM_CACHE_REPO") == store) return "";
  return " (the hub proxy read " + child_env.at("CUSTOM_CACHE_REPO") + ", not " + store +
         ": the compile env of the manifest sets CUSTOM_CACHE_REPO; without it both are the same)";
}

}  // namespace

Adoption Compiler::complete_from_store(compile::CaptureResult& captured,
                                       const compile::CaptureCache& capture,
                                       const std::map<std::string, std::string>& child_env) {
  Adoption out;
  const std::string what = left_by_proxy(captured);
  if (!run_.online_store() || !run_.remote) {
    out.problem = what + ", and " + storage::describe(run_.store) +
                  " cannot be read to complete them (offline, or no cache store)";
    return out;
  }
  std::map<std::string, std::vector<std::string>> by_dir;
  for (const auto& list : {captured.proxied, captured.unlinked}) {
    for (const auto& module : list) by_dir[module.compiler_dir].push_back(module.name);
  }
  auto hub_cache = child_env.find("HF_HUB_CACHE");
  sys::SafeDir stage = sys::SafeDir::open(capture.dir());
  for (const auto& [dir, names] : by_dir) {
    transfer::FetchResult fetched;
    try {
      fetched = transfer::fetch_modules(
          *run_.store, run_.remote->revision(), *run_.cache, dir, names,
          hf_links(stage, dir, hub_cache == child_env.end() ? "" : hub_cache->second));
    } catch (const Error& error) {
      rethrow_local_disk(error);
      out.problem =
          what + ", and " + run_.repo + " could not be read to complete them: " + error.what();
      out.store_failed = true;
      return out;
    }
    out.bytes_downloaded += fetched.bytes_downloaded;
    out.bytes_linked += fetched.bytes_linked;
    for (const auto& module : fetched.modules) {
      if (module.status == transfer::FetchStatus::Installed ||
          module.status == transfer::FetchStatus::AlreadyPresent)
        continue;
      out.store_failed = module.status == transfer::FetchStatus::Failed;
      // The store's own words for a folder it lacks send the user to check a name they never
      // gave: say it plainly.
      out.problem = what + ", and " +
                    (out.store_failed
                         ? dir + "/" + module.name + " could not be installed from " + run_.repo +
                               ": " + module.error
                         : run_.repo + " does not hold " + dir + "/" + module.name + " complete") +
                    other_repo(child_env, run_.store->name());
      return out;
    }
  }
  for (auto* list : {&captured.proxied, &captured.unlinked}) {
    captured.used.insert(captured.used.end(), list->begin(), list->end());
    list->clear();
  }
  return out;
}

CompileStep Compiler::compile(plan::Plan& plan, LeaseCoordinator* leases) {
  auto start = std::chrono::steady_clock::now();
  CompileStep step;
  std::vector<plan::PlanRow*> misses, compiled;
  for (auto& row : plan.rows) {
    if (plan::runs_compile(row.status)) misses.push_back(&row);
  }
  // Only a real compile is worth a lease: optimum-neuron's registry hits take seconds.
  bool compiles = std::any_of(misses.begin(), misses.end(), [](const plan::PlanRow* row) {
    return row->status == plan::Status::Compile;
  });
  if (compiles && leases && leases->active()) {
    leases->compile(plan, misses, step, compiled);
  } else {
    compile_rows(misses, step, compiled);
  }
  finish_compile(compiled, step);
  step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return step;
}

void Compiler::compile_rows(const std::vector<plan::PlanRow*>& rows, CompileStep& step,
                            std::vector<plan::PlanRow*>& compiled) {
  if (rows.empty()) return;
  // Read here, before the workers start: a bad value fails the step once, and the indexes the
  // expected times come from are read by one thread.
  Heartbeats heartbeats{run_.settings.compile_heartbeat(), {}};
  for (const plan::PlanRow* row : rows)
    heartbeats.expected_seconds.push_back(expected_seconds(*row));
  size_t first = step.outcomes.size();
  step.outcomes.resize(first + rows.size());
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;  // the first exception that is not an Error, rethrown after join
  auto worker = [&] {
    try {
      compile_each(rows, step.outcomes.data() + first, next, heartbeats);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = rows.size();  // the other workers take no new configuration
    }
  };
  size_t threads = std::max<size_t>(1, std::min<size_t>(run_.options.jobs, rows.size()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  compiled.insert(compiled.end(), rows.begin(), rows.end());
}

// One worker's loop: compiles the next configuration not taken yet until none is left.
void Compiler::compile_each(const std::vector<plan::PlanRow*>& misses, CompileOutcome* outcomes,
                            std::atomic<size_t>& next, const Heartbeats& heartbeats) {
  for (size_t i; (i = next++) < misses.size();) {
    const plan::Target& target = misses[i]->target;
    run_.progress("compiling " + target.configuration.name);
    auto failed = [&](const char* why) {
      outcomes[i].configuration = target.configuration.name;
      outcomes[i].key = target.key;
      outcomes[i].error = why;
    };
    try {
      outcomes[i] = compile_one(*misses[i], heartbeats.every, heartbeats.expected_seconds[i]);
    } catch (const Error& error) {
      // The local disk would fail every other configuration the same way: stop with one line.
      rethrow_local_disk(error);
      failed(error.what());
    } catch (const std::exception& error) {
      // A library's exception (std::filesystem, allocation): this configuration failed, the
      // others go on.
      failed(error.what());
    }
    const CompileOutcome& o = outcomes[i];
    std::string done = o.reused.empty() ? "compiled " : "reused (through optimum-neuron) ";
    run_.progress((o.ok ? done : "FAILED ") + o.configuration + (o.ok ? "" : ": " + o.error));
  }
}

// What the compiles did, in the plan and in notes.
void Compiler::finish_compile(const std::vector<plan::PlanRow*>& compiled, CompileStep& step) {
  for (const auto& text : unique_notes(step.outcomes)) run_.note(true, kNotSeeded + text);
  warn_of_shared_processes(step.outcomes,
                           [this](const std::string& text) { run_.note(true, text); });
  for (size_t i = 0; i < compiled.size(); ++i) {
    const CompileOutcome& o = step.outcomes[i];
    if (!o.ok || o.recorded || !compiled[i]->target.unkeyed.empty()) continue;
    run_.note(true, o.configuration + " was " + (o.reused.empty() ? "compiled" : o.reused) +
                        ", but nothing was recorded for it: " + o.not_recorded +
                        ". The next run runs its compile command again");
  }
  mark_compiled(compiled, step);
}

void Compiler::mark_compiled(const std::vector<plan::PlanRow*>& compiled, const CompileStep& step) {
  run_.compiled_here = 0;
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (step.outcomes[i].recorded) ++*run_.compiled_here;
    if (step.outcomes[i].ok && !compiled[i]->target.unkeyed.empty()) {
      compiled[i]->reason = "compiled, but not keyed: " + compiled[i]->target.unkeyed +
                            "; not recorded in the cache index or pushed";
    }
    if (step.outcomes[i].recorded) {
      compiled[i]->status = plan::Status::Local;
      compiled[i]->reason = step.outcomes[i].reused.empty() ? "compiled" : step.outcomes[i].reused;
      compiled[i]->entry = run_.local_index->find(run_.compiler_version, compiled[i]->target.key);
    }
  }
}

}  // namespace neuron_cache::pipeline

namespace neuron_cache::pipeline {

WrappedRun Compiler::run_wrapped(const plan::Target* target, const std::vector<std::string>& argv) {
  WrappedRun out;
  std::string label = target ? target->configuration.name : "run";
  fs::path output_dir = absolute_output_dir(run_.options.output_dir);
  sys::make_directories(output_dir);
  std::unique_ptr<compile::CaptureCache> capture = capture_cache(label);
  for (const auto& text : capture->not_seeded()) run_.note(true, kNotSeeded + text);
  compile::CommandRun run;
  run.argv = argv;
  add_hub_env(run.set_env);
  run.unset_env.push_back(kSigningKeyVariable);
  run.set_env["NEURON_COMPILE_CACHE_URL"] = capture->dir().string();
  run.set_env["NEURON_CC_FLAGS"] = child_cc_flags(
      target ? target->configuration.compiler_flags : std::vector<std::string>{}, run_.settings);
  run.log_file = output_dir / (label + ".run.log");
  run.tee = true;
  const bool cached_before = target && all_cached(*target);
  compile::RunOutcome ran = compile::run_command(run);
  out.seconds = ran.seconds;
  out.exit_code = ran.exit_code;
  if (!ran.started) out.error = "the command could not start: " + ran.start_error;
  if (ran.signal) out.error = "the command was killed by signal " + std::to_string(ran.signal);
  compile::CaptureResult captured = capture->collect(ran.started && ran.exit_code == 0);
  capture->adopt(captured);
  for (const auto& m : captured.produced) out.produced.push_back(m.compiler_dir + "/" + m.name);
  out.used = captured.used.size();
  if (!target || ran.exit_code != 0) return out;
  if (!captured.proxied.empty() || !captured.unlinked.empty()) {
    // A run through optimum-neuron's hub proxy: what it left is completed from the store.
    Adoption adoption = complete_from_store(captured, *capture, run.set_env);
    if (!adoption.problem.empty()) {
      out.not_recorded = adoption.problem;
      return out;
    }
    out.used = captured.used.size();
  }
  // A rerun that found every graph in place may open none of them (a precompile step checks
  // model.done alone): nothing new, which is no reason to doubt the command.
  bool nothing = nothing_captured(captured) && !captured.usage_lost;
  out.all_cached_before = cached_before && nothing;
  if (out.all_cached_before) return out;
  if (nothing && proxy_possible(run.set_env)) {
    out.not_recorded = nothing_linked(run.set_env);
    return out;
  }
  record_run(*target, captured, ran.seconds, out);
  return out;
}

bool Compiler::all_cached(const plan::Target& target) const {
  if (!target.unkeyed.empty()) return false;
  std::optional<ai::Entry> entry =
      run_.local_index->find(target.inputs.compiler_version, target.key);
  return entry && !entry->modules.empty() &&
         run_.complete_part(*entry).modules.size() == entry->modules.size();
}

void Compiler::record_run(const plan::Target& target, const compile::CaptureResult& captured,
                          double seconds, WrappedRun& out) {
  if (!target.unkeyed.empty()) {
    out.not_recorded = "it has no cache key: " + target.unkeyed;
    return;
  }
  if (auto problem =
          capture_problem(captured, layout::compiler_dir_name(target.inputs.compiler_version))) {
    out.not_recorded = *problem;
    return;
  }
  // Only a run that compiled something spent compile time (a training run's is an upper bound).
  ai::Entry entry =
      make_entry(target, *run_.local_index, captured, captured.produced.empty() ? 0 : seconds);
  size_t ran_with = entry.modules.size();
  std::optional<ai::Entry> before =
      run_.local_index->find(target.inputs.compiler_version, target.key);
  if (before) {
    // A run compiles only what it traced this time: what earlier runs recorded stays recorded.
    ai::Entry kept = run_.complete_part(*before);
    entry = ai::merged(entry, kept);
    entry.compile_seconds = std::max(entry.compile_seconds, before->compile_seconds);
    out.modules_added = entry.modules.size() - kept.modules.size();
  } else {
    out.modules_added = ran_with;
  }
  run_.local_index->write(entry);
  out.recorded = true;
  out.modules_recorded = entry.modules.size();
}

}  // namespace neuron_cache::pipeline
