// Registry entries (format spec 4.1-4.8): validation, the architecture digest input, paths of
// every generation, and reading a file back.
#include "neuron_cache/format/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"

namespace neuron_cache::registry {
namespace {

const std::string kDigest = "47841a90974b184491a524e318ee18d97f73190010115e86fd2f0a62cf2c8df6";

Json single_entry() {
  return pyjson::parse(R"({
    "_entry_class": "SingleModelCacheEntry", "_model_id": "org/model", "_task": "text-generation",
    "model_type": "llama", "hidden_size": 16, "_private": 1,
    "neuron": {"batch_size": 2, "target": "trn1"}})");
}

Json multi_entry() {
  return pyjson::parse(R"({
    "_entry_class": "MultiModelCacheEntry", "_model_id": "org/sd", "_task": null,
    "unet": {"in_channels": 4, "neuron": {"static_batch_size": 1}},
    "text_encoder": {"hidden_size": 32}})");
}

// The message of the input Error thrown by `call`, or a failure if it does not throw.
template <typename Call>
std::string input_error_of(Call call) {
  try {
    call();
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
    return error.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

std::string validation_error(const Json& entry) {
  return input_error_of([&] { validate_entry(entry); });
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// validate_entry

TEST(RegistryValidate, AcceptsCurrentEntries) {
  EXPECT_NO_THROW(validate_entry(single_entry()));
  EXPECT_NO_THROW(validate_entry(multi_entry()));
}

TEST(RegistryValidate, EntryMustBeAnObject) {
  EXPECT_TRUE(contains(validation_error(Json::array()), "must be a JSON object"));
  EXPECT_TRUE(contains(validation_error(Json("x")), "must be a JSON object"));
}

TEST(RegistryValidate, MissingEntryClass) {
  Json entry = single_entry();
  entry.erase("_entry_class");
  EXPECT_TRUE(contains(validation_error(entry), "no \"_entry_class\""));
}

TEST(RegistryValidate, UnknownEntryClassIsQuoted) {
  Json entry = single_entry();
  entry["_entry_class"] = "ModelCacheEntry";
  EXPECT_TRUE(contains(validation_error(entry), "not \"ModelCacheEntry\""));
  entry["_entry_class"] = 3;
  EXPECT_TRUE(contains(validation_error(entry), "not 3"));
}

TEST(RegistryValidate, ModelIdMustBeAString) {
  Json entry = single_entry();
  entry.erase("_model_id");
  EXPECT_TRUE(contains(validation_error(entry), "\"_model_id\""));
  entry["_model_id"] = nullptr;
  EXPECT_TRUE(contains(validation_error(entry), "\"_model_id\" as a string"));
}

TEST(RegistryValidate, TaskMustBeAStringOrNull) {
  Json entry = multi_entry();
  entry.erase("_task");
  EXPECT_TRUE(contains(validation_error(entry), "\"_task\""));
  entry["_task"] = 1;
  EXPECT_TRUE(contains(validation_error(entry), "\"_task\" as a string"));
  entry["_task"] = "text-to-image";
  EXPECT_NO_THROW(validate_entry(entry));
}

TEST(RegistryValidate, SingleModelNeedsModelType) {
  Json entry = single_entry();
  entry.erase("model_type");
  EXPECT_TRUE(contains(validation_error(entry), "\"model_type\""));
  entry["model_type"] = Json::array();
  EXPECT_TRUE(contains(validation_error(entry), "\"model_type\" as a string"));
}

TEST(RegistryValidate, SerializeAndArchInputValidateFirst) {
  Json entry = single_entry();
  entry.erase("_model_id");
  EXPECT_THROW(serialize(entry), Error);
  EXPECT_THROW(arch_input(entry), Error);
  EXPECT_THROW(arch_digest(entry), Error);
}

// ---------------------------------------------------------------------------------------------
// serialize, hashes, arch_input

TEST(RegistrySerialize, IndentTwoSortedNoTrailingNewline) {
  std::string text = serialize(single_entry());
  EXPECT_TRUE(text.starts_with("{\n  \"_entry_class\": \"SingleModelCacheEntry\",\n"));
  EXPECT_TRUE(
      contains(text, "  \"neuron\": {\n    \"batch_size\": 2,\n    \"target\": \"trn1\"\n  }"));
  EXPECT_TRUE(text.ends_with("\n}"));
}

TEST(RegistrySerialize, EntryHashIsSha512Prefix) {
  std::string text = serialize(single_entry());
  EXPECT_EQ(entry_hash(text), sha512_hex(text).substr(0, 20));
  EXPECT_EQ(entry_hash(text).size(), 20u);
}

TEST(RegistryArchInput, SingleDropsNeuronAndTheThreeUnderscoreKeys) {
  Json expected = pyjson::parse(R"({"model_type": "llama", "task": "text-generation",
      "config": {"model_type": "llama", "hidden_size": 16, "_private": 1}})");
  EXPECT_EQ(arch_input(single_entry()), expected);
  EXPECT_EQ(arch_digest(single_entry()), sha256_hex(pyjson::dumps(expected)));
}

TEST(RegistryArchInput, SingleWithNullNeuron) {
  Json entry = single_entry();
  entry["neuron"] = nullptr;
  EXPECT_FALSE(arch_input(entry)["config"].contains("neuron"));
}

TEST(RegistryArchInput, MultiWithUnetIsStableDiffusion) {
  Json expected = pyjson::parse(R"({"model_type": "stable-diffusion", "configs": {
      "unet": {"in_channels": 4}, "text_encoder": {"hidden_size": 32}}})");
  EXPECT_EQ(arch_input(multi_entry()), expected);
}

