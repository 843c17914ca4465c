// optimum-neuron's architecture digest from a raw config.json, against what optimum-neuron's own
// procedure gives under real transformers: the vectors of tests/data/vectors/arch-digest (12
// models, transformers 4.57 and 4.55) and the probes tables/generate.py made from each supported
// family (saved, bare and randomised configs). One test per vector and per probe file.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/transformers/arch_digest.h"
#include "neuron_cache/transformers/program.h"

namespace neuron_cache::transformers {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Json load(const std::string& name) {
  return pyjson::parse(read_text(std::string(NEURON_CACHE_VECTORS_DIR) + "/arch-digest/" + name));
}

const Table& table_for(const std::string& version) {
  for (const Table& table : tables()) {
    if (version.starts_with(table.release())) return table;
  }
  throw std::runtime_error("no table for transformers " + version);
}

std::string text(const Json& value) {
  return pyjson::dumps(value, std::nullopt, &int_keyed_members());
}

TEST(ArchDigestTest, TablesAreEmbeddedNewestFirst) {
  ASSERT_EQ(tables().size(), 2u);
  EXPECT_EQ(tables()[0].release(), "4.57");
  EXPECT_EQ(tables()[1].release(), "4.55");
  EXPECT_EQ(tables()[0].base.dtype_attribute, "dtype");
  EXPECT_EQ(tables()[1].base.dtype_attribute, "torch_dtype");
}

TEST(ArchDigestTest, EveryVectorIsReproduced) {
  Json vectors = load("vectors.json");
  ASSERT_EQ(vectors.size(), 24u);
  for (const auto& v : vectors) {
    SCOPED_TRACE(v["local_name"].get<std::string>() + " " +
                 v["transformers_version"].get<std::string>());
    const Table& table = table_for(v["transformers_version"].get<std::string>());
    DigestAnswer answer = arch_digest(table, pyjson::parse(v["config_json"].get<std::string>()),
                                      v["task"].get<std::string>());
    ASSERT_TRUE(answer.digest) << answer.why_not;
    EXPECT_EQ(text(answer.hashed), text(v["optimum_config_hashed"]));
    EXPECT_EQ(*answer.digest, v["optimum_digest"].get<std::string>());
    // The raw file's digest agrees only where the vector says so (Llama 3.2 under 4.55).
    EXPECT_EQ(*answer.digest == v["raw_rule_digest"].get<std::string>(), v["equal"].get<bool>());
  }
}

void check_probes(const std::string& file) {
  Json doc = load(file);
  const Table& table = table_for(doc["transformers_version"].get<std::string>());
  size_t checked = 0;
  for (const auto& c : doc["cases"]) {
    std::string name = c["model_type"].get<std::string>() + "/" + c["case"].get<std::string>() +
                       " " + c["task"].get<std::string>();
    SCOPED_TRACE(name);
    DigestAnswer answer = arch_digest(table, pyjson::parse(c["config_json"].get<std::string>()),
                                      c["task"].get<std::string>());
    if (c.contains("error")) {
      EXPECT_FALSE(answer.digest) << "transformers raised " << c["error"];
      EXPECT_FALSE(answer.why_not.empty());
      continue;
    }
    ASSERT_TRUE(answer.digest) << answer.why_not;
    EXPECT_EQ(text(answer.hashed), text(c["optimum_config_hashed"]));
    EXPECT_EQ(*answer.digest, c["optimum_digest"].get<std::string>());
    ++checked;
  }
  EXPECT_GT(checked, 400u);
}

TEST(ArchDigestTest, ProbesOfEveryFamilyUnderTransformers457) {
  check_probes("probes-4.57.json");
}

TEST(ArchDigestTest, ProbesOfEveryFamilyUnderTransformers455) {
  check_probes("probes-4.55.json");
}

// The program of each class, run with no argument, gives what cls().to_dict() gave transformers:
// the table's recorded defaults (which to_diff_dict compares with) agree with its programs.
TEST(ArchDigestTest, EveryClassProgramGivesTheClassDefaults) {
  for (const Table& table : tables()) {
    for (const auto& [name, cls] : table.classes) {
      SCOPED_TRACE(table.version + " " + name);
      Json made = to_dict(*construct(table, cls, Json::object()));
      Json recorded = cls.defaults;
      made.erase("transformers_version");
      recorded.erase("transformers_version");
      EXPECT_EQ(text(made), text(recorded));
    }
  }
}

TEST(ArchDigestTest, UnknownModelTypeIsSaidNotGuessed) {
  DigestAnswer answer = arch_digest(
      tables()[0], Json{{"model_type", "brand_new_arch"}, {"hidden_size", 8}}, "text-generation");
  EXPECT_FALSE(answer.digest);
  EXPECT_TRUE(answer.unknown_model_type);
  EXPECT_EQ(answer.model_type, "brand_new_arch");
  EXPECT_NE(answer.why_not.find("brand_new_arch"), std::string::npos);
}

TEST(ArchDigestTest, HostileConfigsAreBoundedNotCrashes) {
  const Table& table = tables()[0];
  for (
      const char* config : {
          R"({"model_type": "qwen2", "num_hidden_layers": 100000000000})",
          R"({"model_type": "llama", "hidden_size": 1, "num_attention_heads": 0})",
          R"({"model_type": "llama", "rope_scaling": "type"})",
          R"({"model_type": "llama", "id2label": [1, 2]})",
          R"({"model_type": "llama", "num_labels": 1e300})",
          R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": -5}})",
          R"({"model_type": "llava", "text_config": {"model_type": "unknown_text"}})",
          R"({"model_type": 7})",
          R"([1, 2])",
      }) {
    SCOPED_TRACE(config);
    DigestAnswer answer = arch_digest(table, pyjson::parse(config), "text-generation");
    if (!answer.digest) {
      EXPECT_FALSE(answer.why_not.empty());
    }
  }
}

// json.dumps(sort_keys=True) orders a dict with int keys as ints: a model with 12 labels.
TEST(ArchDigestTest, IntKeyedLabelsSortAsInts) {
  Json labels = Json::object();
  for (int i = 0; i < 12; ++i) labels[std::to_string(i)] = "L" + std::to_string(i);
  Json config = {{"model_type", "bert"}, {"id2label", labels}};
  DigestAnswer answer = arch_digest(tables()[0], config, "feature-extraction");
  ASSERT_TRUE(answer.digest) << answer.why_not;
  std::string dumped = text(answer.hashed);
  EXPECT_LT(dumped.find("\"2\": \"L2\""), dumped.find("\"10\": \"L10\""));
}

// Hostile values in every key of every probe config: a wrong type, a huge or negative number,
// deep or long containers. Each answer is a digest or a reason, never a crash or a hang.
TEST(ArchDigestTest, HostileValuesInEveryKeyGiveAnAnswer) {
  Json doc = load("probes-4.57.json");
  const std::vector<Json> hostile = {nullptr,
                                     true,
                                     -1,
                                     0,
                                     int64_t{1} << 62,
                                     1e308,
                                     -0.0,
                                     "",
                                     "x|y",
                                     Json::array(),
                                     Json::array({1, "a", nullptr}),
                                     Json::object(),
                                     Json{{"type", 3}},
                                     Json{{"rope_type", nullptr}}};
  std::mt19937 random(20261205);
  size_t answered = 0;
  for (const auto& c : doc["cases"]) {
    if (c["case"] != "saved" || c["task"] != "text-generation") continue;
    Json config = pyjson::parse(c["config_json"].get<std::string>());
    std::vector<std::string> keys;
    for (const auto& [key, value] : config.items()) keys.push_back(key);
    for (const auto& key : keys) {
      Json mutated = config;
      mutated[key] = hostile[random() % hostile.size()];
      for (const Table& table : tables()) {
        DigestAnswer answer = arch_digest(table, mutated, "text-generation");
        EXPECT_TRUE(answer.digest || !answer.why_not.empty()) << key;
        ++answered;
      }
    }
  }
  EXPECT_GT(answered, 1000u);
}

}  // namespace
}  // namespace neuron_cache::transformers
