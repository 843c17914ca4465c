#include "neuron_cache/transformers/arch_digest.h"

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/transformers/program.h"

namespace neuron_cache::transformers {

std::string digest_of_hashed(const Json& hashed, const std::string& task) {
  Json arch = {
      {"model_type", hashed.value("model_type", Json())}, {"task", task}, {"config", hashed}};
  return sha256_hex(pyjson::dumps(arch, std::nullopt, &int_keyed_members()));
}

DigestAnswer arch_digest(const Table& table, const Json& config_json, const std::string& task) {
  DigestAnswer answer;
  answer.release = table.release();
  try {
    ObjectPtr config = from_config_json(table, config_json);
    if (task == "text-generation") config = get_text_config(config);
    Json hashed = to_diff_dict(*config);
    for (const auto& key : registry::cache_white_list()) hashed.erase(key);
    hashed.erase("neuron");
    answer.model_type = hashed.value("model_type", "");
    answer.digest = digest_of_hashed(hashed, task);
    answer.hashed = std::move(hashed);
  } catch (const UnknownModelType& unknown) {
    answer.unknown_model_type = true;
    answer.model_type = unknown.model_type();
    answer.why_not = "transformers " + answer.release +
                     " as neuron-cache knows it has no class for "
                     "the model type \"" +
                     unknown.model_type() + "\"";
  } catch (const PythonError& error) {
    answer.why_not = std::string("transformers ") + answer.release +
                     " cannot load this config.json: " + error.what();
  } catch (const Json::exception& error) {
    answer.why_not =
        std::string("the configuration table cannot run this config.json: ") + error.what();
  }
  return answer;
}

namespace {

// Every key of `file` is in `stored` with an equal value, recursively for dicts; a key only
// the file has may be missing when it holds a PretrainedConfig default (to_diff_dict drops it).
bool covered(const Json& file, const Json& stored, const Json* base_defaults) {
  for (const auto& [key, value] : file.items()) {
    auto kept = stored.find(key);
    if (kept == stored.end()) {
      bool dropped = base_defaults != nullptr && base_defaults->contains(key) &&
                     equal(value, (*base_defaults)[key]);
      if (!dropped) return false;
    } else if (value.is_object() && kept->is_object()) {
      if (!covered(value, *kept, nullptr)) return false;
    } else if (!equal(value, *kept)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool stored_config_matches(const Json& config_json, const Json& stored, const std::string& task) {
  if (!config_json.is_object() || !stored.is_object()) return false;
  Json file = config_json;
  if (task == "text-generation") {
    const Json* text = nullptr;
    for (const std::string& name : text_config_names()) {
      auto it = config_json.find(name);
      if (it == config_json.end() || it->is_null()) continue;
      if (text != nullptr || !it->is_object()) return false;  // transformers fails on it too
      text = &*it;
    }
    if (text != nullptr) file = *text;
  }
  for (const auto& key : registry::cache_white_list()) file.erase(key);
  file.erase("neuron");
  if (!file.contains("model_type") ||
      !equal(file["model_type"], stored.value("model_type", Json()))) {
    return false;
  }
  return covered(file, stored, &tables().front().base.defaults);
}

std::vector<DigestAnswer> arch_digests(const Json& config_json, const std::string& task) {
  std::vector<DigestAnswer> answers;
  for (const Table& table : tables()) answers.push_back(arch_digest(table, config_json, task));
  return answers;
}

}  // namespace neuron_cache::transformers
