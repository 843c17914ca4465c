#include "neuron_cache/pipeline/registry_memo.h"

#include <nlohmann/json.hpp>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::pipeline {
namespace {

using nlohmann::json;

// The models and the architecture digests asked: another digest is another question.
std::string scan_key(const std::string& compiler_version, const remote::ScanModels& models) {
  std::string key = compiler_version;
  for (const auto& [model, by_task] : models) {
    key += "|" + model;
    for (const auto& [task, architecture] : by_task) {
      key += " " + task + "=";
      for (const auto& digest : architecture.digests) key += digest + ",";
      if (architecture.config_json)
        key += "~" + sha256_hex(pyjson::dumps(*architecture.config_json));
    }
  }
  return key;
}

json number_or_null(const std::optional<int64_t>& value) {
  return value ? json(*value) : json(nullptr);
}

std::optional<int64_t> read_number(const json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

json to_json(const plan::RegistryCandidate& c) {
  return {{"model_id", c.model_id},
          {"task", c.task},
          {"batch_size", number_or_null(c.batch_size)},
          {"sequence_length", number_or_null(c.sequence_length)},
          {"tensor_parallel", number_or_null(c.tensor_parallel)},
          {"dtype", c.dtype},
          {"target", c.target},
          {"compiler_dir", c.where.compiler_dir},
          {"optimum_version", c.where.optimum_version},
          {"path", c.where.path},
          {"same_architecture_as", c.same_architecture_as},
          {"traced", c.traced}};
}

plan::RegistryCandidate from_json(const json& j) {
  return {j.at("model_id").get<std::string>(),
          j.at("task").get<std::string>(),
          read_number(j.at("batch_size")),
          read_number(j.at("sequence_length")),
          read_number(j.at("tensor_parallel")),
          j.at("dtype").get<std::string>(),
          j.at("target").get<std::string>(),
          {j.at("compiler_dir").get<std::string>(), j.at("optimum_version").get<std::string>(),
           j.at("path").get<std::string>()},
          j.at("same_architecture_as").get<std::string>(),
          j.at("traced").get<bool>()};
}

}  // namespace

std::optional<RegistryAnswer> RegistryMemo::recall(const std::string& compiler_version,
                                                   const remote::ScanModels& models) const {
  if (revision_.empty()) return std::nullopt;
  json memo = pyjson::read_kept(file_).value_or(json());
  if (!memo.is_object() || memo.value("repo", "") != repo_ ||
      memo.value("revision", "") != revision_) {
    return std::nullopt;
  }
  try {
    const json& scan = memo.at("scans").at(scan_key(compiler_version, models));
    RegistryAnswer answer;
    answer.has_registry = scan.at("has_registry").get<bool>();
    answer.compiler_dirs = scan.at("compiler_dirs").get<std::vector<std::string>>();
    for (const auto& item : scan.at("candidates")) answer.candidates.push_back(from_json(item));
    return answer;
  } catch (const json::exception&) {
    return std::nullopt;  // not asked yet at this head, or a damaged memo: ask the Hub
  }
}

void RegistryMemo::remember(const std::string& compiler_version, const remote::ScanModels& models,
                            const RegistryAnswer& answer) const {
  // A scan with a failed read says what one run could see, not what the head holds.
  if (revision_.empty() || !answer.complete) return;
  json memo = pyjson::read_kept(file_).value_or(json());
  if (!memo.is_object() || memo.value("repo", "") != repo_ ||
      memo.value("revision", "") != revision_ || !memo.contains("scans") ||
      !memo["scans"].is_object()) {
    memo = {{"repo", repo_}, {"revision", revision_}, {"scans", json::object()}};
  }
  json candidates = json::array();
  for (const auto& c : answer.candidates) candidates.push_back(to_json(c));
  memo["scans"][scan_key(compiler_version, models)] = {{"has_registry", answer.has_registry},
                                                       {"compiler_dirs", answer.compiler_dirs},
                                                       {"candidates", candidates}};
  try {
    file_.replace(memo.dump());
  } catch (const std::exception&) {
    // Remembering only saves asking again.
  }
}

}  // namespace neuron_cache::pipeline
