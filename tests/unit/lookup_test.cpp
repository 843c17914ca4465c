// Registry scans and `neuron-cache lookup` against repos seeded exactly as optimum-neuron writes
// them: the files come from tests/tools/optimum_registry_writer.py (CPython json/hashlib), never
// from neuron-cache's own writer.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hub_fixture.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/transformers/arch_digest.h"
#include "optimum_writer.h"
#include "stores.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::optimum_written;
using testing::TempDir;
using testing::ToolRun;

constexpr const char* kRepo = "acme/optimum-like";
constexpr const char* kCompiler = "neuronxcc-2.21.33363.0+82129205";

// The example config plus kRepo holding `files` (path -> text).
json config_with(const json& files) {
  json config = HubServer::example_config();
  config["repos"].push_back({{"id", kRepo}, {"private", false}, {"files", files}});
  return config;
}

json llama_config(int hidden_size = 16) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", hidden_size},
          {"model_type", "llama"},
          {"num_attention_heads", 4},
          {"rms_norm_eps", 1e-05},
          {"vocab_size", 128256}};
}

json decoder_neuron(const std::string& model_id, int batch_size, int sequence_length,
                    int tp_degree) {
  return {{"_serialized_key", "NxDNeuronConfig"},
          {"batch_size", batch_size},
          {"checkpoint_id", model_id},
          {"checkpoint_revision", std::string(40, '0')},
          {"capacity_factor", nullptr},
          {"neuronxcc_version", "2.21.33363.0+82129205"},
          {"sequence_length", sequence_length},
          {"target", "trn1"},
          {"torch_dtype", "bfloat16"},
          {"tp_degree", tp_degree}};
}

// A decoder entry as optimum-neuron >= 0.4.5 writes it (arch-digest file, alias when first).
json decoder_entry(const std::string& model_id, int batch_size, int sequence_length = 512,
                   const std::string& optimum_version = "0.4.5", int hidden_size = 16) {
  return {{"compiler_dir", kCompiler},
          {"optimum_version", optimum_version},
          {"generation", "0.4.5"},
          {"model_id", model_id},
          {"task", "text-generation"},
          {"model_type", "llama"},
          {"config", llama_config(hidden_size)},
          {"neuron", decoder_neuron(model_id, batch_size, sequence_length, 2)}};
}

hub::HubClient client_for(const HubServer& server) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubReadToken;
  return hub::HubClient(options);
}

size_t downloads(const HubServer& server) {
  return testing::count_requests(server.access_log(),
                                 [](const json& e) { return contains(e["path"], "/resolve/"); });
}

TEST(LookupScan, ManyModelsCostTheListingsOfOne) {
  json entries = json::array({
      decoder_entry("org/model-a", 1), decoder_entry("org/model-a", 4),  // second: no alias
      decoder_entry("org/model-b", 1, 512, "0.4.5", 32),
      decoder_entry("org/model-c", 8, 1024, "0.4.5", 64),
      decoder_entry("org/unrelated", 1, 512, "0.4.5", 128),  // another architecture
  });
  json files = optimum_written(entries);
  files["neuronxcc-2.15.128.0+56dc5a86/MODULE_1+d7cde3b5/model.done"] = "";
  files["README.md"] = "# cache\n";
  HubServer server(config_with(files), {"--page-size", "3"});
  hub::HubClient client = client_for(server);

  server.clear_log();
  remote::RegistryScan one =
      remote::scan_registry(*testing::hub_store(client, kRepo), "", {{"org/model-a", {}}});
  size_t one_downloads = downloads(server);
  server.clear_log();
  remote::RegistryScan three =
      remote::scan_registry(*testing::hub_store(client, kRepo), "",
                            {{"org/model-a", {}}, {"org/model-b", {}}, {"org/model-c", {}}});

  EXPECT_TRUE(one.has_registry);
  EXPECT_GT(one.listing_requests, 2u) << "paginated listings are counted";
  EXPECT_EQ(three.listing_requests, one.listing_requests);
  EXPECT_EQ(one_downloads, 2u) << "model-a's two entries, alias and primary downloaded once";
  EXPECT_EQ(downloads(server), 4u) << "only the candidate files of the three models";
  ASSERT_EQ(three.hits["org/model-a"].size(), 2u);
  EXPECT_EQ(three.hits["org/model-a"][0].row.batch_size, 1);
  EXPECT_EQ(three.hits["org/model-a"][1].row.batch_size, 4);
  ASSERT_EQ(three.hits["org/model-b"].size(), 1u);
  ASSERT_EQ(three.hits["org/model-c"].size(), 1u);
  EXPECT_EQ(three.hits["org/model-c"][0].row.sequence_length, 1024);
  EXPECT_EQ(three.hits["org/model-c"][0].compiler_dir, kCompiler);
  EXPECT_EQ(three.hits["org/model-c"][0].optimum_version, "0.4.5");
  EXPECT_EQ(three.hits["org/model-c"][0].record.model_id, "org/model-c");
  EXPECT_EQ(three.hits.count("org/unrelated"), 0u);
  EXPECT_TRUE(three.problems.empty());
  EXPECT_EQ(three.compiler_dirs.size(), 2u);

  remote::RegistryScan narrowed =
      remote::scan_registry(*testing::hub_store(client, kRepo), "2.15", {{"org/model-a", {}}});
  EXPECT_FALSE(narrowed.has_registry) << "the 2.15 folder has MODULE folders but no registry";
  EXPECT_TRUE(narrowed.hits["org/model-a"].empty());
}

