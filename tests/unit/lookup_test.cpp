// Registry scans and `neuron-cache lookup` against repos seeded exactly as optimum-neuron writes
// them: the files come from tests/tools/optimum_registry_writer.py (CPython json/hashlib), never
// from neuron-cache's own writer.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "format/pyjson.h"
#include "hub/client.h"
#include "hub_fixture.h"
#include "remote/lookup.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::TempDir;
using testing::ToolRun;

constexpr const char* kRepo = "acme/optimum-like";
constexpr const char* kCompiler = "neuronxcc-2.21.33363.0+82129205";

// The files optimum-neuron writes for `entries` (see optimum_registry_writer.py), by repo path.
json optimum_written(const json& entries) {
  TempDir dir;
  testing::write_file(dir / "entries.json", entries.dump());
  std::string command = std::string(NEURON_CACHE_PYTHON) + " " + NEURON_CACHE_TESTS_DIR +
                        "/tools/optimum_registry_writer.py < '" + (dir / "entries.json").string() +
                        "'";
  std::string output;
  if (testing::run_command(command, &output) != 0) {
    throw std::runtime_error("optimum_registry_writer.py failed: " + output);
  }
  return json::parse(output);
}

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
  remote::RegistryScan one = remote::scan_registry(client, kRepo, "", {"org/model-a"});
  size_t one_downloads = downloads(server);
  server.clear_log();
  remote::RegistryScan three =
      remote::scan_registry(client, kRepo, "", {"org/model-a", "org/model-b", "org/model-c"});

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

  remote::RegistryScan narrowed = remote::scan_registry(client, kRepo, "2.15", {"org/model-a"});
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
  remote::RegistryScan scan = remote::scan_registry(client, kRepo, "2.21.33363.0", {"org/model-a"});
  const auto& hits = scan.hits["org/model-a"];
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].optimum_version, "0.4.5");
  EXPECT_EQ(hits[1].optimum_version, "0.4.6");
  EXPECT_EQ(hits[0].record.location.hash, hits[1].record.location.hash);
  EXPECT_TRUE(hits[0].record.hash_matches);
}

}  // namespace
}  // namespace neuron_cache
