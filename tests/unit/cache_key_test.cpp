// Cache keys and the artifact index: the key is what CPython computes from the documented
// inputs, every factor changes it, and index files from the Hub can never name a path outside
// their compiler folder.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "index_samples.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/plan/plan.h"
#include "neuron_cache/plan/targets.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace ai = artifact_index;
using cache_key::KeyInputs;

KeyInputs sample() {
  return testing::sample_key_inputs("meta-llama/Llama-3.1-8B");
}

std::string python_key(const KeyInputs& in) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "inputs.json", cache_key::to_json(in).dump());
  std::string output;
  std::string command =
      std::string(NEURON_CACHE_PYTHON) +
      " -c 'import hashlib,json,sys; d=json.load(open(sys.argv[1])); "
      "print(hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:32])' " +
      (dir.path() / "inputs.json").string();
  EXPECT_EQ(testing::run_command(command, &output), 0) << output;
  while (!output.empty() && output.back() == '\n') output.pop_back();
  return output;
}

TEST(CacheKey, IsWhatCPythonComputesFromTheDocumentedInputs) {
  KeyInputs in = sample();
  EXPECT_EQ(cache_key::key_of(in), python_key(in));
  in.model_id = "org/mod\u00e8le \"quoted\"";
  in.flags = {"--x='a b'", "\\", "\u2603"};
  in.checkpoint_revision.reset();
  in.optimum_neuron_version.reset();
  EXPECT_EQ(cache_key::key_of(in), python_key(in));
  EXPECT_EQ(cache_key::key_of(in).size(), 32u);
}

TEST(CacheKey, IsStableAcrossReleases) {
  // Pinned: a change here orphans every cached configuration. Bump key_format instead.
  EXPECT_EQ(cache_key::key_of(sample()), "4d9bc1fb75e1c7388f0cda204acf6950");
  EXPECT_EQ(
      pyjson::dumps(cache_key::to_json(sample())),
      "{\"compiler\": {\"flags\": [\"--optlevel=2\", \"--enable-fast-loading-neuron-binaries\"], "
      "\"num_cores\": 8, \"target\": \"trn1\", \"version\": \"2.21.33363.0+82129205\"}, "
      "\"environment\": {\"checkpoint_revision\": \"9ab9e76e2b09f9f29ea2d56aa5bd139e4445c59e\", "
      "\"optimum_neuron_version\": \"0.4.5\"}, \"key_format\": 1, \"model\": {\"batch_size\": 4, "
      "\"model_id\": \"meta-llama/Llama-3.1-8B\", \"model_type\": \"llama\", \"precision\": "
      "\"bf16\", \"sequence_length\": 4096, \"task\": \"text-generation\"}}");
}

TEST(CacheKey, EveryFactorChangesTheKey) {
  const std::string base = cache_key::key_of(sample());
  std::vector<std::function<void(KeyInputs&)>> changes = {
      [](KeyInputs& in) { in.model_id += "-Instruct"; },
      [](KeyInputs& in) { in.model_type = "mistral"; },
      [](KeyInputs& in) { in.task = "feature-extraction"; },
      [](KeyInputs& in) { in.precision = "fp16"; },
      [](KeyInputs& in) { in.batch_size = 8; },
      [](KeyInputs& in) { in.sequence_length = 8192; },
      [](KeyInputs& in) { in.compiler_version = "2.22.0.0+aaaa"; },
      [](KeyInputs& in) { in.num_cores = 16; },
      [](KeyInputs& in) { in.target = "trn2"; },
      [](KeyInputs& in) { in.flags.push_back("-O3"); },
      [](KeyInputs& in) { std::swap(in.flags[0], in.flags[1]); },
      [](KeyInputs& in) { in.checkpoint_revision = std::string(40, 'a'); },
      [](KeyInputs& in) { in.checkpoint_revision.reset(); },
      [](KeyInputs& in) { in.optimum_neuron_version = "0.4.6"; },
  };
  std::set<std::string> keys{base};
  for (const auto& change : changes) {
    KeyInputs in = sample();
    change(in);
    keys.insert(cache_key::key_of(in));
    EXPECT_EQ(cache_key::differences(sample(), in).size(), 1u);
  }
  EXPECT_EQ(keys.size(), changes.size() + 1);
}