TEST(LookupScan, TheSameBytesUnderTwoVersionsAreTwoEntries) {
  json entries = json::array({decoder_entry("org/model-a", 1, 512, "0.4.5"),
                              decoder_entry("org/model-a", 1, 512, "0.4.6")});
  json files = optimum_written(entries);
  ASSERT_EQ(files.size(), 4u) << files.dump(2);
  HubServer server(config_with(files));
  hub::HubClient client = client_for(server);
  remote::RegistryScan scan = remote::scan_registry(*testing::hub_store(client, kRepo),
                                                    "2.21.33363.0", {{"org/model-a", {}}});
  const auto& hits = scan.hits["org/model-a"];
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].optimum_version, "0.4.5");
  EXPECT_EQ(hits[1].optimum_version, "0.4.6");
  EXPECT_EQ(hits[0].record.location.hash, hits[1].record.location.hash);
  EXPECT_TRUE(hits[0].record.hash_matches);
}

// optimum-neuron 0.0.19-0.1.x: compact text with the neuron part inside, under a mode folder.
json legacy_entry(const std::string& mode, const json& neuron) {
  return {{"compiler_dir", "neuronxcc-2.12.68.0+4480452af"},
          {"optimum_version", "0.1.0"},
          {"generation", "0.1"},
          {"mode", mode},
          {"model_id", "org/model-a"},
          {"task", "text-generation"},
          {"model_type", "llama"},
          {"config", {{"model_type", "llama"}, {"hidden_size", 16}}},
          {"neuron", neuron}};
}

// A repo as optimum-neuron leaves it after several releases: 0.4.5 arch folder + alias and a
// second entry without alias, the same bytes again under 0.4.6, and a 0.1.0 inference and
// training entry under their mode folders.
json public_like_files() {
  json legacy_inference = {{"task", "text-generation"},
                           {"batch_size", 1},
                           {"num_cores", "2"},  // numeric text, as some legacy entries have
                           {"auto_cast_type", "fp16"},
                           {"sequence_length", 1024},
                           {"compiler_type", "neuronx-cc"},
                           {"compiler_version", "2.12.68.0"},
                           {"checkpoint_id", "org/model-a"},
                           {"checkpoint_revision", "abc123"}};
  json legacy_training = {{"compiler_type", "neuronx-cc"},
                          {"compiler_version", "2.12.68.0"},
                          {"tensor_parallel_size", 8},
                          {"auto_cast_type", "bf16"}};
  return optimum_written(json::array(
      {decoder_entry("org/model-a", 1, 512, "0.4.5"), decoder_entry("org/model-a", 4, 512, "0.4.5"),
       decoder_entry("org/model-a", 1, 512, "0.4.6"), legacy_entry("inference", legacy_inference),
       legacy_entry("training", legacy_training)}));
}

class LookupCliTest : public ::testing::Test {
 protected:
  LookupCliTest() : server(config_with(public_like_files()), {"--page-size", "4"}) {}

