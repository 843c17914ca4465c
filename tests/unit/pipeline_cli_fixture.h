// The fixture of the pipeline CLI tests (pipeline_cli_test, optimum_repo_test, run_cli_test):
// the local Hub server, a stand-in compiler, manifests and the tool run as a user runs it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/net/http.h"
#include "schema_check.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::read_file;
using testing::TempDir;
using testing::ToolResult;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kVersion = testing::kTestCompilerVersion;
constexpr const char* kRepo = testing::kTestCacheRepo;
constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";
constexpr const char* kQwen = "Qwen/Qwen2.5-0.5B";
constexpr const char* kEncoder = "sentence-transformers/all-MiniLM-L6-v2";   // a traced export
constexpr const char* kDiffusion = "stabilityai/stable-diffusion-2-1-base";  // traced, sub-folders
const std::string kCompiler = testing::kCompilerDir;
const std::string kIndexPath = "neuron-cache-index/" + kCompiler + ".json";  // format 1
const std::string kShardDir = "neuron-cache-index/" + kCompiler;             // format 2
// The compile_flags.json the stand-in writes for trn1 without NEURON_CC_FLAGS.
constexpr const char* kStandInFlags =
    R"(["--model-type=transformer", "--auto-cast=matmult", "--target=trn1"])";

// The config.json the Hub serves for a model of the fixture (optimum-neuron's AutoConfig reads it).
inline std::string model_config_text(const std::string& model) {
  if (model == kQwen) return R"({"model_type": "qwen2", "hidden_size": 896})";
  if (model == kEncoder) return R"({"model_type": "bert", "hidden_size": 384})";
  return R"({"model_type": "llama", "hidden_size": 2048})";
}

inline json hub_config() {
  return testing::cache_hub_config(
      kRepo, {{kLlama, {{"config.json", model_config_text(kLlama)}}},
              {kQwen, {{"config.json", model_config_text(kQwen)}}},
              {kEncoder, {{"config.json", model_config_text(kEncoder)}}},
              {kDiffusion,
               {{"model_index.json", R"({"_class_name": "StableDiffusionPipeline"})"},
                {"unet/config.json", R"({"in_channels": 4})"}}}});
}

// One declared configuration.
struct Conf {
  std::string name;
  int64_t batch = 1;
  int64_t seq = 128;
  int64_t cores = 2;
  std::string precision = "bf16";
  std::string model = kLlama;
};

struct ManifestSpec {
  std::vector<Conf> confs;
  std::optional<std::string> cache_repo = kRepo;
  std::string compiler_version = kVersion;
  std::string optimum = "0.4.5";
  std::map<std::string, std::string> revisions;    // model -> revision
  std::map<std::string, std::string> model_types;  // model -> model_type
  std::map<std::string, std::string> tasks;        // model -> task (default text-generation)
  std::map<std::string, std::string> compile_env;  // the compile command's env
};

inline std::string manifest_text(const ManifestSpec& spec) {
  std::ostringstream y;
  if (spec.cache_repo) y << "cache_repo: " << *spec.cache_repo << "\n";
  y << "compiler_version: \"" << spec.compiler_version << "\"\n"
    << "optimum_neuron_version: \"" << spec.optimum << "\"\n"
    << "instance_type: trn1\n"
    << "compile:\n"
    << "  command: " << testing::stand_in_compile_command() << "\n";
  if (!spec.compile_env.empty()) y << "  env:\n";
  for (const auto& [name, value] : spec.compile_env) y << "    " << name << ": " << value << "\n";
  y << "models:\n";
  std::vector<std::string> models;
  for (const auto& c : spec.confs) {
    if (std::find(models.begin(), models.end(), c.model) == models.end()) models.push_back(c.model);
  }
  for (const auto& model : models) {
    y << "  - model_id: " << model << "\n";
    if (auto it = spec.revisions.find(model); it != spec.revisions.end())
      y << "    revision: \"" << it->second << "\"\n";
    if (auto it = spec.model_types.find(model); it != spec.model_types.end())
      y << "    model_type: " << it->second << "\n";
    auto task = spec.tasks.find(model);
    y << "    task: " << (task == spec.tasks.end() ? "text-generation" : task->second)
      << "\n    configurations:\n";
    for (const auto& c : spec.confs) {
      if (c.model != model) continue;
      y << "      - {name: " << c.name << ", batch_size: " << c.batch
        << ", sequence_length: " << c.seq << ", num_cores: " << c.cores
        << ", precision: " << c.precision << "}\n";
    }
  }
  return y.str();
}