TEST(CacheKey, InputsRoundTripAndBadInputsAreErrors) {
  KeyInputs in = sample();
  KeyInputs back = cache_key::from_json(cache_key::to_json(in));
  EXPECT_EQ(cache_key::key_of(back), cache_key::key_of(in));
  auto json = cache_key::to_json(in);
  json["model"].erase("batch_size");
  EXPECT_THROW(cache_key::from_json(json), Error);
  json = cache_key::to_json(in);
  json["key_format"] = 2;
  EXPECT_THROW(cache_key::from_json(json), Error);
}

TEST(CacheKey, TargetFollowsOptimumNeuronNormalisation) {
  EXPECT_EQ(cache_key::target_of("trn2"), "trn2");
  EXPECT_EQ(cache_key::target_of("trn1"), "trn1");
  EXPECT_EQ(cache_key::target_of("trn1n"), "trn1");
  EXPECT_EQ(cache_key::target_of("inf2"), "trn1");
}

TEST(CacheKey, NeuronCcFlagsLoseOnlyTheCacheOptions) {
  EXPECT_EQ(
      plan::flag_words("  -O2 --cache_dir=/x --no_cache --retry_failed_compilation "
                       "--model-type=transformer --cache_dir /y --no-cache\t--auto-cast=none"),
      (std::vector<std::string>{"-O2", "--model-type=transformer", "--auto-cast=none"}));
  EXPECT_TRUE(plan::flag_words("").empty());
}

TEST(CacheKey, MissesAreExplainedByTheirDifferences) {
  KeyInputs want = sample();
  want.sequence_length = 8192;
  want.compiler_version = "2.22.1.0+abc";
  EXPECT_EQ(plan::explain_difference(cache_key::differences(sample(), want)),
            "cached for compiler 2.21.33363.0+82129205 and sequence length 4096; you asked for "
            "2.22.1.0+abc and 8192");
}

KeyInputs sample_profile() {
  return cache_key::profile_inputs("llama-train", "2.21.33363.0+82129205",
                                   {"--optlevel=2", "--enable-saturate-infinity"});
}

TEST(CacheKey, AProfileIsKeyedOnItsNameCompilerAndFlagsOnly) {
  KeyInputs in = sample_profile();
  EXPECT_EQ(pyjson::dumps(cache_key::to_json(in)),
            "{\"compiler\": {\"flags\": [\"--optlevel=2\", \"--enable-saturate-infinity\"], "
            "\"version\": \"2.21.33363.0+82129205\"}, \"key_format\": 1, \"profile\": "
            "\"llama-train\"}");
  EXPECT_EQ(cache_key::key_of(in), python_key(in));
  KeyInputs back = cache_key::from_json(cache_key::to_json(in));
  EXPECT_EQ(back.profile, in.profile);
  EXPECT_EQ(cache_key::key_of(back), cache_key::key_of(in));
  EXPECT_EQ(cache_key::key_of(cache_key::from_json(cache_key::to_json(sample()))),
            "4d9bc1fb75e1c7388f0cda204acf6950")
      << "a model's inputs still read as before";
  std::set<std::string> keys{cache_key::key_of(in), cache_key::key_of(sample())};
  for (const auto& change : std::vector<std::function<void(KeyInputs&)>>{
           [](KeyInputs& p) { p.profile = "llama-train2"; },
           [](KeyInputs& p) { p.compiler_version = "2.22.0.0+aaaa"; },
           [](KeyInputs& p) { p.flags.pop_back(); },
       }) {
    KeyInputs changed = sample_profile();
    change(changed);
    keys.insert(cache_key::key_of(changed));
  }
  EXPECT_EQ(keys.size(), 5u);
  EXPECT_TRUE(cache_key::same_owner(in, sample_profile()));
  EXPECT_FALSE(cache_key::same_owner(in, sample()));
  EXPECT_EQ(cache_key::owner_of(in), "profile llama-train");
}

