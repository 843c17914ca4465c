// Runs the neuron-cache binary as a user's shell would, with a clean environment (env -i): only
// PATH, HOME, HF_HOME, HF_ENDPOINT, HF_TOKEN, the cache, the stand-in compiler's knobs and what a
// test adds. Every test file that drives the tool end to end uses this one runner.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hub_fixture.h"

namespace neuron_cache::testing {

// The compiler version the pipeline tests' manifests declare (kCompilerDir's), and the cache
// repo they use.
inline constexpr const char* kTestCompilerVersion = "2.21.33363.0+82129205";
inline constexpr const char* kTestCacheRepo = "acme/neuron-cache";

// A model of a stand-in manifest and its configurations: name -> batch size (sequence 128,
// 2 cores, bf16 each).
struct StandInModel {
  std::string id;
  std::vector<std::pair<std::string, int>> configurations;
};
// A manifest of kTestCacheRepo and kTestCompilerVersion that the stand-in compiler compiles.
std::string stand_in_manifest(const std::vector<StandInModel>& models);
// stand_in_manifest with one configuration (conf0, conf1, ...: batch 1) per model of `models`.
std::string one_configuration_per_model(const std::vector<std::string>& models);

// What one run printed, its exit code and how long it took.
struct ToolResult {
  int code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
  std::string all() const { return out + err; }
};

class ToolRunner {
 public:
  // Runs in `work` (stderr files go there too) with `hf_home` as HF_HOME, `endpoint` as
  // HF_ENDPOINT and `cache` as NEURON_COMPILE_CACHE_URL.
  ToolRunner(fs::path work, fs::path hf_home, std::string endpoint, fs::path cache)
      : endpoint(std::move(endpoint)),
        cache(std::move(cache)),
        work_(std::move(work)),
        hf_home_(std::move(hf_home)) {}

  // The shell command line of one run, without redirections: "cd WORK && exec env -i ... TOOL
  // ARGS". `cache_dir` replaces `cache` for this run when not empty.
  std::string command(const std::string& args, const std::string& extra_env = "",
                      const fs::path& cache_dir = {}) const;
  // Runs the tool and waits for it; stdout and stderr are kept apart.
  ToolResult run(const std::string& args, const std::string& extra_env = "",
                 const fs::path& cache_dir = {});

  std::string endpoint;
  fs::path cache;
  std::string token = kHubWriteToken;
  fs::path call_log;    // STAND_IN_CALL_LOG when not empty
  std::string wrapper;  // a command the tool runs under (strace), may be empty

 private:
  fs::path work_;
  fs::path hf_home_;
  int runs_ = 0;
};

// The compiles the stand-in finished, as its call log (ToolRunner::call_log) tells them, counted
// by batch size ("1", "2", ...).
inline std::map<std::string, int> compiles_by_batch(const std::filesystem::path& call_log) {
  std::map<std::string, int> by_batch;
  std::ifstream in(call_log);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json call = nlohmann::json::parse(line);
    if (call["compiled"].empty()) continue;
    const auto& argv = call["argv"];
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--batch_size") ++by_batch[argv[i + 1].get<std::string>()];
    }
  }
  return by_batch;
}

}  // namespace neuron_cache::testing
