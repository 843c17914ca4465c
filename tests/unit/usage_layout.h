// One store layout for the tests of `neuron-cache du` (remote/store_usage.h), written into every
// kind of store, and the exact numbers it must give: two compiler versions, three models whose
// entries reference shared and missing MODULE_ folders, entries of every age bucket, a MODULE_
// folder optimum-neuron synchronized (no index entry) with its registry files, a damaged shard
// and a lease file.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "index_samples.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/maintenance/store_usage.h"

namespace neuron_cache::testing {

inline constexpr const char* kUsageV1 = "2.21.33363.0+82129205";
inline constexpr const char* kUsageV2 = "2.22.1.0+0123abcd";
inline constexpr const char* kUsageNow = "2026-12-01T00:00:00Z";
inline constexpr const char* kUsageLease = "neuron-cache-leases/host-1.json";
inline constexpr const char* kUsageBrokenShard =
    "neuron-cache-index/neuronxcc-2.22.1.0+0123abcd/acme--broken.json";

struct UsageLayout {
  std::map<std::string, std::string> files;  // path in the store: content
  uint64_t index_bytes_v1 = 0;
  uint64_t index_bytes_v2 = 0;
};

inline int64_t usage_now() {
  return *parse_utc_timestamp(kUsageNow);
}

// A MODULE_ folder as libneuronxla writes it and optimum-neuron synchronizes it: 117 bytes
// besides the NEFF.
inline void add_usage_module(UsageLayout& layout, const std::string& version,
                             const std::string& module, size_t neff_bytes) {
  std::string dir = "neuronxcc-" + version + "/" + module + "/";
  layout.files[dir + "compile_flags.json"] = "[\"--target=trn1\"]";  // 17 bytes
  layout.files[dir + "model.hlo_module.pb"] = std::string(100, 'h');
  layout.files[dir + "model.neff"] = std::string(neff_bytes, 'n');
  layout.files[dir + "model.done"] = "";
}

inline artifact_index::Entry usage_entry(const std::string& model, const std::string& version,
                                         int64_t batch, const std::string& created_at,
                                         const std::vector<std::string>& modules) {
  cache_key::KeyInputs inputs = sample_key_inputs(model);
  inputs.compiler_version = version;
  inputs.batch_size = batch;
  artifact_index::Entry entry = sample_index_entry(inputs, "bs" + std::to_string(batch));
  entry.modules.clear();
  for (const auto& name : modules) {
    entry.modules.push_back(
        {name, {{"model.neff", 1, std::string(64, 'a')}, {"model.done", 0, std::string(64, 'b')}}});
  }
  entry.created_at = created_at;
  return entry;
}

// The shard of `model` at `version`; returns its size.
inline uint64_t add_usage_shard(UsageLayout& layout, const std::string& model,
                                const std::string& version,
                                const std::vector<artifact_index::Entry>& entries) {
  artifact_index::IndexFile shard;
  shard.model_id = model;
  for (const auto& entry : entries) shard.entries[entry.key] = entry;
  std::string text = artifact_index::serialize_index(shard);
  layout.files[artifact_index::remote_shard_path(version, model)] = text;
  return text.size();
}

// The layout with created_at times counted back from `now` (seconds since 1970).
inline UsageLayout usage_layout(int64_t now = usage_now()) {
  constexpr int64_t kHour = 3600, kDay = 86400;
  auto ago = [now](int64_t seconds) { return utc_text(now - seconds); };
  UsageLayout l;
  const std::string a = "MODULE_1001+e30acd3a", b = "MODULE_1002+e30acd3a",
                    c = "MODULE_1003+e30acd3a", d = "MODULE_2001+d7517139",
                    e = "MODULE_2002+d7517139", missing = "MODULE_2999+d7517139";
  // optimum-neuron's own: a NxD graph it synchronized, with its registry entry and alias.
  const std::string optimum = "MODULE_26254ca2c7a3ba18d3e1+39f12043";
  add_usage_module(l, kUsageV1, a, 1000);
  add_usage_module(l, kUsageV1, b, 2000);
  add_usage_module(l, kUsageV1, c, 3000);
  add_usage_module(l, kUsageV1, optimum, 5000);
  std::string registry = std::string("neuronxcc-") + kUsageV1 + "/0_REGISTRY/0.4.5/";
  l.files[registry + std::string(64, 'f') + "/0123456789abcdef0123.json"] = std::string(250, 'r');
  l.files[registry + "llama/acme/llama/0123456789abcdef0123.json"] = std::string(250, 'r');
  add_usage_module(l, kUsageV2, d, 4000);
  add_usage_module(l, kUsageV2, e, 6000);

  l.index_bytes_v1 +=
      add_usage_shard(l, "acme/llama", kUsageV1,
                      {usage_entry("acme/llama", kUsageV1, 1, ago(2 * kHour), {a}),
                       usage_entry("acme/llama", kUsageV1, 2, ago(3 * kDay), {a, b})});
  l.index_bytes_v1 +=
      add_usage_shard(l, "acme/mistral", kUsageV1,
                      {usage_entry("acme/mistral", kUsageV1, 1, ago(20 * kDay), {b, c})});
  l.index_bytes_v2 += add_usage_shard(
      l, "acme/llama", kUsageV2, {usage_entry("acme/llama", kUsageV2, 1, ago(60 * kDay), {d})});
  l.index_bytes_v2 +=
      add_usage_shard(l, "acme/bert", kUsageV2,
                      {usage_entry("acme/bert", kUsageV2, 1, "not a date", {e, missing}),
                       usage_entry("acme/bert", kUsageV2, 2, ago(200 * kDay), {e})});
  l.files[kUsageBrokenShard] = "{\"entries\": {\"x\": [";
  l.index_bytes_v2 += l.files[kUsageBrokenShard].size();
  l.files[kUsageLease] = std::string(40, 'l');
  return l;
}

inline const maintenance::VersionUsage* usage_version(const maintenance::StoreUsage& u,
                                                      const std::string& version) {
  for (const auto& v : u.versions)
    if (v.compiler_version == version) return &v;
  return nullptr;
}

// The exact numbers of usage_layout(), with `other_files` and `other_bytes` of top-level files a
// store adds of its own (a Hub repo's README).
inline void expect_layout_usage(const maintenance::StoreUsage& u, const UsageLayout& l,
                                uint64_t other_files = 0, uint64_t other_bytes = 0) {
  uint64_t index = l.index_bytes_v1 + l.index_bytes_v2;
  EXPECT_EQ(u.total.count, 32u + other_files);
  EXPECT_EQ(u.total.bytes, 11968u + 10234u + index + 40u + other_bytes);
  EXPECT_EQ(u.modules.count, 6u);
  EXPECT_EQ(u.modules.bytes, 21702u);
  EXPECT_EQ(u.unindexed.count, 1u);
  EXPECT_EQ(u.unindexed.bytes, 5117u);
  EXPECT_EQ(u.index.count, 5u);
  EXPECT_EQ(u.index.bytes, index);
  EXPECT_EQ(u.other.count, 1u + other_files);
  EXPECT_EQ(u.other.bytes, 40u + other_bytes);
  EXPECT_EQ(u.configurations, 6u);
  EXPECT_EQ(u.index_files_read, 4u);
  EXPECT_FALSE(u.saturated);
  ASSERT_EQ(u.problems.size(), 1u) << ::testing::PrintToString(u.problems);
  EXPECT_NE(u.problems[0].find("acme--broken.json"), std::string::npos) << u.problems[0];

  ASSERT_EQ(u.versions.size(), 2u);
  const maintenance::VersionUsage* v1 = usage_version(u, kUsageV1);
  const maintenance::VersionUsage* v2 = usage_version(u, kUsageV2);
  ASSERT_TRUE(v1 && v2);
  EXPECT_EQ(v1->files.count, 18u);
  EXPECT_EQ(v1->files.bytes, 11968u);
  EXPECT_EQ(v1->modules.count, 4u);
  EXPECT_EQ(v1->modules.bytes, 11468u);
  EXPECT_EQ(v1->registry.count, 2u);
  EXPECT_EQ(v1->registry.bytes, 500u);
  EXPECT_EQ(v1->other.count, 0u);
  EXPECT_EQ(v1->configurations, 3u);
  EXPECT_EQ(v1->index.count, 2u);
  EXPECT_EQ(v1->index.bytes, l.index_bytes_v1);
  EXPECT_EQ(v1->unindexed.count, 1u);
  EXPECT_EQ(v1->unindexed.bytes, 5117u);
  EXPECT_EQ(v2->files.count, 8u);
  EXPECT_EQ(v2->files.bytes, 10234u);
  EXPECT_EQ(v2->modules.count, 2u);
  EXPECT_EQ(v2->modules.bytes, 10234u);
  EXPECT_EQ(v2->registry.count, 0u);
  EXPECT_EQ(v2->configurations, 3u);
  EXPECT_EQ(v2->index.count, 3u);
  EXPECT_EQ(v2->index.bytes, l.index_bytes_v2);
  EXPECT_EQ(v2->unindexed.count, 0u);

  ASSERT_EQ(u.models.size(), 3u);
  EXPECT_EQ(u.models[0].name, "acme/llama");
  EXPECT_EQ(u.models[0].configurations, 3u);
  EXPECT_EQ(u.models[0].referenced.count, 3u);
  EXPECT_EQ(u.models[0].referenced.bytes, 7351u);
  EXPECT_EQ(u.models[0].missing_modules, 0u);
  EXPECT_EQ(u.models[1].name, "acme/bert");
  EXPECT_EQ(u.models[1].configurations, 2u);
  EXPECT_EQ(u.models[1].referenced.count, 1u);
  EXPECT_EQ(u.models[1].referenced.bytes, 6117u);
  EXPECT_EQ(u.models[1].missing_modules, 1u);
  EXPECT_EQ(u.models[2].name, "acme/mistral");
  EXPECT_EQ(u.models[2].configurations, 1u);
  EXPECT_EQ(u.models[2].referenced.count, 2u);
  EXPECT_EQ(u.models[2].referenced.bytes, 5234u);

  ASSERT_EQ(u.ages.size(), 6u);
  const std::vector<std::string> keys = {"1d", "7d", "30d", "90d", "older", "unknown"};
  const std::vector<uint64_t> folders = {1, 2, 2, 1, 1, 1};
  const std::vector<uint64_t> bytes = {1117, 3234, 5234, 4117, 6117, 6117};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(u.ages[i].key, keys[i]);
    EXPECT_EQ(u.ages[i].configurations, 1u) << keys[i];
    EXPECT_EQ(u.ages[i].referenced.count, folders[i]) << keys[i];
    EXPECT_EQ(u.ages[i].referenced.bytes, bytes[i]) << keys[i];
  }
}

}  // namespace neuron_cache::testing