TEST(RegistryArchInput, MultiWithTransformerIsDiffusionTransformer) {
  Json entry = multi_entry();
  entry["transformer"] = entry["unet"];
  entry.erase("unet");
  EXPECT_EQ(arch_input(entry)["model_type"], "diffusion-transformer");
  EXPECT_FALSE(arch_input(entry).contains("task"));  // multi-model digests have no task
}

TEST(RegistryArchInput, UnetWinsOverTransformer) {
  Json entry = multi_entry();
  entry["transformer"] = Json::object();
  EXPECT_EQ(arch_input(entry)["model_type"], "stable-diffusion");
}

TEST(RegistryArchInput, MultiWithoutUnetOrTransformerIsAnError) {
  Json entry = multi_entry();
  entry.erase("unet");
  std::string message = input_error_of([&] { arch_input(entry); });
  EXPECT_TRUE(contains(message, "\"unet\" or a \"transformer\"")) << message;
  // The entry itself is still valid: only indexing by architecture is impossible.
  EXPECT_NO_THROW(serialize(entry));
}

// ---------------------------------------------------------------------------------------------
// Paths

TEST(RegistryPaths, PrimaryPathIsUnderTheArchDigest) {
  EXPECT_EQ(primary_path("0.4.6.dev4", kDigest, "5e484d66cb3e29251244"),
            "0_REGISTRY/0.4.6.dev4/" + kDigest + "/5e484d66cb3e29251244.json");
}

TEST(RegistryPaths, AliasPathUsesTheModelIdVerbatim) {
  EXPECT_EQ(
      alias_path("0.4.5", "llama", "llamafactory/tiny-random-Llama-3", "5e484d66cb3e29251244"),
      "0_REGISTRY/0.4.5/llama/llamafactory/tiny-random-Llama-3/5e484d66cb3e29251244.json");
  EXPECT_EQ(alias_path("0.4.5", "gpt2", "gpt2", "0d7750ffc1569797ef42"),
            "0_REGISTRY/0.4.5/gpt2/gpt2/0d7750ffc1569797ef42.json");
}

// Paths of this tool's own writers must be found again by locate().
std::string below_registry(const std::string& path) {
  std::string prefix = "0_REGISTRY/";
  EXPECT_TRUE(path.starts_with(prefix)) << path;
  return path.substr(prefix.size());
}

