#include "tool_runner.h"

#include <chrono>
#include <sstream>

namespace neuron_cache::testing {
namespace {

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

}  // namespace

std::string stand_in_manifest(const std::vector<StandInModel>& models) {
  std::ostringstream y;
  y << "cache_repo: " << kTestCacheRepo << "\n"
    << "compiler_version: \"" << kTestCompilerVersion << "\"\n"
    << "optimum_neuron_version: \"0.4.5\"\n"
    << "instance_type: trn1\n"
    << "compile:\n"
    << "  command: " << stand_in_compile_command() << "\n"
    << "models:\n";
  for (const auto& model : models) {
    y << "  - model_id: " << model.id << "\n"
      << "    task: text-generation\n"
      << "    configurations:\n";
    for (const auto& [name, batch] : model.configurations) {
      y << "      - {name: " << name << ", batch_size: " << batch
        << ", sequence_length: 128, num_cores: 2, precision: bf16}\n";
    }
  }
  return y.str();
}

std::string one_configuration_per_model(const std::vector<std::string>& models) {
  std::vector<StandInModel> list;
  for (size_t i = 0; i < models.size(); ++i) {
    list.push_back({models[i], {{"conf" + std::to_string(i), 1}}});
  }
  return stand_in_manifest(list);
}

std::string ToolRunner::command(const std::string& args, const std::string& extra_env,
                                const fs::path& cache_dir) const {
  std::string line = "cd " + quoted(work_) + " && exec " + std::string(kCleanEnv) +
                     " PATH=/usr/bin:/bin" + " HOME=/nonexistent-home HF_HOME=" + quoted(hf_home_) +
                     " HF_ENDPOINT=" + endpoint + " HF_TOKEN=" + token +
                     " NEURON_COMPILE_CACHE_URL=" + quoted(cache_dir.empty() ? cache : cache_dir) +
                     " NEURON_CACHE_RETRY_BASE_MS=10 STAND_IN_DELAY=0";
  if (!call_log.empty()) line += " STAND_IN_CALL_LOG=" + quoted(call_log);
  return line + " " + extra_env + " " + wrapper + " " + tool_path() + " " + args;
}

ToolResult ToolRunner::run(const std::string& args, const std::string& extra_env,
                           const fs::path& cache_dir) {
  fs::path err_file = work_ / ("stderr-" + std::to_string(runs_++) + ".txt");
  std::string line = "(" + command(args, extra_env, cache_dir) + " 2>" + quoted(err_file) + ")";
  ToolResult result;
  auto start = std::chrono::steady_clock::now();
  result.code = run_command(line, &result.out);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.err = fs::exists(err_file) ? read_file(err_file) : "";
  return result;
}

}  // namespace neuron_cache::testing
