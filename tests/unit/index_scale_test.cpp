// The artifact index at the size of a busy shared cache: the test Hub holds 10,000
// configurations for each of 3 compiler versions (400 models x 25 configurations), two versions as
// format 2 shards and one as a format 1 file written by neuron-cache 0.1. A cold plan of 20
// configurations, a push of one configuration and concurrent pushes are measured in requests and
// bytes from the server's access log, never by the client's own account.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/transfer/push.h"
#include "stores.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace ai = artifact_index;
using nlohmann::json;

constexpr int kModels = 400;
constexpr int kConfigsPerModel = 25;
const std::vector<std::string> kVersions = {"2.21.33363.0+82129205", "2.20.1.0+ab12cd34",
                                            "2.19.8.0+0f0f0f0f"};
constexpr const char* kRepo = "acme/busy-cache";

std::string model(int m) {
  return "org-" + std::to_string(m) + "/model-" + std::to_string(m);
}

cache_key::KeyInputs inputs(int m, int c, const std::string& version) {
  return {model(m),
          "llama",
          "text-generation",
          "bf16",
          1 + c % 5,
          1024L << (c / 5),
          version,
          8,
          "trn1",
          {},
          std::string(40, 'a'),
          std::string("0.4.5"),
          std::nullopt};
}

ai::Entry entry(int m, int c, const std::string& version) {
  ai::Entry e;
  e.inputs = inputs(m, c, version);
  e.key = cache_key::key_of(e.inputs);
  e.configuration = "conf-" + std::to_string(c);
  for (const char* graph : {"ctx", "tkg"}) {
    std::string seed = e.key + graph;
    ai::ModuleRecord module{"MODULE_" + sha256_hex(seed).substr(0, 20) + "+d7517139", {}};
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

plan::Target target_of(const ai::Entry& e) {
  plan::Target t;
  t.inputs = e.inputs;
  t.key = e.key;
  t.configuration.name = e.configuration + "@" + e.inputs.model_id;
  t.configuration.model_id = e.inputs.model_id;
  return t;
}

hub::HubClient client_of(const testing::HubServer& server) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  return hub::HubClient(options);
}

// The Hub requests the client chose: a regular file's redirect hop is the Hub's doing.
size_t hub_requests(const json& log) {
  return testing::count_requests(
      log, [](const json& e) { return e["listener"] == "hub" && !testing::is_redirect_hop(e); });
}

class IndexScaleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::HubServer();
    hub::HubClient client = client_of(*server_);
    client.create_repo("busy-cache", "acme", false);
    testing::TempDir files;
    std::vector<hub::CommitOperation> operations;
    for (size_t v = 0; v < kVersions.size(); ++v) {
      ai::IndexFile legacy;
      legacy.format = ai::kLegacyFormat;
      for (int m = 0; m < kModels; ++m) {
        ai::IndexFile shard;
        shard.model_id = model(m);
        for (int c = 0; c < kConfigsPerModel; ++c) {
          ai::Entry e = entry(m, c, kVersions[v]);
          (v + 1 == kVersions.size() ? legacy : shard).entries.emplace(e.key, e);
        }
        if (shard.entries.empty()) continue;
        std::string path = ai::remote_shard_path(kVersions[v], model(m));
        testing::write_file(files / path, ai::serialize_index(shard));
        largest_shard_ = std::max(largest_shard_, std::filesystem::file_size(files / path));
        operations.push_back({hub::CommitOperation::Kind::Add, path, files / path});
      }
      if (legacy.entries.empty()) continue;
      std::string path = ai::remote_index_path(kVersions[v]);
      testing::write_file(files / path, ai::serialize_index(legacy));
      operations.push_back({hub::CommitOperation::Kind::Add, path, files / path});
    }
    client.commit(kRepo, operations, "a busy cache", std::nullopt);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static testing::HubServer* server_;
  static uint64_t largest_shard_;
};

testing::HubServer* IndexScaleTest::server_ = nullptr;
uint64_t IndexScaleTest::largest_shard_ = 0;

// 20 configurations of 3 models: the head, one paths-info, one download per shard.
TEST_F(IndexScaleTest, ColdPlanOfTwentyConfigurationsTakesFiveRequests) {
  std::vector<plan::Target> targets;
  for (int i = 0; i < 20; ++i) targets.push_back(target_of(entry(7 + i % 3, i, kVersions[0])));
  testing::TempDir cache;
  local::LocalCache local_cache(cache.path());
  local::LocalIndex local(local_cache);
  hub::HubClient client = client_of(*server_);
  server_->clear_log();
  auto start = std::chrono::steady_clock::now();
  auto index_store = testing::hub_store(client, kRepo);
  remote::RemoteIndex remote = remote::RemoteIndex::open(*index_store);
  plan::Plan plan = plan::make_plan(targets, local, &remote, "", {});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(plan.count(plan::Status::Store), 20u);
  json log = server_->access_log();
  EXPECT_LE(hub_requests(log), 5u) << log.dump(1);
  EXPECT_LT(seconds, 2.0) << "on loopback (a generous bound: it takes milliseconds)";
  std::printf("cold plan of 20 configurations: %zu Hub requests, %.3f s, largest shard %llu B\n",
              hub_requests(log), seconds, static_cast<unsigned long long>(largest_shard_));
}