  ToolRun tool(const std::string& args) {
    std::string command = std::string(testing::kCleanEnv) +
                          " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
                          home.path().string() + "' HF_ENDPOINT=" + server.url() +
                          " HF_TOKEN=" + testing::kHubReadToken + " " + testing::tool_path() +
                          " lookup org/model-a --repo " + kRepo + " " + args + " 2>&1";
    ToolRun run{};
    run.code = testing::run_command(command, &run.output);
    return run;
  }

  json rows(const std::string& args) {
    ToolRun run = tool("--json " + args);
    EXPECT_EQ(run.code, 0) << run.output;
    return json::parse(run.output)["entries"];
  }

  HubServer server;
  TempDir home;
};

TEST_F(LookupCliTest, ListsInferenceEntriesOfEveryVersionWithTypedValues) {
  ToolRun run = tool("--json");
  ASSERT_EQ(run.code, 0) << run.output;
  json result = json::parse(run.output);
  EXPECT_EQ(result["other_mode_entries"], 1) << "the training entry is counted, not listed";
  const json& rows = result["entries"];
  ASSERT_EQ(rows.size(), 4u) << run.output;
  EXPECT_EQ(rows[0]["optimum_neuron_version"], "0.4.5");
  EXPECT_EQ(rows[1]["optimum_neuron_version"], "0.4.6") << "same bytes, listed under both";
  EXPECT_EQ(rows[0]["batch_size"], 1);
  EXPECT_EQ(rows[1]["batch_size"], 1);
  auto file_name = [](const json& row) {
    std::string path = row["path"].get<std::string>();
    return path.substr(path.rfind('/') + 1);
  };
  EXPECT_EQ(file_name(rows[0]), file_name(rows[1]));
  EXPECT_NE(rows[0]["path"], rows[1]["path"]);
  EXPECT_EQ(rows[2]["optimum_neuron_version"], "0.1.0");
  EXPECT_EQ(rows[2]["sequence_length"], 1024);
  EXPECT_EQ(rows[2]["tensor_parallel"], 2) << "\"2\" in the legacy text";
  EXPECT_EQ(rows[2]["dtype"], "float16");
  EXPECT_TRUE(rows[2]["instance_type"].is_null()) << rows[2].dump();
  EXPECT_EQ(rows[2]["checkpoint_revision"], "abc123");
  EXPECT_EQ(rows[3]["batch_size"], 4);
  EXPECT_EQ(rows[3]["instance_type"], "trn1");
  for (const auto& row : rows) {
    EXPECT_EQ(row["mode"], "inference");
    EXPECT_EQ(row["task"], "text-generation");
    EXPECT_EQ(row["tensor_parallel"], 2);
  }

  ToolRun text = tool("");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "compiler version       optimum-neuron  checkpoint revision"))
      << text.output;
  EXPECT_TRUE(contains(text.output, "0.4.6")) << text.output;
  EXPECT_TRUE(contains(text.output, "1 more entries of another mode: pass --mode training"))
      << text.output;
}

TEST_F(LookupCliTest, FiltersByOptimumNeuronVersion) {
  json v046 = rows("--optimum-neuron-version 0.4.6");
  ASSERT_EQ(v046.size(), 1u);
  EXPECT_EQ(v046[0]["optimum_neuron_version"], "0.4.6");
  EXPECT_EQ(rows("--optimum_neuron_version 0.4.5").size(), 2u);
  EXPECT_EQ(rows("--optimum-neuron-version 0.4").size(), 0u) << "exact match, not a prefix";
  EXPECT_EQ(rows("--optimum-neuron-version 0.4.5 --batch-size 4").size(), 1u);
}

TEST_F(LookupCliTest, TrainingEntriesOnlyWithTheirMode) {
  json training = rows("--mode training");
  ASSERT_EQ(training.size(), 1u);
  EXPECT_EQ(training[0]["mode"], "training");
  EXPECT_EQ(training[0]["tensor_parallel"], 8);
  EXPECT_EQ(training[0]["dtype"], "bfloat16");
  EXPECT_EQ(training[0]["compiler_version"], "2.12.68.0");
  EXPECT_TRUE(training[0]["batch_size"].is_null());
  EXPECT_TRUE(training[0]["sequence_length"].is_null());
  EXPECT_TRUE(training[0]["task"].is_null());
  EXPECT_TRUE(contains(training[0]["path"], "/0_REGISTRY/0.1.0/training/llama/org/model-a/"));

  ToolRun text = tool("--mode training");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "tensor parallel")) << text.output;
  EXPECT_FALSE(contains(text.output, "batch size")) << "not a training column: " << text.output;

  EXPECT_EQ(rows("--mode all").size(), 5u);
  ToolRun all = tool("--mode all");
  EXPECT_TRUE(contains(all.output, "mode       task")) << all.output;
  EXPECT_TRUE(contains(all.output, "training")) << all.output;
  EXPECT_EQ(tool("--mode serving").code, 2);
}

