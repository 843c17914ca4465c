// scale-bench: issue 25's scale targets, measured through the tool as users run it, against the
// local Hub server holding MODELS x CONFIGS configurations in the index layout push writes (one
// shard per model and compiler version, made in one commit rather than one push each):
//   (a) a cold `neuron-cache plan` of 20 configurations (spread over 1, 3 and 20 declared models):
//       Hub requests from the server's access log, the declared models' own reads (revision,
//       config.json) apart from the cache repo's; target: cache repo requests <= 5;
//   (b) `neuron-cache push` of one new configuration of a model already indexed: bytes of index
//       data the commit changed (the index files whose blob id changed); target <= 64 KB;
//   (c) `neuron-cache status` of a local cache of ENTRIES complete MODULE_ folders (two per
//       configuration recorded in the local index): wall time, median of 5; target <= 1 s.
// Numbers are printed, targets reported met or not met, nothing asserted; "WRONG" is printed when
// the setup is not what the tool sees (a plan that does not find the configurations).
//   scale-bench [MODELS=500] [CONFIGS=20] [ENTRIES=10000] [WORK]
// WORK keeps the local cache of (c) between runs (laying it out takes most of the time).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/local/local_index.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
namespace ai = artifact_index;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kCompiler = "2.21.33363.0+82129205";
constexpr const char* kRepo = "acme/scale-cache";
constexpr int kPlanConfigurations = 20;
constexpr uint64_t kPushTargetBytes = 64 * 1000;  // "64 KB"

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const char* verdict(bool met) {
  return met ? "met" : "not met";
}

std::string model_id(int m) {
  return "org" + std::to_string(m) + "/model-" + std::to_string(m);
}

// The key inputs the tool makes for configuration `c` of model `m` from manifest_text().
cache_key::KeyInputs inputs(int m, int c, const std::string& revision) {
  return {model_id(m), "llama", "text-generation", "bf16",  1 + c,       128, kCompiler, 2,
          "trn1",      {},      revision,          "0.4.5", std::nullopt};
}

std::string module_name(const std::string& key, int graph) {
  return "MODULE_" + key.substr(0, 18) + std::to_string(graph) + "+d7517139";
}

// An index entry shaped like a decoder export's: two MODULE_ folders of four files.
ai::Entry hub_entry(int m, int c, const std::string& revision) {
  ai::Entry e;
  e.inputs = inputs(m, c, revision);
  e.key = cache_key::key_of(e.inputs);
  e.configuration = "c" + std::to_string(c);
  for (int graph = 0; graph < 2; ++graph) {
    std::string seed = e.key + std::to_string(graph);
    ai::ModuleRecord module{module_name(e.key, graph), {}};
    module.files = {{"model.hlo_module.pb", 2048, sha256_hex(seed + "hlo")},
                    {"compile_flags.json", 60, sha256_hex(seed + "flags")},
                    {"model.neff", 400u << 20, sha256_hex(seed + "neff")},
                    {"model.done", 0, sha256_hex("")}};
    e.modules.push_back(module);
  }
  e.compile_seconds = 1800;
  e.tool = "neuron-cache 0.2.0";
  e.created_at = "2026-11-30T12:00:00Z";
  return e;
}

// A manifest of `configs`: (model, configuration) pairs, in the form inputs() keys.
std::string manifest_text(const std::vector<std::pair<int, int>>& configs) {
  std::map<int, std::vector<int>> by_model;
  for (const auto& [m, c] : configs) by_model[m].push_back(c);
  std::string y = std::string("cache_repo: ") + kRepo + "\ncompiler_version: \"" + kCompiler +
                  "\"\noptimum_neuron_version: \"0.4.5\"\ninstance_type: trn1\nmodels:\n";
  for (const auto& [m, list] : by_model) {
    y += "  - model_id: " + model_id(m) + "\n    task: text-generation\n    configurations:\n";
    for (int c : list) {
      y += "      - {name: m" + std::to_string(m) + "c" + std::to_string(c) +
           ", batch_size: " + std::to_string(1 + c) +
           ", sequence_length: 128, num_cores: 2, precision: bf16}\n";
    }
  }
  return y;
}