TEST(RegistryPaths, WrittenPathsAreLocated) {
  std::optional<Location> primary = locate(below_registry(primary_path("0.4.6", kDigest, "h")));
  ASSERT_TRUE(primary.has_value());
  EXPECT_EQ(primary->shape, PathShape::ByArch);
  std::optional<Location> alias = locate(below_registry(alias_path("0.4.6", "llama", "o/m", "h")));
  ASSERT_TRUE(alias.has_value());
  EXPECT_EQ(alias->shape, PathShape::ByModelType);
  EXPECT_EQ(alias->model_id, "o/m");
}

void expect_location(std::string_view path, PathShape shape, const Location& expected) {
  std::optional<Location> where = locate(path);
  ASSERT_TRUE(where.has_value()) << path;
  EXPECT_EQ(where->shape, shape) << path;
  EXPECT_EQ(where->optimum_version, expected.optimum_version) << path;
  EXPECT_EQ(where->mode, expected.mode) << path;
  EXPECT_EQ(where->model_type, expected.model_type) << path;
  EXPECT_EQ(where->model_id, expected.model_id) << path;
  EXPECT_EQ(where->arch_digest, expected.arch_digest) << path;
  EXPECT_EQ(where->hash, expected.hash) << path;
}

Location location(std::string version, std::string mode, std::string model_type,
                  std::string model_id, std::string digest, std::string hash) {
  return {PathShape::Initial, version, mode, model_type, model_id, digest, hash};
}

TEST(RegistryLocate, Initial) {
  expect_location("org/model/abc.json", PathShape::Initial,
                  location("", "", "", "org/model", "", "abc"));
  expect_location("gpt2/abc.json", PathShape::Initial, location("", "", "", "gpt2", "", "abc"));
}

TEST(RegistryLocate, ByMode) {
  expect_location("0.0.20/inference/llama/org/model/h.json", PathShape::ByMode,
                  location("0.0.20", "inference", "llama", "org/model", "", "h"));
  expect_location("0.1.0/training/gpt2/gpt2/h.json", PathShape::ByMode,
                  location("0.1.0", "training", "gpt2", "gpt2", "", "h"));
}

TEST(RegistryLocate, ByModelType) {
  expect_location("0.2.0/llama/meta-llama/Llama-2-7b-chat-hf/h.json", PathShape::ByModelType,
                  location("0.2.0", "", "llama", "meta-llama/Llama-2-7b-chat-hf", "", "h"));
  expect_location("0.4.4/gpt2/gpt2/h.json", PathShape::ByModelType,
                  location("0.4.4", "", "gpt2", "gpt2", "", "h"));
}

TEST(RegistryLocate, ByArch) {
  expect_location("0.4.6.dev4/" + kDigest + "/5e484d66cb3e29251244.json", PathShape::ByArch,
                  location("0.4.6.dev4", "", "", "", kDigest, "5e484d66cb3e29251244"));
}

TEST(RegistryLocate, RejectsWhatIsNotAnEntry) {
  const std::string kRejected[] = {
      "",
      "h.json",                                     // no folder at all
      "0.4.5/h.json",                               // a version with nothing under it
      "a/b/c/h.json",                               // too deep for Initial
      "0.4.5/llama/a/b/c/h.json",                   // too deep for ByModelType
      "0.0.20/inference/llama/a/b/c/h.json",        // too deep for ByMode
      "0.4.5/" + kDigest.substr(1) + "/h.json",     // 63 hex is not a digest
      "0.4.5/" + std::string(64, 'A') + "/h.json",  // digests are lowercase
      "org/model/h.txt",
      "org/model/h",
      "org/model/.json",
      "org/model/h.JSON",
      "../model/h.json",
      "org/../h.json",
      "0.4.5/llama/../m/h.json",
      "./org/h.json",
      "org//h.json",
      "/org/h.json",
      "org/h.json/",
  };
  for (const std::string& path : kRejected) EXPECT_FALSE(locate(path).has_value()) << path;
}