// The MODULE_ folder names the stand-in gives a configuration's two graphs.
inline std::string stand_in_module(const std::string& seed) {
  return "MODULE_" + sha256_hex(seed).substr(0, 20) + "+" + md5_hex(kStandInFlags).substr(0, 8);
}
inline std::string context_module(const Conf& c) {
  return stand_in_module("ctx|" + c.model + "|" + std::to_string(c.batch) + "|" +
                         std::to_string(c.seq) + "|" + std::to_string(c.cores) + "|" + c.precision +
                         "|" + kStandInFlags);
}
inline std::string token_module(const Conf& c) {  // no sequence length: shared across them
  return stand_in_module("tkg|" + c.model + "|" + std::to_string(c.batch) + "|" +
                         std::to_string(c.cores) + "|" + c.precision + "|" + kStandInFlags);
}

inline std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// The stand-in's command line for one configuration, as a user would type it after `run --`.
inline std::string stand_in_command(const Conf& c, const fs::path& output,
                                    const std::string& task = "text-generation") {
  return std::string(STAND_IN_EXPORT) + " --model " + c.model + " --task " + task +
         " --batch_size " + std::to_string(c.batch) + " --sequence_length " +
         std::to_string(c.seq) + " --num_cores " + std::to_string(c.cores) + " --auto_cast_type " +
         c.precision + " --instance_type trn1 " + quoted(output);
}

inline size_t count(const json& log, const std::function<bool(const json&)>& predicate) {
  return testing::count_requests(log, predicate);
}

inline bool is_commit(const json& e) {
  return e["method"] == "POST" && contains(e["path"].get<std::string>(), "/commit/");
}

inline bool is_write(const json& e) {
  if (contains(e["path"].get<std::string>(), "/paths-info/")) return false;  // a read, by POST
  return e["method"] == "POST" || e["method"] == "PUT" || e["method"] == "DELETE";
}

inline bool is_module_download(const json& e) {
  std::string path = e["path"].get<std::string>();
  return contains(path, "/resolve/") && contains(path, "MODULE_");
}

inline bool is_config_read(const json& e) {
  std::string path = e["path"].get<std::string>();
  return contains(path, "/resolve/") && path.ends_with("/config.json");
}

class PipelineCliTest : public ::testing::Test {
 protected:
  PipelineCliTest() : server(hub_config()), endpoint(server.url()) {}

  // Runs neuron-cache in `work` with a clean environment: the Hub server, the test's HF home,
  // `cache_dir` (default: `cache`) as NEURON_COMPILE_CACHE_URL and the stand-in's call log.
  ToolResult tool(const std::string& args, const std::string& extra_env = "",
                  const fs::path& cache_dir = {}) {
    testing::ToolRunner runner(work.path(), home.path(), endpoint, cache);
    runner.token = token;
    runner.call_log = call_log;
    runner.wrapper = wrapper;
    return runner.run(args, extra_env, cache_dir);
  }

  fs::path write_manifest(const ManifestSpec& spec, const std::string& name = "neuron-cache.yaml",
                          const fs::path& dir = {}) {
    fs::path path = (dir.empty() ? work.path() : dir) / name;
    write_file(path, manifest_text(spec));
    return path;
  }

  // `plan --json` of a manifest; null when it failed (the test fails too).
  json plan_json(const fs::path& manifest, const std::string& extra_env = "",
                 const fs::path& cache_dir = {}) {
    ToolResult run = tool("plan --json " + quoted(manifest), extra_env, cache_dir);
    EXPECT_EQ(run.code, 0) << run.all();
    if (run.code != 0) return nullptr;
    return json::parse(run.out);
  }