// The environment of one machine: its own home and cache root, nothing kept from another run.
std::vector<std::string> machine_env(const testing::HubServer& server, const fs::path& home) {
  return {"PATH=/usr/bin:/bin",
          "HOME=" + home.string(),
          "HF_HOME=" + (home / "hf").string(),
          "HF_ENDPOINT=" + server.url(),
          "HF_TOKEN=" + std::string(testing::kHubWriteToken),
          "NEURON_COMPILE_CACHE_URL=" + (home / "cache").string()};
}

struct Run {
  int code = -1;
  double seconds = 0;
  std::string out;
  std::string err;
};

// Runs the tool with exactly `env`; stdout kept in `out` (stderr discarded), wall time measured.
Run run_tool(const std::vector<std::string>& args, const std::vector<std::string>& env,
             const fs::path& scratch) {
  std::vector<std::string> argv = {testing::tool_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(s.data());
  std::vector<std::string> env_copy = env;
  for (auto& s : env_copy) e.push_back(s.data());
  a.push_back(nullptr);
  e.push_back(nullptr);
  fs::path out_file = scratch / "tool-stdout";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  fs::path err_file = scratch / "tool-stderr";
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  Run run;
  auto start = Clock::now();
  pid_t pid = -1;
  int status = -1;
  if (posix_spawn(&pid, a[0], &actions, nullptr, a.data(), e.data()) == 0) waitpid(pid, &status, 0);
  run.seconds = seconds_since(start);
  posix_spawn_file_actions_destroy(&actions);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = testing::read_file(out_file);
  run.err = testing::read_file(err_file);
  return run;
}

// The Hub: the cache repo and the declared models' repos (a config.json each).
json hub_config(int declared) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> models;
  for (int m = 0; m < declared; ++m)
    models.push_back({model_id(m), {{"config.json", R"({"model_type": "llama"})"}}});
  return testing::cache_hub_config(kRepo, models);
}

hub::HubClient make_client(const testing::HubServer& server) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  return hub::HubClient(options);
}

// Every model's shard, written in one commit: what MODELS x CONFIGS pushes would leave.
// Returns the revision of each declared model (the others never get one: a fixed string).
std::vector<std::string> fill_repo(hub::HubClient& client, int models, int configs, int declared,
                                   const fs::path& dir) {
  std::vector<std::string> revisions;
  for (int m = 0; m < declared; ++m) revisions.push_back(client.repo_info(model_id(m)).sha);
  auto start = Clock::now();
  std::vector<hub::CommitOperation> operations;
  uint64_t bytes = 0, largest = 0;
  for (int m = 0; m < models; ++m) {
    std::string revision = m < declared ? revisions[m] : std::string(40, 'a');
    ai::IndexFile shard = ai::shard_for(inputs(m, 0, revision));
    for (int c = 0; c < configs; ++c) {
      ai::Entry e = hub_entry(m, c, revision);
      shard.entries.emplace(e.key, e);
    }
    std::string path = ai::remote_shard_path(shard.entries.begin()->second.inputs);
    std::string text = ai::serialize_index(shard);
    bytes += text.size();
    largest = std::max<uint64_t>(largest, text.size());
    testing::write_file(dir / path, text);
    operations.push_back({hub::CommitOperation::Kind::Add, path, dir / path});
  }
  client.commit(kRepo, operations, "a repo at scale", std::nullopt);
  std::printf(
      "repo: %d models x %d configurations = %d, %zu index shards, %.1f MiB of index (largest "
      "shard %.1f KB), made in %.1f s\n",
      models, configs, models * configs, operations.size(), static_cast<double>(bytes) / (1 << 20),
      static_cast<double>(largest) / 1000, seconds_since(start));
  return revisions;
}

// Whether an access-log entry asks about one of the declared models' own repos (not the cache).
bool is_model_read(const json& request) {
  std::string path = request.value("path", "");
  return path.find(kRepo) == std::string::npos && path.find("/org") != std::string::npos;
}

bool is_shard_read(const json& request) {
  std::string path = request.value("path", "");
  return path.find("/resolve/") != std::string::npos &&
         path.find(ai::kRemoteDir) != std::string::npos;
}

size_t store_rows(const std::string& plan_json) {
  auto plan = json::parse(plan_json.substr(std::min(plan_json.find('{'), plan_json.size())),
                          nullptr, false);
  if (plan.is_discarded() || !plan.contains("configurations")) return 0;
  size_t n = 0;
  for (const auto& row : plan["configurations"]) n += row["status"] == "store" ? 1 : 0;
  return n;
}

