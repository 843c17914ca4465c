// Registry files exactly as optimum-neuron writes them, made by CPython
// (tests/tools/optimum_registry_writer.py), so tests never check neuron-cache against itself.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "test_support.h"

namespace neuron_cache::testing {

// Two entries for the writer in `compiler_dir`: a traced export of org/bert-tiny (its artifacts
// are the folder MODULE_<entry hash>) and a decoder of org/llama-tiny.
inline nlohmann::json optimum_sample_entries(const std::string& compiler_dir) {
  nlohmann::json traced = {{"compiler_dir", compiler_dir},
                           {"optimum_version", "0.4.5"},
                           {"generation", "0.4.5"},
                           {"model_id", "org/bert-tiny"},
                           {"task", "feature-extraction"},
                           {"model_type", "bert"},
                           {"config", {{"model_type", "bert"}, {"hidden_size", 32}}},
                           {"neuron",
                            {{"compiler_type", "neuronx-cc"},
                             {"compiler_version", "2.21.33363.0+82129205"},
                             {"static_batch_size", 1},
                             {"static_sequence_length", 128},
                             {"auto_cast_type", "bf16"},
                             {"task", "feature-extraction"}}}};
  nlohmann::json decoder = traced;
  decoder["model_id"] = "org/llama-tiny";
  decoder["model_type"] = "llama";
  decoder["task"] = "text-generation";
  decoder["config"] = {{"model_type", "llama"}, {"hidden_size", 16}};
  decoder["neuron"] = {{"batch_size", 1}, {"sequence_length", 512}, {"tp_degree", 2}};
  return nlohmann::json::array({traced, decoder});
}

// The files optimum-neuron writes for `entries` (see optimum_registry_writer.py), by repo path.
inline nlohmann::json optimum_written(const nlohmann::json& entries) {
  TempDir dir;
  write_file(dir / "entries.json", entries.dump());
  std::string command = std::string(NEURON_CACHE_PYTHON) + " " + NEURON_CACHE_TESTS_DIR +
                        "/tools/optimum_registry_writer.py < '" + (dir / "entries.json").string() +
                        "'";
  std::string output;
  if (run_command(command, &output) != 0) {
    throw std::runtime_error("optimum_registry_writer.py failed: " + output);
  }
  return nlohmann::json::parse(output);
}

}  // namespace neuron_cache::testing