TEST(CacheKey, ProfileNamesAreCheckedWhereverTheyComeFrom) {
  for (const std::string& good :
       std::vector<std::string>{"llama-train", "a", "7b.v2_final", std::string(100, 'x')}) {
    EXPECT_FALSE(cache_key::profile_name_problem(good)) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "-x", ".hidden", "_x", "a/b", "../x", "a b", "x:y",
                                "\u00e9t\u00e9", std::string(101, 'x'), std::string("a\0b", 3)}) {
    EXPECT_TRUE(cache_key::profile_name_problem(bad)) << bad;
    auto json = cache_key::to_json(sample_profile());
    json["profile"] = bad;
    EXPECT_THROW(cache_key::from_json(json), Error) << bad;
  }
  auto json = cache_key::to_json(sample_profile());
  json["compiler"].erase("flags");
  EXPECT_THROW(cache_key::from_json(json), Error);
  json = cache_key::to_json(sample_profile());
  json["profile"] = 7;
  EXPECT_THROW(cache_key::from_json(json), Error);
}

ai::Entry sample_entry() {
  return testing::sample_index_entry(sample(), "llama-bs4");
}

TEST(ArtifactIndex, EntriesAndIndexFilesRoundTrip) {
  ai::Entry entry = sample_entry();
  ai::Entry back = ai::parse_entry(ai::serialize_entry(entry), "test");
  EXPECT_EQ(ai::serialize_entry(back), ai::serialize_entry(entry));
  EXPECT_EQ(back.total_bytes(), 133u);
  ai::IndexFile index;
  index.model_id = entry.inputs.model_id;
  index.entries.emplace(entry.key, entry);
  EXPECT_EQ(ai::serialize_index(ai::parse_index(ai::serialize_index(index), "test")),
            ai::serialize_index(index));
  index.format = ai::kLegacyFormat;
  EXPECT_EQ(ai::serialize_index(ai::parse_index(ai::serialize_index(index), "test")),
            ai::serialize_index(index));
  EXPECT_EQ(ai::remote_shard_path("2.21.1+ab", "meta-llama/Llama-3.1-8B"),
            "neuron-cache-index/neuronxcc-2.21.1+ab/meta-llama--Llama-3.1-8B.json");
  for (const std::string& odd :
       std::vector<std::string>{"../../etc", "a/b/c", "/abs/path", "a--b/c", std::string(300, 'x'),
                                std::string("x\0y", 3), "a/.hidden", "-flag", ""}) {
    std::string slug = ai::model_slug(odd);
    EXPECT_TRUE(slug.starts_with("model-") && slug.size() == 38) << odd << " -> " << slug;
  }
  EXPECT_EQ(ai::remote_index_path("2.21.1+ab"), "neuron-cache-index/neuronxcc-2.21.1+ab.json");
  EXPECT_EQ(ai::compiler_version_of_index("neuron-cache-index/neuronxcc-2.21.1+ab.json"),
            "2.21.1+ab");
  EXPECT_EQ(ai::compiler_version_of_index("neuron-cache-index/neuronxcc-2.21.1+ab/org--m.json"),
            "2.21.1+ab");
  EXPECT_FALSE(ai::compiler_version_of_index("neuron-cache-index/x/neuronxcc-2.json"));
  EXPECT_FALSE(ai::compiler_version_of_index("neuron-cache-index/neuronxcc-2.21.1+ab.txt"));
  EXPECT_FALSE(ai::compiler_version_of_index("neuron-cache-indexes/neuronxcc-2.21.json"));
  EXPECT_EQ(lease::compiler_version_of_lease("neuron-cache-leases/neuronxcc-2.21/k.json"), "2.21");
  EXPECT_FALSE(lease::compiler_version_of_lease("neuron-cache-index/neuronxcc-2.21/k.json"));
  EXPECT_FALSE(ai::compiler_version_of_index("neuronxcc-2.21/0_REGISTRY/x.json"));
}