// A model type neuron-cache's transformers tables lack, in a registry of 300 digest folders of
// other architectures: one entry of each folder is read to compare stored configs, then every
// entry of the folder that matches, alias-less ones included; the rest are never downloaded.
TEST(LookupScan, AnUnknownModelTypeIsFoundByStoredConfigAtOneReadPerFolder) {
  json entries = json::array();
  for (int i = 0; i < 300; ++i) {
    entries.push_back(decoder_entry("org/other-" + std::to_string(i), 1, 512, "0.4.5", 64 + i));
  }
  json unknown = {{"model_type", "brand_new"},
                  {"hidden_size", 96},
                  {"layers", {1, 2}},
                  {"added_by_transformers", true},
                  {"dtype", "bfloat16"}};
  for (int batch : {1, 4}) {
    json entry = decoder_entry("org/brand-new-7b", batch);
    entry["model_type"] = "brand_new";
    entry["config"] = unknown;
    entry["alias"] = batch == 1;  // the second: no alias on that machine
    entries.push_back(entry);
  }
  HubServer server(config_with(optimum_written(entries)));
  hub::HubClient client = client_for(server);
  remote::TaskArchitecture architecture = remote::architecture_of(json{{"model_type", "brand_new"},
                                                                       {"hidden_size", 96},
                                                                       {"layers", {1, 2}},
                                                                       {"torch_dtype", "bfloat16"},
                                                                       {"_name_or_path", "x"}},
                                                                  "text-generation");
  ASSERT_TRUE(architecture.digests.empty());
  ASSERT_TRUE(architecture.config_json.has_value());
  EXPECT_TRUE(contains(architecture.note, "brand_new")) << architecture.note;

  server.clear_log();
  remote::RegistryScan scan =
      remote::scan_registry(*testing::hub_store(client, kRepo), "",
                            {{"org/brand-new-7b", {{"text-generation", architecture}}}});
  ASSERT_TRUE(scan.complete);
  std::set<json> batches;
  for (const auto& hit : scan.hits["org/brand-new-7b"]) batches.insert(hit.row.batch_size);
  EXPECT_EQ(batches, (std::set<json>{1, 4}));
  EXPECT_EQ(scan.compared_folders, 301u);   // one entry of each folder, the model's among them
  EXPECT_EQ(downloads(server), 301u + 2u);  // then the model's two entries
}

TEST(StoredConfig, MatchesWhatTransformersAddsNotWhatItChanges) {
  using transformers::stored_config_matches;
  json file = {{"model_type", "x"},
               {"hidden_size", 8},
               {"rope_scaling", {{"factor", 2}}},
               {"torch_dtype", "bfloat16"},
               {"tie_word_embeddings", true}};
  json stored = {{"model_type", "x"},
                 {"hidden_size", 8},
                 {"head_dim", 2},
                 {"dtype", "bfloat16"},
                 {"rope_scaling", {{"factor", 2.0}, {"rope_type", "linear"}}}};
  EXPECT_TRUE(stored_config_matches(file, stored, "text-generation"));
  json changed = stored;
  changed["hidden_size"] = 16;
  EXPECT_FALSE(stored_config_matches(file, changed, "text-generation"));
  json other_type = stored;
  other_type["model_type"] = "y";
  EXPECT_FALSE(stored_config_matches(file, other_type, "text-generation"));
  json dropped = stored;
  dropped["rope_scaling"].erase("factor");
  EXPECT_FALSE(stored_config_matches(file, dropped, "text-generation"));
  json vlm = {{"model_type", "vlm"}, {"text_config", file}, {"vision_config", {{"a", 1}}}};
  EXPECT_TRUE(stored_config_matches(vlm, stored, "text-generation"));
  EXPECT_FALSE(stored_config_matches(vlm, stored, "feature-extraction"));
}

}  // namespace
}  // namespace neuron_cache
