// Registry parity with optimum-neuron 0.4.5 (issue 24): the case table of
// tests/oracle/registry_parity_cases.py (a repo optimum-neuron filled, written from the format
// spec by CPython: alias-less digest folders, same-architecture models, near misses, other
// generations and compilers, traced rows) answered by neuron-cache's plan and lookup and by
// tests/oracle/optimum_select.py, optimum-neuron's own filter reimplemented from its source,
// both over HTTP against the same Hub server. Every disagreement is printed, and there must be
// none.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hub_fixture.h"
#include "optimum_writer.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::TempDir;
using testing::ToolRun;

constexpr const char* kRepo = "acme/optimum-filled";
constexpr const char* kCompiler = "2.21.33363.0+82129205";
constexpr const char* kPinned = "2.21.33363.0";  // optimum-neuron's pinned neuronx-cc version

json run_python(const std::string& script, const std::string& input = "") {
  TempDir dir;
  std::string command =
      std::string(NEURON_CACHE_PYTHON) + " " + NEURON_CACHE_TESTS_DIR + "/" + script;
  if (!input.empty()) {
    testing::write_file(dir / "input.json", input);
    command += " < '" + (dir / "input.json").string() + "'";
  }
  std::string output;
  if (testing::run_command(command + " 2>&1", &output) != 0) {
    throw std::runtime_error(script + " failed: " + output);
  }
  return json::parse(output);
}

json hub_config_of(const json& table) {
  json config = HubServer::example_config();
  config["repos"].push_back(
      {{"id", kRepo}, {"private", false}, {"files", testing::optimum_written(table["entries"])}});
  for (const auto& [model, text] : table["models"].items()) {
    config["repos"].push_back(
        {{"id", model}, {"private", false}, {"files", {{"config.json", text}}}});
  }
  return config;
}

// optimum-neuron stores inf2 and trn1n as trn1: the target its export writes and reads.
std::string normalised(const std::string& instance_type) {
  return instance_type == "inf2" || instance_type == "trn1n" ? "trn1" : instance_type;
}

std::string torch_dtype(const std::string& precision) {
  static const std::map<std::string, std::string> kNames = {
      {"bf16", "bfloat16"}, {"fp16", "float16"}, {"fp32", "float32"}};
  auto it = kNames.find(precision);
  return it == kNames.end() ? precision : it->second;
}

class RegistryParityTest : public ::testing::Test {
 protected:
  RegistryParityTest()
      : table(run_python("oracle/registry_parity_cases.py")),
        server(hub_config_of(table), {"--page-size", "4"}) {}

  ToolRun tool(const std::string& args) {
    std::string command = std::string(testing::kCleanEnv) +
                          " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
                          home.path().string() + "' HF_ENDPOINT=" + server.url() +
                          " HF_TOKEN=" + testing::kHubReadToken + " NEURON_COMPILE_CACHE_URL='" +
                          (work / "cache").string() + "' " + testing::tool_path() + " " + args;
    ToolRun run{};
    run.code = testing::run_command(command, &run.output);
    return run;
  }

  // optimum_select.py's answer to each query.
  json oracle(const json& queries) {
    json request = {
        {"endpoint", server.url()}, {"token", testing::kHubReadToken}, {"repo", kRepo},
        {"pinned", kPinned},        {"optimum_version", "0.4.5"},      {"queries", queries},
        {"hashed", table["hashed"]}};
    return run_python("oracle/optimum_select.py", request.dump());
  }

  // One manifest declaring every plan case (per-configuration instance types).
  std::string manifest_of(const json& plans, const std::string& compiler) const {
    std::ostringstream y;
    y << "cache_repo: " << kRepo << "\ncompiler_version: \"" << compiler
      << "\"\noptimum_neuron_version: \"0.4.5\"\ninstance_type: trn1\ncompile:\n  command: "
      << testing::stand_in_compile_command() << "\nmodels:\n";
    std::map<std::pair<std::string, std::string>, std::vector<json>> by_model;
    for (const auto& p : plans) by_model[{p["model"], p["task"]}].push_back(p);
    for (const auto& [model_task, confs] : by_model) {
      y << "  - model_id: " << model_task.first << "\n    task: " << model_task.second
        << "\n    configurations:\n";
      for (const auto& p : confs) {
        y << "      - {name: " << p["name"].get<std::string>()
          << ", batch_size: " << p["batch_size"] << ", sequence_length: " << p["sequence_length"]
          << ", num_cores: " << p["num_cores"]
          << ", precision: " << p["precision"].get<std::string>()
          << ", instance_type: " << p["instance_type"].get<std::string>() << "}\n";
      }
    }
    return y.str();
  }