TEST(ArtifactIndex, UnsafeOrInconsistentEntriesAreRejected) {
  auto rejects = [](const std::function<void(ai::Entry&)>& change) {
    ai::Entry entry = sample_entry();
    change(entry);
    EXPECT_THROW(ai::parse_entry(ai::serialize_entry(entry), "hub"), Error);
  };
  rejects([](ai::Entry& e) { e.modules[0].name = "../../../../tmp/evil"; });
  rejects([](ai::Entry& e) { e.modules[0].name = "MODULE_x/../../y"; });
  rejects([](ai::Entry& e) { e.modules[0].name = "notamodule"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].name = "../x"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].name = "/etc/passwd"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].name = "a//b"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].name = "model.hlo_module.pb.lock"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].sha256 = "xyz"; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].size = UINT64_MAX; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].size = (1ull << 40) + 1; });
  rejects([](ai::Entry& e) { e.modules[0].files[0].name = std::string(256, 'a'); });
  rejects(
      [](ai::Entry& e) { e.modules[0].name = "MODULE_" + std::string(300, '1') + "+d7cde3b5"; });
  rejects([](ai::Entry& e) { e.modules.resize(10001, e.modules[0]); });
  rejects([](ai::Entry& e) { e.registry[0].name = "../0_REGISTRY/x.json"; });
  rejects([](ai::Entry& e) { e.registry[0].name = "MODULE_a/x.json"; });
  rejects([](ai::Entry& e) { e.key = std::string(32, '0'); });
  rejects([](ai::Entry& e) {
    e.inputs.compiler_version = "../../x";
    e.key = cache_key::key_of(e.inputs);
  });
  EXPECT_THROW(ai::parse_index("{\"format\": 3, \"entries\": {}}", "hub"), Error);
  EXPECT_THROW(ai::parse_index("{\"format\": 2, \"entries\": {}}", "hub"), Error)
      << "a shard names its model";
  EXPECT_THROW(ai::parse_index("not json", "hub"), Error);
}

TEST(ArtifactIndex, OneBadEntryNeitherHidesNorLosesTheOthers) {
  ai::Entry good = sample_entry();
  ai::IndexFile index;
  index.model_id = good.inputs.model_id;
  index.entries.emplace(good.key, good);
  pyjson::Json json = pyjson::parse(ai::serialize_index(index));
  json["entries"]["f00d"] = {{"key", "f00d"}, {"written_by", "a newer neuron-cache"}};
  ai::IndexFile read = ai::parse_index(pyjson::dumps(json, 2), "hub");
  EXPECT_EQ(read.entries.size(), 1u);
  ASSERT_EQ(read.problems.size(), 1u);
  EXPECT_TRUE(testing::contains(read.problems[0], "f00d"));
  // A writer adding its own entry keeps the one it could not read.
  ai::Entry other = sample_entry();
  other.inputs.batch_size = 16;
  other.key = cache_key::key_of(other.inputs);
  read.entries.emplace(other.key, other);
  pyjson::Json written = pyjson::parse(ai::serialize_index(read));
  EXPECT_EQ(written["entries"].size(), 3u);
  EXPECT_EQ(written["entries"]["f00d"]["written_by"], "a newer neuron-cache");
}

ai::Entry profile_entry(const std::vector<std::string>& modules) {
  ai::Entry entry;
  entry.inputs = sample_profile();
  entry.key = cache_key::key_of(entry.inputs);
  entry.configuration = "llama-train";
  for (const auto& name : modules) {
    entry.modules.push_back(
        {name, {{"model.done", 0, sha256_hex("")}, {"model.neff", 10, std::string(64, 'a')}}});
  }
  entry.tool = "neuron-cache 0.1.0";
  entry.created_at = "2026-12-01T12:00:00Z";
  return entry;
}