// (a) A cold plan of 20 configurations over `spread` models: an empty cache, no kept answers.
void cold_plan(const testing::HubServer& server, int spread, int configs) {
  std::vector<std::pair<int, int>> wanted;
  for (int i = 0; i < kPlanConfigurations; ++i) wanted.push_back({i % spread, i % configs});
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  testing::TempDir home;
  testing::write_file(home / "m.yaml", manifest_text(wanted));
  server.clear_log();
  Run run = run_tool({"plan", "--json", (home / "m.yaml").string()},
                     machine_env(server, home.path()), home.path());
  json log = server.access_log();
  size_t model_reads = testing::count_requests(log, is_model_read);
  size_t shards = testing::count_requests(log, is_shard_read);
  size_t cache = log.size() - model_reads;
  size_t found = store_rows(run.out);
  std::printf(
      "  %2zu configurations of %2d models   %6.3f s  %3zu requests: %2zu of the models (revision, "
      "config.json), %2zu of the cache repo (%zu index shards)%s\n",
      wanted.size(), spread, run.seconds, log.size(), model_reads, cache, shards,
      found == wanted.size() ? "" : "  WRONG: not all found in the store");
  if (found != wanted.size()) std::printf("%s\n", run.err.substr(0, 2000).c_str());
  std::printf("    target: cache repo requests <= 5                 %5zu  %s\n", cache,
              verdict(cache <= 5));
}

// Blob ids of the index files at `revision`.
std::map<std::string, std::pair<std::string, uint64_t>> index_files(hub::HubClient& client,
                                                                    const std::string& revision) {
  std::map<std::string, std::pair<std::string, uint64_t>> out;
  for (const auto& file : client.list_tree(kRepo, std::string(ai::kRemoteDir), true, revision)) {
    if (!file.is_directory) out[file.path] = {file.oid, file.size};
  }
  return out;
}

// Lays out a compiled configuration (two small MODULE_ folders) in the cache under `home` and
// records it in the local index, as compile leaves it.
// The entry of configuration `in`, its two small MODULE_ folders written in `cache` (their
// flags file holds `flags`) and recorded in `index`; written to the index by the caller.
ai::Entry lay_out_entry(const local::LocalCache& cache, const local::LocalIndex& index,
                        const cache_key::KeyInputs& in, const std::string& flags) {
  ai::Entry e;
  e.inputs = in;
  e.key = cache_key::key_of(in);
  std::string compiler_dir = e.compiler_dir();
  for (int graph = 0; graph < 2; ++graph) {
    std::string name = module_name(e.key, graph);
    fs::path dir = cache.root() / compiler_dir / name;
    testing::write_file(dir / "model.hlo_module.pb", "hlo " + name);
    testing::write_file(dir / "compile_flags.json", flags);
    testing::write_file(dir / "model.neff", "neff " + name);
    testing::write_file(dir / "model.done", "");
    e.modules.push_back(index.record_module(compiler_dir, name));
  }
  e.tool = "scale-bench";
  return e;
}

void compile_locally(const fs::path& home, const cache_key::KeyInputs& in) {
  local::LocalCache cache(home / "cache");
  local::LocalIndex index(cache);
  ai::Entry e = lay_out_entry(cache, index, in, "[]");
  e.configuration = "c-new";
  e.compile_seconds = 1800;
  e.created_at = ai::utc_now();
  index.write(e);
}

