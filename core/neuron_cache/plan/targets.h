// From declared configurations to cache keys: the checkpoint revision and model type of each
// model are resolved (Hub or local git clone), then every configuration gets its key inputs.
// Requests grow with the number of models, never with the number of configurations.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/storage/models.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::plan {

// A configuration with its key.
struct Target {
  manifest::Configuration configuration;
  cache_key::KeyInputs inputs;
  std::string key;  // cache_key::key_of(inputs), always: the local lookup trusts it (KnownKey)
  // Why `key` is not the configuration's real key (its revision could not be resolved: the Hub
  // was unreachable and no earlier run remembered it), or empty. Such a target is compiled, but
  // never looked up, recorded in the index or pushed under that key.
  std::string unkeyed;
};

// What every key shares: the compiler, NEURON_CC_FLAGS, the optimum-neuron version.
struct KeyContext {
  std::string compiler_version;
  std::vector<std::string> env_flags;  // NEURON_CC_FLAGS words, cache options removed
  std::optional<std::string> optimum_neuron_version;
};

struct ResolvedModel {
  std::optional<std::string> revision;  // 40-hex commit
  std::string model_type;
  std::string unresolved;  // why the revision is unknown (the Hub is unreachable), or empty
};

class ModelResolver {
 public:
  // `client` may be null (offline): then revisions must be commits and model types given, or
  // known from `memo_file`, where every answer of the Hub is remembered (a JSON object; the
  // cache root's .cache/huggingface/neuron-cache-index/models.json), so a pipeline that ran once
  // still makes its keys while the Hub is unreachable. The model type read from config.json is
  // remembered by commit ("model_id@<commit>") and reused online too, as a commit's config.json
  // never changes: an unchanged run asks only each unpinned model's revision. Empty: no memo.
  ModelResolver(storage::ModelSource* client, std::filesystem::path manifest_dir,
                sys::RootedFile memo_file = {})
      : client_(client), manifest_dir_(std::move(manifest_dir)), memo_file_(std::move(memo_file)) {}
  // Once per model: later configurations of the same model reuse the answer. When the Hub is
  // unreachable (ModelSource::unreachable) and no earlier answer is remembered, the model comes
  // back unresolved (ResolvedModel::unresolved) instead of failing: the build must not depend on
  // it.
  ResolvedModel resolve(const manifest::Configuration& configuration);
  // Answers taken from the memo because the Hub could not be asked (for warnings).
  const std::vector<std::string>& from_memo() const { return from_memo_; }
  // The model whose remembered revision the Hub did not confirm within its short wait in this
  // run (then the others remembered were not asked), or "".
  const std::string& slow_hub() const { return slow_hub_; }
  // The architecture optimum-neuron's lookup computes for the target's model and task
  // (remote::architecture_of its config.json at the target's commit: a digest per transformers
  // release), digests remembered by commit like the model type. Nothing when the target has no
  // commit or config.json cannot be read: `why` then says why (the registry is then matched
  // through the model's own aliases).
  std::optional<remote::TaskArchitecture> architecture(const Target& target, std::string* why);

 private:
  pyjson::Json read_memo() const;
  std::optional<ResolvedModel> recall(const std::string& memo_key) const;
  void remember(const std::string& memo_key, const ResolvedModel& model) const;
  ResolvedModel resolve_checkout(const manifest::Configuration& configuration);
  // `remembered`: an earlier answer is at hand, so the Hub is waited for only briefly.
  ResolvedModel resolve_hub(const manifest::Configuration& configuration, bool remembered);
  std::string model_type_from_hub(const manifest::Configuration& configuration,
                                  const std::string& commit);
  std::optional<std::string> read_config(const Target& target, std::string* why);
  // The Hub, or an operational Error when offline: no earlier run remembered `wanted`.
  storage::ModelSource& online(const manifest::Configuration& configuration,
                               const std::string& wanted);

  storage::ModelSource* client_;
  std::filesystem::path manifest_dir_;
  sys::RootedFile memo_file_;
  std::map<std::string, ResolvedModel> resolved_;
  std::map<std::string, std::string> configs_;  // config.json texts read, by "model@commit"
  std::vector<std::string> from_memo_;
  std::string slow_hub_;
};

bool is_commit_id(const std::string& revision);

// The words of NEURON_CC_FLAGS that change the NEFFs: strip_cache_flags (format/compile_flags.h),
// as a list.
std::vector<std::string> flag_words(const std::string& neuron_cc_flags);

std::vector<Target> make_targets(const manifest::Manifest& manifest, const KeyContext& context,
                                 ModelResolver& resolver);

}  // namespace neuron_cache::plan