TEST(RegistryLocate, ShapeNamesAreDistinct) {
  std::set<std::string_view> names;
  for (PathShape shape :
       {PathShape::Initial, PathShape::ByMode, PathShape::ByModelType, PathShape::ByArch}) {
    EXPECT_FALSE(shape_name(shape).empty());
    names.insert(shape_name(shape));
  }
  EXPECT_EQ(names.size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// read_record

TEST(RegistryReadRecord, CurrentEntryWithMatchingName) {
  std::string text = serialize(single_entry());
  Location where = *locate("0.4.6/" + kDigest + "/" + entry_hash(text) + ".json");
  Record record = read_record(where, text);
  EXPECT_TRUE(record.hash_matches);
  EXPECT_EQ(record.entry_class, kSingleModel);
  EXPECT_EQ(record.model_id, "org/model");
  EXPECT_EQ(record.task, "text-generation");
  EXPECT_EQ(record.neuron, single_entry()["neuron"]);
  EXPECT_EQ(record.config, arch_input(single_entry())["config"]);
  EXPECT_EQ(record.location.arch_digest, kDigest);
}

TEST(RegistryReadRecord, HashIsOverTheExactBytes) {
  std::string text = serialize(single_entry());
  Location where = *locate("0.4.6/" + kDigest + "/" + entry_hash(text) + ".json");
  EXPECT_FALSE(read_record(where, text + "\n").hash_matches);  // same JSON, different bytes
  where.hash = "00000000000000000000";
  EXPECT_FALSE(read_record(where, text).hash_matches);
}

TEST(RegistryReadRecord, MultiEntryHasNoTask) {
  std::string text = serialize(multi_entry());
  Record record = read_record(*locate("0.4.6/" + kDigest + "/" + entry_hash(text) + ".json"), text);
  EXPECT_TRUE(record.hash_matches);
  EXPECT_EQ(record.entry_class, kMultiModel);
  EXPECT_FALSE(record.task.has_value());
  EXPECT_TRUE(record.neuron.is_null());
}

TEST(RegistryReadRecord, LegacyCompactTextKeepsTheTaskInNeuron) {
  // optimum-neuron 0.0.19-0.0.20: compact json.dumps in insertion order, no underscore keys.
  const std::string text =
      R"({"model_type": "llama", "hidden_size": 4096, "neuron": {"task": "text-generation", )"
      R"("batch_size": 1, "num_cores": 2, "auto_cast_type": "fp16", "sequence_length": 2048}})";
  Location where =
      *locate("0.0.20/inference/llama/meta-llama/Llama-2-7b-hf/" + entry_hash(text) + ".json");
  Record record = read_record(where, text);
  EXPECT_TRUE(record.hash_matches);
  EXPECT_EQ(record.location.shape, PathShape::ByMode);
  EXPECT_TRUE(record.entry_class.empty());
  EXPECT_EQ(record.model_id, "meta-llama/Llama-2-7b-hf");  // from the path: the text has none
  EXPECT_EQ(record.task, "text-generation");
  EXPECT_EQ(record.neuron["num_cores"], 2);
  EXPECT_EQ(record.config, pyjson::parse(R"({"model_type": "llama", "hidden_size": 4096})"));
}

TEST(RegistryReadRecord, LegacyTextWithoutTask) {
  const std::string text = R"({"model_type": "bert", "neuron": {"batch_size": 1}})";
  Record record = read_record(*locate("bert-base-uncased/x.json"), text);
  EXPECT_FALSE(record.task.has_value());
  EXPECT_FALSE(record.hash_matches);
  EXPECT_EQ(record.model_id, "bert-base-uncased");
}

TEST(RegistryReadRecord, RejectsTextThatIsNotAnObject) {
  Location where = *locate("org/model/h.json");
  EXPECT_TRUE(contains(input_error_of([&] { read_record(where, "[1, 2]"); }), "JSON object"));
  EXPECT_TRUE(contains(input_error_of([&] { read_record(where, "{\"a\": "); }), "invalid JSON"));
}

}  // namespace
}  // namespace neuron_cache::registry