  json table;
  HubServer server;
  TempDir home;
  TempDir work;
};

TEST_F(RegistryParityTest, PlanAgreesWithOptimumNeuronsFilterOnEveryCase) {
  const json& plans = table["plans"];
  testing::write_file(work / "neuron-cache.yaml", manifest_of(plans, kCompiler));
  ToolRun run = tool("plan --json '" + (work / "neuron-cache.yaml").string() + "'");
  ASSERT_EQ(run.code, 0) << run.output;
  json plan = json::parse(run.output);
  std::map<std::string, json> rows;
  for (const auto& row : plan["configurations"]) rows[row["name"]] = row;

  json queries = json::array();
  for (const auto& p : plans) {
    queries.push_back({{"model", p["model"]},
                       {"task", p["task"]},
                       {"instance_type", normalised(p["instance_type"])},
                       {"batch_size", p["batch_size"]},
                       {"sequence_length", p["sequence_length"]},
                       {"tensor_parallel_size", p["num_cores"]},
                       {"torch_dtype", torch_dtype(p["precision"])}});
  }
  json answers = oracle(queries);
  ASSERT_EQ(answers.size(), plans.size());
  size_t disagreements = 0, hits = 0;
  std::ostringstream report;
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string name = plans[i]["name"];
    const json& row = rows[name];
    bool optimum_hit = !answers[i]["selected"].empty();
    bool ours_hit = row["status"] == "registry";
    hits += optimum_hit ? 1 : 0;
    bool agree = optimum_hit == ours_hit;
    disagreements += agree ? 0 : 1;
    report << (agree ? "  agree     " : "  DISAGREE  ") << name << ": optimum-neuron "
           << (optimum_hit ? "hit" : "miss") << ", neuron-cache "
           << row["status"].get<std::string>() << " (" << plans[i]["why"].get<std::string>()
           << ")\n";
    if (!agree) report << "      reason: " << row["reason"].get<std::string>() << "\n";
  }
  std::cout << "registry parity, plan (" << plans.size() << " cases, " << hits
            << " hits in optimum-neuron):\n"
            << report.str();
  EXPECT_EQ(disagreements, 0u) << report.str();
  EXPECT_GE(hits, 8u) << "the table must have hits to agree on";
  EXPECT_GE(plans.size() - hits, 10u) << "and near misses";

  // Why a row is what it is, in the plan's words.
  EXPECT_TRUE(contains(rows["ft-4"]["reason"], "same architecture as meta-llama/Meta-Llama-3-8B"))
      << rows["ft-4"];
  EXPECT_FALSE(contains(rows["i-4"]["reason"], "same architecture")) << rows["i-4"];
  // A model type the tables lack is found by stored config, and the reason says so.
  EXPECT_EQ(rows["vlm-2"]["status"], "registry") << rows["vlm-2"];
  EXPECT_TRUE(contains(rows["vlm-2"]["reason"], "comparing its config.json")) << rows["vlm-2"];
  EXPECT_TRUE(contains(rows["vlm-4"]["reason"], "not in neuron-cache's transformers tables"))
      << rows["vlm-4"];
  EXPECT_EQ(rows["gemma-1"]["status"], "registry") << rows["gemma-1"];
  EXPECT_EQ(rows["decoy-l3"]["status"], "compile") << rows["decoy-l3"];
  EXPECT_EQ(rows["bert-1"]["status"], "compile");
  EXPECT_TRUE(contains(rows["bert-1"]["reason"], "reuse depends on how the export is run"))
      << rows["bert-1"];
}