// (b) Push of one new configuration of model 0 (which has CONFIGS on the Hub).
void push_one(const testing::HubServer& server, hub::HubClient& client, const std::string& revision,
              int configs) {
  testing::TempDir home;
  compile_locally(home.path(), inputs(0, configs, revision));
  testing::write_file(home / "m.yaml", manifest_text({{0, configs}}));
  auto before = index_files(client, client.repo_info(kRepo).sha);
  server.clear_log();
  Run run =
      run_tool({"push", (home / "m.yaml").string()}, machine_env(server, home.path()), home.path());
  json log = server.access_log();
  uint64_t sent = 0;
  for (const auto& request : log) sent += request.value("bytes_in", uint64_t{0});
  auto after = index_files(client, client.repo_info(kRepo).sha);
  uint64_t changed = 0;
  size_t files = 0;
  for (const auto& [path, file] : after) {
    auto it = before.find(path);
    if (it != before.end() && it->second.first == file.first) continue;
    changed += file.second;
    ++files;
  }
  std::printf(
      "push of one configuration (model with %d on the Hub)   %6.3f s  %3zu requests, %.1f KB "
      "sent, %zu index files changed, %.1f KB%s\n",
      configs, run.seconds, log.size(), static_cast<double>(sent) / 1000, files,
      static_cast<double>(changed) / 1000,
      run.code == 0 && files > 0 ? "" : "  WRONG: the push did not commit");
  if (run.code != 0 || files == 0) std::printf("%s\n", run.err.substr(0, 2000).c_str());
  std::printf("    target: index data changed <= 64 KB             %5.1f  %s\n",
              static_cast<double>(changed) / 1000, verdict(changed <= kPushTargetBytes));
}

// A local cache of `entries` complete MODULE_ folders, two per configuration recorded in the
// local index, under `root`.
void lay_out_local_cache(const fs::path& root, int entries) {
  local::LocalCache cache(root);
  local::LocalIndex index(cache);
  auto start = Clock::now();
  for (int i = 0; i < entries / 2; ++i) {
    ai::Entry e = lay_out_entry(cache, index, inputs(i / 20, i % 20, std::string(40, 'b')),
                                "[\"--target=trn1\"]");
    e.configuration = "c" + std::to_string(i % 20);
    e.created_at = "2026-11-30T12:00:00Z";
    index.write(e);
  }
  std::printf("local cache: %d complete MODULE_ folders, %d configurations, laid out in %.1f s\n",
              entries, entries / 2, seconds_since(start));
}

// (c) `status` of a cache of `entries` complete MODULE_ folders; with `work`, the cache is kept
// there (and taken again by the next run with the same ENTRIES).
void status_of_large_cache(int entries, const fs::path& work) {
  testing::TempDir scratch;
  fs::path home = work.empty() ? scratch.path() : work / ("status-" + std::to_string(entries));
  fs::path root = home / "cache";
  if (!fs::exists(home / "laid-out")) {
    fs::remove_all(home);
    lay_out_local_cache(root, entries);
    testing::write_file(home / "laid-out", "");
  }
  local::LocalCache cache(root);
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=" + home.string(),
                                  "NEURON_COMPILE_CACHE_URL=" + cache.root().string()};
  for (bool as_json : {false, true}) {
    std::vector<std::string> args = {"status", "--compiler-version", kCompiler};
    if (as_json) args.push_back("--json");
    run_tool(args, env, home);  // the first run after the layout: directory caches warm
    std::vector<double> times;
    bool counted = true;
    for (int i = 0; i < 5; ++i) {
      Run run = run_tool(args, env, home);
      times.push_back(run.seconds);
      char success[64];
      std::snprintf(success, sizeof success, as_json ? "\"count\": %d" : "Success: %6d", entries);
      counted = counted && run.code == 0 && run.out.find(success) != std::string::npos;
    }
    std::sort(times.begin(), times.end());
    std::printf("  status%-7s (median of 5)   %6.3f s  best %.3f s%s\n", as_json ? " --json" : "",
                times[2], times[0], counted ? "" : "  WRONG: entries not counted as complete");
    std::printf("    target: status <= 1 s                          %6.3f  %s\n", times[2],
                verdict(times[2] <= 1.0));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int models = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
  int configs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  int entries = argc > 3 ? std::max(2, std::atoi(argv[3])) : 10000;
  fs::path work = argc > 4 ? fs::path(argv[4]) : fs::path();
  int declared = std::min(models, kPlanConfigurations);
  testing::HubServer server(hub_config(declared));
  hub::HubClient client = make_client(server);
  testing::TempDir files;
  std::vector<std::string> revisions = fill_repo(client, models, configs, declared, files.path());

  std::printf("cold plan (empty cache, nothing kept):\n");
  std::set<int> spreads = {1, std::min(3, declared), declared};
  for (int spread : spreads) cold_plan(server, spread, configs);
  push_one(server, client, revisions[0], configs);
  status_of_large_cache(entries, work);
  return 0;
}