// A miss looks for the nearest configuration in every compiler version, format 1 included.
TEST_F(IndexScaleTest, MissesAndFormatOneEntriesAreFoundAcrossVersions) {
  ai::Entry in_legacy = entry(11, 3, kVersions[2]);
  plan::Target missing = target_of(entry(11, 3, kVersions[0]));
  missing.inputs.batch_size = 64;
  missing.key = cache_key::key_of(missing.inputs);
  testing::TempDir cache;
  local::LocalCache local_cache(cache.path());
  local::LocalIndex local(local_cache);
  hub::HubClient client = client_of(*server_);
  auto index_store = testing::hub_store(client, kRepo);
  remote::RemoteIndex remote = remote::RemoteIndex::open(*index_store);
  plan::Plan plan = plan::make_plan({target_of(in_legacy), missing}, local, &remote, "", {});
  EXPECT_EQ(plan.rows[0].status, plan::Status::Store) << "format 1 entries are still read";
  ASSERT_EQ(plan.rows[1].status, plan::Status::Compile);
  ASSERT_FALSE(plan.rows[1].nearest.empty());
  EXPECT_TRUE(testing::contains(plan.rows[1].reason, "nearest")) << plan.rows[1].reason;
  EXPECT_TRUE(remote.problems().empty()) << remote.problems().front();
}

// Pushing one configuration rewrites one shard: what it sends does not grow with the repo.
TEST_F(IndexScaleTest, PushingOneConfigurationSendsOneSmallShard) {
  testing::TempDir cache;
  local::LocalCache local_cache(cache.path());
  local::LocalIndex local(local_cache);
  ai::Entry e;
  e.inputs = inputs(23, 99, kVersions[0]);
  e.key = cache_key::key_of(e.inputs);
  e.configuration = "new";
  std::string name = "MODULE_" + e.key.substr(0, 20) + "+d7517139";
  std::filesystem::path dir = cache / e.compiler_dir() / name;
  testing::write_file(dir / "model.neff", "neff bytes of the new configuration");
  testing::write_file(dir / "model.done", "");
  e.modules.push_back(local.record_module(e.compiler_dir(), name));
  e.tool = "test";
  e.created_at = ai::utc_now();
  local.write(e);
  hub::HubClient client = client_of(*server_);
  server_->clear_log();
  transfer::PushResult result = transfer::push(*testing::hub_store(client, kRepo), local, {e});
  ASSERT_EQ(result.pushed.size(), 1u);
  json log = server_->access_log();
  uint64_t sent = 0;
  for (const auto& request : log) sent += request["bytes_in"].get<uint64_t>();
  auto shard = client.read_file(kRepo, ai::remote_shard_path(kVersions[0], model(23)));
  ASSERT_TRUE(shard);
  EXPECT_LE(shard->size(), 64u << 10);
  EXPECT_EQ(ai::parse_index(*shard, "shard").entries.size(), kConfigsPerModel + 1u);
  // The commit carries the shard in base64 with the module files: well under 2 x 64 KB.
  EXPECT_LE(sent, 128u << 10) << log.dump(1);
  std::printf("push of one configuration: shard %zu B, %llu B sent in %zu requests\n",
              shard->size(), static_cast<unsigned long long>(sent), log.size());
}

// Two machines push a configuration of the same model at once: both entries end in the shard.
TEST_F(IndexScaleTest, ConcurrentPushesOfOneShardMerge) {
  testing::TempDir cache;
  local::LocalCache local_cache(cache.path());
  local::LocalIndex local(local_cache);
  std::vector<ai::Entry> entries;
  for (int c : {200, 201, 202, 203}) {
    ai::Entry e;
    e.inputs = inputs(31, c, kVersions[1]);
    e.key = cache_key::key_of(e.inputs);
    e.configuration = "racer-" + std::to_string(c);
    std::string name = "MODULE_" + e.key.substr(0, 20) + "+d7517139";
    testing::write_file(cache / e.compiler_dir() / name / "model.neff", e.key);
    testing::write_file(cache / e.compiler_dir() / name / "model.done", "");
    e.modules.push_back(local.record_module(e.compiler_dir(), name));
    e.tool = "test";
    e.created_at = ai::utc_now();
    local.write(e);
    entries.push_back(e);
  }
  transfer::PushOptions options;
  options.conflicts = {10, std::chrono::milliseconds(10), std::chrono::milliseconds(100)};
  std::vector<std::thread> racers;
  std::vector<int> attempts(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    racers.emplace_back([&, i] {
      hub::HubClient client = client_of(*server_);
      attempts[i] =
          transfer::push(*testing::hub_store(client, kRepo), local, {entries[i]}, options).attempts;
    });
  }
  for (auto& racer : racers) racer.join();
  hub::HubClient client = client_of(*server_);
  auto shard = client.read_file(kRepo, ai::remote_shard_path(kVersions[1], model(31)));
  ASSERT_TRUE(shard);
  ai::IndexFile merged = ai::parse_index(*shard, "shard");
  for (const auto& e : entries) EXPECT_TRUE(merged.entries.count(e.key)) << e.configuration;
  EXPECT_EQ(merged.entries.size(), kConfigsPerModel + entries.size());
  int total = 0;
  for (int a : attempts) total += a;
  std::printf("%zu concurrent pushes took %d attempts in all\n", entries.size(), total);
}

}  // namespace
}  // namespace neuron_cache