  // Configuration name -> key, from `plan --json`.
  static std::map<std::string, std::string> keys_of(const json& plan) {
    std::map<std::string, std::string> keys;
    if (plan.is_null()) return keys;
    for (const auto& row : plan["configurations"]) keys[row["name"]] = row["key"];
    return keys;
  }

  // How many times the stand-in compiler ran.
  size_t calls() const {
    if (!fs::exists(call_log)) return 0;
    std::ifstream in(call_log);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
    return n;
  }

  hub::HubClient client(const std::string& with_token = testing::kHubWriteToken) const {
    hub::ClientOptions options;
    options.endpoint = server.url();
    options.token = with_token;
    return hub::HubClient(options);
  }

  // The Hub's artifact index of kVersion: the entries of every shard (and of a format 1 file),
  // or null when there is none.
  json hub_index() const {
    json merged = nullptr;
    std::vector<std::string> files{kIndexPath};
    for (const auto& f : client().list_tree(kRepo, kShardDir)) {
      if (!f.is_directory) files.push_back(f.path);
    }
    for (const auto& path : files) {
      auto text = client().read_file(kRepo, path);
      if (!text) continue;
      if (merged.is_null()) merged = {{"entries", json::object()}};
      json file = json::parse(*text);
      for (const auto& [key, entry] : file["entries"].items()) merged["entries"][key] = entry;
    }
    return merged;
  }

  std::set<std::string> hub_files() const {
    std::set<std::string> paths;
    for (const auto& f : client().list_tree(kRepo)) {
      if (!f.is_directory) paths.insert(f.path);
    }
    return paths;
  }

  size_t hub_commits() const {
    net::HttpEngine http({server.url(), testing::kHubWriteToken});
    net::HttpResponse response =
        http.perform({"GET", server.url() + "/api/models/" + std::string(kRepo) + "/commits/main"});
    return json::parse(response.body).size();
  }

  std::string model_sha(const std::string& model) const { return client().repo_info(model).sha; }

  // Whether an index module is SUCCESS in `root` with every listed file at its listed size.
  static bool module_complete(const fs::path& root, const json& module) {
    fs::path dir = root / kCompiler / module["name"].get<std::string>();
    if (!fs::is_regular_file(dir / "model.done") || !fs::is_regular_file(dir / "model.neff"))
      return false;
    for (const auto& file : module["files"]) {
      fs::path path = dir / file["name"].get<std::string>();
      std::error_code error;
      if (fs::file_size(path, error) != file["size"].get<uint64_t>() || error) return false;
    }
    return true;
  }

  static std::set<std::string> module_names(const json& entry) {
    std::set<std::string> names;
    for (const auto& m : entry["modules"]) names.insert(m["name"].get<std::string>());
    return names;
  }

  // The local index entry of `key` in `root`, or null.
  static json local_entry(const fs::path& root, const std::string& key) {
    fs::path path = root / artifact_index::local_entry_path(kVersion, key);
    return fs::exists(path) ? json::parse(read_file(path)) : json(nullptr);
  }

  HubServer server;
  std::string endpoint;
  std::string token = testing::kHubWriteToken;
  std::string wrapper;  // a command the tool runs under (strace)
  TempDir home;
  TempDir work;
  fs::path cache = work / "cache";
  fs::path call_log = work / "compiler-calls.jsonl";
};

// A traced export (an encoder): one configuration of the sentence-transformers model.
inline ManifestSpec encoder_spec() {
  ManifestSpec spec;
  spec.confs = {{"minilm-bs1", 1, 128, 1, "bf16", kEncoder}};
  spec.tasks[kEncoder] = "feature-extraction";
  return spec;
}

// The MODULE_ folders directly in a cache's compiler folder.
inline std::set<std::string> module_folders(const fs::path& root) {
  std::set<std::string> names;
  if (!fs::is_directory(root / kCompiler)) return names;
  for (const auto& item : fs::directory_iterator(root / kCompiler)) {
    std::string name = item.path().filename().string();
    if (name.starts_with("MODULE_")) names.insert(name);
  }
  return names;
}

}  // namespace
}  // namespace neuron_cache