TEST(ArtifactIndex, AProfileHasItsOwnShardThatNoModelCanClaim) {
  EXPECT_EQ(ai::remote_profile_shard_path("2.21.1+ab", "llama-train"),
            "neuron-cache-index/neuronxcc-2.21.1+ab/profiles/llama-train.json");
  KeyInputs profile = sample_profile();
  EXPECT_EQ(ai::remote_shard_path(profile),
            "neuron-cache-index/neuronxcc-2.21.33363.0+82129205/profiles/llama-train.json");
  EXPECT_EQ(ai::remote_shard_path(sample()),
            ai::remote_shard_path(sample().compiler_version, sample().model_id));
  // Model slugs never hold '/': not a model named "profiles/llama-train", nor an org "profile"
  // or "profiles", nor odd names, reach a profile's shard.
  for (const std::string& model : std::vector<std::string>{
           "profiles/llama-train", "profile/llama-train", "profiles", "profiles--llama-train",
           "profiles/llama-train.json", "a/profiles/llama-train"}) {
    std::string path = ai::remote_shard_path("2.21.33363.0+82129205", model);
    EXPECT_NE(path, ai::remote_shard_path(profile)) << model;
    EXPECT_EQ(path.find("/profiles/"), std::string::npos) << model << " -> " << path;
  }

  ai::Entry entry = profile_entry({"MODULE_9993940051196728623+3cc9a3cb"});
  ai::IndexFile shard = ai::shard_for(entry.inputs);
  shard.entries.emplace(entry.key, entry);
  std::string text = ai::serialize_index(shard);
  EXPECT_TRUE(testing::contains(text, "\"profile\": \"llama-train\"")) << text;
  EXPECT_FALSE(testing::contains(text, "model_id")) << text;
  ai::IndexFile back = ai::parse_index(text, "hub");
  EXPECT_EQ(back.profile, "llama-train");
  EXPECT_EQ(back.entries.size(), 1u);
  EXPECT_TRUE(ai::is_shard_for(back, entry.inputs));
  EXPECT_FALSE(ai::is_shard_for(back, sample()));
  EXPECT_EQ(ai::serialize_index(back), text);

  // An entry in the wrong kind of shard is set aside, never used.
  ai::IndexFile model_shard;
  model_shard.model_id = sample().model_id;
  model_shard.entries.emplace(entry.key, entry);
  EXPECT_EQ(ai::parse_index(ai::serialize_index(model_shard), "hub").entries.size(), 0u);
  ai::IndexFile other = ai::shard_for(cache_key::profile_inputs("other", "2.21.1+ab", {}));
  other.entries.emplace(entry.key, entry);
  EXPECT_EQ(ai::parse_index(ai::serialize_index(other), "hub").entries.size(), 0u);
  ai::IndexFile legacy;
  legacy.format = ai::kLegacyFormat;
  legacy.entries.emplace(entry.key, entry);
  EXPECT_EQ(ai::parse_index(ai::serialize_index(legacy), "hub").entries.size(), 0u);
  EXPECT_THROW(ai::parse_index(R"({"format": 2, "profile": "../x", "entries": {}})", "hub"), Error);
}

TEST(ArtifactIndex, AGrownEntryIsTheUnionAndIsNotCoveredByTheOldOne) {
  ai::Entry hub = profile_entry({"MODULE_1+3cc9a3cb", "MODULE_2+3cc9a3cb"});
  ai::Entry local = profile_entry({"MODULE_2+3cc9a3cb", "MODULE_3+3cc9a3cb"});
  EXPECT_FALSE(ai::covers(hub, local));
  EXPECT_TRUE(ai::covers(hub, profile_entry({"MODULE_1+3cc9a3cb"})));
  EXPECT_TRUE(ai::covers(hub, hub));
  ai::Entry all = ai::merged(local, hub);
  std::vector<std::string> names;
  for (const auto& module : all.modules) names.push_back(module.name);
  EXPECT_EQ(names, (std::vector<std::string>{"MODULE_1+3cc9a3cb", "MODULE_2+3cc9a3cb",
                                             "MODULE_3+3cc9a3cb"}));
  EXPECT_TRUE(ai::covers(all, local));
  EXPECT_TRUE(ai::covers(all, hub));
  EXPECT_EQ(ai::parse_entry(ai::serialize_entry(all), "test").modules.size(), 3u);
  EXPECT_NE(ai::contents_id(hub), ai::contents_id(local));
  EXPECT_NE(ai::contents_id(all), ai::contents_id(hub));
  EXPECT_EQ(ai::contents_id(all), ai::contents_id(ai::merged(hub, local)));
  EXPECT_TRUE(ai::contents_id(all).starts_with(all.key + "+"));
  // For a name both list, the first one's records win: a push keeps what the Hub serves.
  ai::Entry other_bytes = profile_entry({"MODULE_2+3cc9a3cb"});
  other_bytes.modules[0].files[1].sha256 = std::string(64, 'f');
  EXPECT_EQ(ai::merged(hub, other_bytes).modules[1].files[1].sha256, std::string(64, 'a'));
  EXPECT_EQ(ai::merged(other_bytes, hub).modules[1].files[1].sha256, std::string(64, 'f'));
}

}  // namespace
}  // namespace neuron_cache
