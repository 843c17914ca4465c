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

std::vector<DigestAnswer> arch_digests(const Json& config_json, const std::string& task) {
  std::vector<DigestAnswer> answers;
  for (const Table& table : tables()) answers.push_back(arch_digest(table, config_json, task));
  return answers;
}

}  // namespace neuron_cache::transformers
