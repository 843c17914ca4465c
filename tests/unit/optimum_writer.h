// Registry files exactly as optimum-neuron writes them, made by CPython
// (tests/tools/optimum_registry_writer.py), so tests never check neuron-cache against itself.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "test_support.h"

namespace neuron_cache::testing {

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
