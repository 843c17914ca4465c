// The compiler stand-in (tests/tools/stand-in-export) driven as libneuronxla drives neuronx-cc,
// and the module names it gives its graphs, computed independently: shared by the stand-in's own
// tests and the CaptureCache tests.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "neuron_cache/compile/runner.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/digest.h"
#include "test_support.h"

namespace neuron_cache::compile {
namespace {

using testing::read_file;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr const char* kCompiler = testing::kCompilerDir;  // the stand-in's default version

struct Config {
  std::string model = "org/tiny";
  int batch = 1;
  int sequence = 128;
  int cores = 2;
  std::string precision = "bf16";
  std::string instance = "trn1";
};

inline std::string flags_json(const std::string& target = "trn1") {
  return compile_flags_json(
      {"--model-type=transformer", "--auto-cast=matmult", "--target=" + target});
}

inline std::string module_name(const std::string& graph_input) {
  std::string flags = flags_json();
  return "MODULE_" + sha256_hex(graph_input + "|" + flags).substr(0, 20) + "+" + flags_key(flags);
}

// The names the stand-in gives its two graphs, computed independently here.
inline std::string ctx_module(const Config& c) {
  return module_name("ctx|" + c.model + "|" + std::to_string(c.batch) + "|" +
                     std::to_string(c.sequence) + "|" + std::to_string(c.cores) + "|" +
                     c.precision);
}
inline std::string tkg_module(const Config& c) {
  return module_name("tkg|" + c.model + "|" + std::to_string(c.batch) + "|" +
                     std::to_string(c.cores) + "|" + c.precision);
}

class StandIn {
 public:
  explicit StandIn(const TempDir& tmp) : tmp_(tmp) {}

  RunOutcome run(const Config& c, const fs::path& cache_url,
                 const std::map<std::string, std::string>& env = {}) {
    int n = ++runs_;
    CommandRun run;
    run.argv = {STAND_IN_EXPORT,
                "--model",
                c.model,
                "--task",
                "text-generation",
                "--batch_size",
                std::to_string(c.batch),
                "--sequence_length",
                std::to_string(c.sequence),
                "--num_cores",
                std::to_string(c.cores),
                "--auto_cast_type",
                c.precision,
                "--instance_type",
                c.instance,
                (tmp_ / ("out" + std::to_string(n))).string()};
    run.set_env = {{"NEURON_COMPILE_CACHE_URL", cache_url.string()},
                   {"STAND_IN_DELAY", "0.02"},
                   {"STAND_IN_CALL_LOG", call_log().string()}};
    for (const auto& [name, value] : env) run.set_env[name] = value;
    if (!env.count("NEURON_CC_FLAGS")) run.unset_env = {"NEURON_CC_FLAGS"};
    run.log_file = tmp_ / ("stand-in-" + std::to_string(n) + ".log");
    RunOutcome outcome = run_command(run);
    std::lock_guard<std::mutex> lock(mutex_);
    last_log_ = read_file(run.log_file);
    return outcome;
  }

  fs::path call_log() const { return tmp_ / "calls.jsonl"; }
  std::string last_log() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_log_;
  }

  std::vector<nlohmann::json> calls() const {
    std::vector<nlohmann::json> lines;
    std::istringstream text(fs::exists(call_log()) ? read_file(call_log()) : "");
    for (std::string line; std::getline(text, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

 private:
  const TempDir& tmp_;
  std::atomic<int> runs_{0};
  mutable std::mutex mutex_;
  std::string last_log_;  // of the last run to finish
};

}  // namespace
}  // namespace neuron_cache::compile
