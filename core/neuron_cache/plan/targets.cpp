#include "neuron_cache/plan/targets.h"

#include <unistd.h>

#include <sstream>

#include "neuron_cache/error.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/git/git_info.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::plan {
namespace {

namespace fs = std::filesystem;

std::string model_type_of(const std::string& config_text, const std::string& origin) {
  pyjson::Json config = pyjson::parse(config_text);
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) {
    throw input_error(origin + " has no \"model_type\": set model_type in the manifest");
  }
  return config["model_type"].get<std::string>();
}

std::string memo_key(const manifest::Configuration& c) {
  return c.model_id + "\n" + c.revision.value_or("") + "\n" + c.checkout.value_or("") + "\n" +
         c.model_type.value_or("");
}

// What the memo file remembers: "model_id@revision", with the model type when the manifest gives
// it.
std::string hub_memo_key(const manifest::Configuration& c) {
  std::string key = c.model_id + "@" + c.revision.value_or("main");
  return c.model_type ? key + " model_type=" + *c.model_type : key;
}

}  // namespace

bool is_commit_id(const std::string& revision) {
  return revision.size() == 40 &&
         revision.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::vector<std::string> flag_words(const std::string& neuron_cc_flags) {
  // The cache options are dropped by the one rule the compile step applies too.
  std::istringstream kept(strip_cache_flags(neuron_cc_flags, nullptr));
  return {std::istream_iterator<std::string>(kept), std::istream_iterator<std::string>()};
}

storage::ModelSource& ModelResolver::online(const manifest::Configuration& c,
                                            const std::string& wanted) {
  // Deliberately offline is the Hub being out of reach on purpose: the same fallback as an
  // outage (an earlier answer, else an unkeyed configuration), never a harder failure than it.
  // The cause only: the planner's warning says what to do, once (pipeline/plan_step.cpp).
  if (client_ == nullptr || client_->offline()) {
    throw operational_error(c.source.to_string() +
                            ": the Hub is offline (HF_HUB_OFFLINE) and no earlier run remembered " +
                            wanted);
  }
  return *client_;
}

namespace {

// A checkout's config.json, bounded like any answer from the Hub; nothing (and why) when it is
// missing, a symlink, too large or unreadable.
std::optional<std::string> read_checkout_config(const fs::path& dir, std::string* why) {
  fs::path path = (dir / "config.json").lexically_normal();
  try {
    sys::SafeDir clone = sys::SafeDir::open(dir);
    auto item = clone.entry("config.json");
    if (item && item->type == sys::NodeType::Symlink) {
      *why = path.string() + " is a symlink: a checkout's config.json is read only as a file";
      return std::nullopt;
    }
    return clone.read_small_file("config.json", pyjson::kApiAnswer.max_bytes);
  } catch (const Error& error) {
    *why = path.string() + " cannot be read: " + error.what();
    return std::nullopt;
  }
}

}  // namespace

ResolvedModel ModelResolver::resolve_checkout(const manifest::Configuration& c) {
  fs::path dir = manifest_dir_ / *c.checkout;
  std::optional<std::string> head = git::head_commit(dir);
  if (!head) {
    throw input_error(c.source.to_string() + ": checkout " + dir.string() +
                      " is not a git clone: clone the model there or use revision: instead");
  }
  ResolvedModel model{head, c.model_type.value_or(""), ""};
  if (model.model_type.empty()) {
    std::string why;
    std::optional<std::string> text = read_checkout_config(dir, &why);
    if (!text) {
      throw input_error(c.source.to_string() + ": " + why + ": set model_type in the manifest");
    }
    model.model_type = model_type_of(*text, (dir / "config.json").string());
  }
  return model;
}

ResolvedModel ModelResolver::resolve_hub(const manifest::Configuration& c, bool remembered) {
  ResolvedModel model;
  std::string revision = c.revision.value_or("main");
  if (is_commit_id(revision)) {
    model.revision = revision;
  } else {
    model.revision = online(c, "its commit").commit_of(c.model_id, revision, remembered);
  }
  if (c.model_type) {
    model.model_type = *c.model_type;
    return model;
  }
  // config.json at a commit never changes: its model type is read once, then remembered.
  std::string at_commit = c.model_id + "@" + *model.revision;
  if (auto known = recall(at_commit); known && !known->model_type.empty()) {
    model.model_type = known->model_type;
    return model;
  }
  model.model_type = model_type_from_hub(c, *model.revision);
  remember(at_commit, model);
  return model;
}

// A config.json the Hub serves that is not JSON was damaged on the way (or by the Hub): it is
// asked for once more, then it is an operational failure (the configuration is compiled unkeyed),
// never the user's input error. A valid one without model_type is the manifest's to fix.
std::string ModelResolver::model_type_from_hub(const manifest::Configuration& c,
                                               const std::string& commit) {
  const std::string origin = c.model_id + "/config.json at " + commit.substr(0, 12);
  for (int attempt = 1;; ++attempt) {
    auto text = online(c, "its model_type").read_file(c.model_id, "config.json", commit);
    if (!text) {
      throw input_error(c.source.to_string() + ": " + c.model_id +
                        " has no config.json: set model_type in the manifest");
    }
    if (pyjson::parse_or_nothing(*text, pyjson::kApiAnswer)) {
      configs_[c.model_id + "@" + commit] = *text;  // the architecture digest reads it too
      return model_type_of(*text, origin);
    }
    if (attempt == 2) {
      throw operational_error(origin + " was served twice as something that is not JSON (" +
                              std::to_string(text->size()) +
                              " bytes): a transfer or Hub fault, not the manifest's; run again "
                              "later, or set model_type in the manifest");
    }
  }
}

pyjson::Json ModelResolver::read_memo() const {
  std::optional<pyjson::Json> json = pyjson::read_kept(memo_file_);
  // A damaged memo is only a missed shortcut.
  return json && json->is_object() ? *json : pyjson::Json::object();
}

std::optional<ResolvedModel> ModelResolver::recall(const std::string& memo) const {
  if (memo_file_.empty()) return std::nullopt;
  pyjson::Json json = read_memo();
  if (!json.contains(memo) || !json[memo].is_object()) return std::nullopt;
  const pyjson::Json& item = json[memo];
  std::string revision = item.value("revision", "");
  if (!is_commit_id(revision)) return std::nullopt;
  return ResolvedModel{revision, item.value("model_type", ""), ""};
}

void ModelResolver::remember(const std::string& memo, const ResolvedModel& model) const {
  if (memo_file_.empty() || !model.revision) return;
  try {
    pyjson::Json json = read_memo();
    pyjson::Json item = {{"revision", *model.revision}, {"model_type", model.model_type}};
    if (json.contains(memo) && json[memo].is_object() && json[memo].contains("architectures")) {
      item["architectures"] = json[memo]["architectures"];  // a commit's config.json never changes
    }
    if (json.contains(memo) && json[memo] == item) return;  // an unchanged run writes nothing
    json[memo] = item;
    memo_file_.replace(pyjson::dumps(json, 2));
  } catch (const std::exception&) {
    // Remembering is best effort: the next run asks the Hub again.
  }
}

std::optional<std::string> ModelResolver::read_config(const Target& t, std::string* why) {
  const manifest::Configuration& c = t.configuration;
  if (c.checkout) return read_checkout_config(manifest_dir_ / *c.checkout, why);
  std::string commit = *t.inputs.checkpoint_revision;
  if (auto it = configs_.find(c.model_id + "@" + commit); it != configs_.end()) return it->second;
  if (client_ == nullptr || client_->offline()) {
    *why = "the Hub is not asked (offline)";
    return std::nullopt;
  }
  try {
    auto text = client_->read_file(c.model_id, "config.json", commit);
    if (!text) *why = c.model_id + " has no config.json";
    return text;
  } catch (const Error& error) {
    *why = "its config.json could not be read: " + std::string(error.what());
    return std::nullopt;
  }
}

// The memo's digests of a commit's config.json, by task ("architectures": the digests of every
// transformers table; an older memo's "arch_digests" hashed the raw file and is not read).
std::optional<remote::TaskArchitecture> ModelResolver::architecture(const Target& t,
                                                                    std::string* why) {
  const manifest::Configuration& c = t.configuration;
  if (!t.inputs.checkpoint_revision) {
    *why = "its revision is not resolved";
    return std::nullopt;
  }
  std::string memo = c.model_id + "@" + *t.inputs.checkpoint_revision;
  pyjson::Json json = memo_file_.empty() ? pyjson::Json::object() : read_memo();
  const pyjson::Json* known = json.contains(memo) && json[memo].is_object() ? &json[memo] : nullptr;
  if (known && known->contains("architectures") && (*known)["architectures"].is_object()) {
    auto it = (*known)["architectures"].find(c.task);
    if (it != (*known)["architectures"].end() && it->is_array() && !it->empty()) {
      remote::TaskArchitecture remembered;
      for (const auto& digest : *it) {
        if (digest.is_string()) remembered.digests.insert(digest.get<std::string>());
      }
      if (remembered.digests.size() == it->size()) return remembered;
    }
  }
  std::optional<std::string> text = read_config(t, why);
  if (!text) return std::nullopt;
  auto config = pyjson::parse_or_nothing(*text, pyjson::kApiAnswer);
  if (!config || !config->is_object()) {
    *why = "its config.json is not a JSON object";
    return std::nullopt;
  }
  remote::TaskArchitecture architecture = remote::architecture_of(*config, c.task);
  if (!architecture.digests.empty() && !memo_file_.empty() && !c.checkout) {
    try {
      if (!json.contains(memo) || !json[memo].is_object()) {
        json[memo] = {{"revision", *t.inputs.checkpoint_revision}, {"model_type", ""}};
      }
      json[memo].erase("arch_digests");
      json[memo]["architectures"][c.task] = architecture.digests;
      memo_file_.replace(pyjson::dumps(json, 2));
    } catch (const std::exception&) {
      // Remembering is best effort.
    }
  }
  return architecture;
}

ResolvedModel ModelResolver::resolve(const manifest::Configuration& c) {
  std::string memo = memo_key(c);
  if (auto it = resolved_.find(memo); it != resolved_.end()) return it->second;
  ResolvedModel model;
  if (c.checkout) {
    model = resolve_checkout(c);
  } else {
    std::optional<ResolvedModel> remembered =
        client_ && !client_->offline() ? recall(hub_memo_key(c)) : std::nullopt;
    try {
      // The Hub missed a remembered revision's short wait a moment ago: the others remembered
      // are not asked (a warm run does not wait on a Hub that does not answer).
      if (remembered && !slow_hub_.empty())
        throw operational_error("not asked: the Hub did not answer for " + slow_hub_ +
                                " a moment before");
      model = resolve_hub(c, remembered.has_value());
      remember(hub_memo_key(c), model);
    } catch (const Error& error) {
      bool hub_unavailable =
          error.kind() == ErrorKind::Operational || client_ == nullptr || client_->offline();
      auto known = hub_unavailable ? recall(hub_memo_key(c)) : std::nullopt;
      if (remembered && hub_unavailable && slow_hub_.empty()) slow_hub_ = c.model_id;
      // Any operational failure (the Hub down, a damaged answer) with nothing remembered: the
      // configuration is compiled unkeyed with a note, never the build failed.
      if (!known && error.kind() == ErrorKind::Operational) {
        model = {std::nullopt, c.model_type.value_or(""), error.what()};
        resolved_.emplace(memo, model);
        return model;
      }
      if (!known) throw;
      from_memo_.push_back(c.model_id + "@" + c.revision.value_or("main") + " -> " +
                           *known->revision + " (" + error.what() + ")");
      model = *known;
    }
  }
  resolved_.emplace(memo, model);
  return model;
}

std::vector<Target> make_targets(const manifest::Manifest& manifest, const KeyContext& context,
                                 ModelResolver& resolver) {
  std::vector<Target> targets;
  for (const auto& c : manifest.configurations) {
    ResolvedModel model = resolver.resolve(c);
    cache_key::KeyInputs in;
    in.model_id = c.model_id;
    in.model_type = model.model_type;
    in.task = c.task;
    in.precision = c.precision;
    in.batch_size = c.batch_size;
    in.sequence_length = c.sequence_length;
    in.compiler_version = context.compiler_version;
    in.num_cores = c.num_cores;
    in.target = cache_key::target_of(c.instance_type);
    in.flags = c.compiler_flags;
    in.flags.insert(in.flags.end(), context.env_flags.begin(), context.env_flags.end());
    in.checkpoint_revision = model.revision;
    in.optimum_neuron_version = context.optimum_neuron_version;
    std::string key = cache_key::key_of(in);
    std::string unkeyed;
    if (!model.unresolved.empty()) {
      unkeyed = c.model_id + "@" + c.revision.value_or("main") + " could not be resolved (" +
                model.unresolved + ")";
    }
    targets.push_back({c, std::move(in), std::move(key), std::move(unkeyed)});
  }
  return targets;
}

}  // namespace neuron_cache::plan