TEST_F(RegistryParityTest, LookupRowsEqualOptimumNeuronsTable) {
  const json& lookups = table["lookups"];
  json queries = json::array();
  for (const auto& q : lookups) {
    json query = q;
    query.erase("why");
    // optimum-neuron infers the task from the model: text-generation for every model here.
    if (!query.contains("task")) query["task"] = "text-generation";
    if (query.contains("dtype")) {  // optimum-cli's --dtype is select's torch_dtype
      query["torch_dtype"] = query["dtype"];
      query.erase("dtype");
    }
    queries.push_back(query);
  }
  json answers = oracle(queries);
  ASSERT_EQ(answers.size(), lookups.size());
  size_t disagreements = 0, rows_compared = 0;
  std::ostringstream report;
  for (size_t i = 0; i < lookups.size(); ++i) {
    const json& q = lookups[i];
    std::string args = "lookup " + q["model"].get<std::string>() + " --repo " + kRepo +
                       " --json --compiler-version " + kPinned + " --optimum-neuron-version 0.4.5";
    if (q.contains("task")) args += " --task " + q["task"].get<std::string>();
    if (q.contains("instance_type"))
      args += " --instance-type " + q["instance_type"].get<std::string>();
    if (q.contains("batch_size")) args += " --batch-size " + q["batch_size"].dump();
    if (q.contains("sequence_length")) args += " --sequence-length " + q["sequence_length"].dump();
    if (q.contains("tensor_parallel_size"))
      args += " --tensor-parallel-size " + q["tensor_parallel_size"].dump();
    if (q.contains("dtype")) args += " --dtype " + q["dtype"].get<std::string>();
    ToolRun run = tool(args);
    ASSERT_EQ(run.code, 0) << args << "\n" << run.output;
    json ours = json::parse(run.output);
    std::set<std::vector<std::string>> our_rows, their_rows;
    auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    for (const auto& e : ours["entries"]) {
      our_rows.insert({text(e["batch_size"]), text(e["sequence_length"]),
                       text(e["tensor_parallel"]), text(e["dtype"]), text(e["instance_type"])});
    }
    for (const auto& r : answers[i]["rows"]) their_rows.insert(r.get<std::vector<std::string>>());
    rows_compared += their_rows.size();
    bool agree = our_rows == their_rows;
    disagreements += agree ? 0 : 1;
    report << (agree ? "  agree     " : "  DISAGREE  ") << args.substr(7) << ": "
           << their_rows.size() << " rows in optimum-neuron, " << our_rows.size()
           << " in neuron-cache (" << q["why"].get<std::string>() << ")\n";
  }
  std::cout << "registry parity, lookup (" << lookups.size() << " queries):\n" << report.str();
  EXPECT_EQ(disagreements, 0u) << report.str();
  EXPECT_GE(rows_compared, 15u) << "the queries must have rows to agree on";

  // The text table names the model an entry was made for.
  ToolRun text = tool(std::string("lookup acme/llama3-8b-support-ft --repo ") + kRepo +
                      " --task text-generation --optimum-neuron-version 0.4.5");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "same architecture as")) << text.output;
  EXPECT_TRUE(contains(text.output, "meta-llama/Meta-Llama-3-8B-Instruct")) << text.output;
  // The base model's entry made from its older config.json is counted, not listed.
  ToolRun base = tool(std::string("lookup meta-llama/Meta-Llama-3-8B --repo ") + kRepo +
                      " --task text-generation --optimum-neuron-version 0.4.5 --json");
  ASSERT_EQ(base.code, 0) << base.output;
  EXPECT_EQ(json::parse(base.output)["other_architecture_entries"], 1) << base.output;
}

TEST_F(RegistryParityTest, AShortCompilerVersionIsRefusedNamingTheFullOnes) {
  testing::write_file(work / "short.yaml", manifest_of(table["plans"], kPinned));
  ToolRun run = tool("plan '" + (work / "short.yaml").string() + "'");
  EXPECT_NE(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output,
                       "compiler_version 2.21.33363.0 is not a full neuronx-cc "
                       "version"))
      << run.output;
  EXPECT_TRUE(contains(run.output, "2.21.33363.0+82129205")) << run.output;
  EXPECT_FALSE(contains(run.output, "2.20.10.0")) << "only the versions it abbreviates";
}

}  // namespace
}  // namespace neuron_cache
