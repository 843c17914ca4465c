#include "neuron_cache/manifest/manifest.h"

#include <gtest/gtest.h>

#include <chrono>

#include "neuron_cache/error.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/manifest/command_template.h"
#include "test_support.h"

namespace neuron_cache::manifest {
namespace {

using testing::contains;
using testing::TempDir;
using testing::write_file;

// Every field of the YAML manifest (also a seed of fuzz_test.cpp).
const std::string kFull =
    testing::read_file(std::filesystem::path(NEURON_CACHE_TESTS_DIR) / "data/manifests/full.yaml");

// Writes `text` as neuron-cache.yaml in `dir` and loads it.
Manifest load_yaml(const TempDir& dir, const std::string& text) {
  write_file(dir / "neuron-cache.yaml", text);
  return load_manifest(dir / "neuron-cache.yaml");
}

// The message of the input Error that loading `text` throws ("" when it loads).
std::string yaml_error(const std::string& text) {
  try {
    parse_yaml(text, "neuron-cache.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    return e.what();
  }
  return "";
}

// A one-model manifest around one configuration given as YAML lines indented by 6.
std::string with_configuration(const std::string& lines) {
  return "instance_type: trn1\n"
         "models:\n"
         "  - model_id: org/model\n"
         "    task: text-generation\n"
         "    configurations:\n" +
         lines;
}

TEST(ManifestYaml, FullManifestRoundTrips) {
  TempDir dir;
  Manifest m = load_yaml(dir, kFull);
  EXPECT_EQ(m.path, (dir / "neuron-cache.yaml").string());
  EXPECT_EQ(m.cache_repo, "my-org/optimum-neuron-cache");
  EXPECT_EQ(m.cache_dir, "/var/tmp/neuron-compile-cache");
  EXPECT_EQ(m.compiler_version, "2.21.33363.0+82129205");
  EXPECT_EQ(m.optimum_neuron_version, "0.4.6.dev4");
  EXPECT_EQ(m.instance_type, "trn1");
  EXPECT_EQ(m.compiler_flags, std::vector<std::string>{"--auto-cast=none"});
  ASSERT_TRUE(m.compile.has_value());
  EXPECT_EQ(m.compile->command.substr(0, 41), "optimum-cli export neuron --model {model_");
  EXPECT_EQ(m.compile->env, (std::map<std::string, std::string>{{"NEURON_RT_NUM_CORES", "2"}}));
  ASSERT_EQ(m.configurations.size(), 3u);

  const Configuration& a = m.configurations[0];
  EXPECT_EQ(a.model_id, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(a.revision, "main");
  EXPECT_EQ(a.task, "text-generation");
  EXPECT_EQ(a.name, "llama8b-bs1");
  EXPECT_EQ(a.batch_size, 1);
  EXPECT_EQ(a.sequence_length, 4096);
  EXPECT_EQ(a.num_cores, 8);
  EXPECT_EQ(a.precision, "bf16");
  EXPECT_EQ(a.instance_type, "trn2");
  EXPECT_EQ(a.compiler_flags, (std::vector<std::string>{"--auto-cast=none", "-O2"}));
  EXPECT_EQ(a.source.to_string(), (dir / "neuron-cache.yaml").string() + ":15:9");

  const Configuration& b = m.configurations[1];
  EXPECT_EQ(b.name, "meta-llama--Llama-3.1-8B-bs4-seq2048-tp2-fp16-trn1");
  EXPECT_EQ(b.num_cores, 2);
  EXPECT_EQ(b.precision, "fp16");
  EXPECT_EQ(b.instance_type, "trn1");
  EXPECT_EQ(b.compiler_flags, std::vector<std::string>{"--auto-cast=none"});
  EXPECT_EQ(b.source.line, 22);

  const Configuration& c = m.configurations[2];
  EXPECT_EQ(c.model_id, "Qwen/Qwen2.5-0.5B");
  EXPECT_FALSE(c.revision.has_value());
  EXPECT_EQ(c.name, "Qwen--Qwen2.5-0.5B-bs8-seq1024-tp2-fp32-trn1");
  EXPECT_EQ(c.source.line, 29);
  EXPECT_EQ(c.source.column, 9);
  EXPECT_EQ(m.find("llama8b-bs1"), &a);
  EXPECT_EQ(m.find("nope"), nullptr);
}

TEST(ManifestYaml, UnknownKeyInConfiguration) {
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: 1\n"
                                          "        batch: 2\n")),
            "neuron-cache.yaml:7:9: unknown key \"batch\" in a configuration (expected one of: "
            "name, batch_size, sequence_length, num_cores, tensor_parallel_size, precision, "
            "instance_type, compiler_flags)");
}

// trusted_keys holds public key lines, checked where they are written; require_signatures is a
// YAML boolean, never a quoted one.
TEST(ManifestYaml, TrustSettingsAreCheckedWhereTheyAreWritten) {
  const std::string key = "acme-ci-1:" + std::string(43, 'A') + "=";
  const std::string models =
      "models:\n  - model_id: org/m\n    task: text-generation\n    configurations:\n"
      "      - {batch_size: 1, sequence_length: 128, num_cores: 2, precision: bf16, "
      "instance_type: trn1}\n";
  manifest::Manifest m = manifest::parse_yaml(
      "trusted_keys:\n  - \"" + key + "\"\nrequire_signatures: true\n" + models, "m.yaml");
  ASSERT_TRUE(m.trusted_keys);
  EXPECT_EQ(*m.trusted_keys, std::vector<std::string>{key});
  EXPECT_EQ(m.require_signatures, std::optional<bool>(true));
  EXPECT_TRUE(contains(yaml_error("trusted_keys:\n  - \"acme:AAAA\"\n" + models),
                       "neuron-cache.yaml:2:5: "));
  EXPECT_TRUE(contains(yaml_error("trusted_keys: \"" + key + "\"\n" + models),
                       "must be a list of strings"));
  EXPECT_TRUE(contains(yaml_error("require_signatures: \"true\"\n" + models),
                       "\"require_signatures\" must be true or false"));
  EXPECT_TRUE(contains(yaml_error("require_signatures: 1\n" + models), "must be true or false"));
}

TEST(ManifestYaml, UnknownKeysAtEveryLevel) {
  EXPECT_EQ(yaml_error("models: []\ncache_rep: x\n"),
            "neuron-cache.yaml:2:1: unknown key \"cache_rep\" in the manifest (expected one of: "
            "cache_repo, cache_dir, compiler_version, optimum_neuron_version, instance_type, "
            "compiler_flags, compile, models, trusted_keys, require_signatures)");
  EXPECT_EQ(yaml_error("models:\n  - model_id: a/b\n    revison: main\n"),
            "neuron-cache.yaml:3:5: unknown key \"revison\" in a model (expected one of: "
            "model_id, revision, model_type, checkout, task, configurations)");
  EXPECT_EQ(yaml_error("compile: {cmd: x}\nmodels: []\n"),
            "neuron-cache.yaml:1:11: unknown key \"cmd\" in compile (expected one of: command, "
            "env)");
}

TEST(ManifestYaml, CheckoutAndRevisionExcludeEachOther) {
  EXPECT_EQ(yaml_error("models:\n  - model_id: a/b\n    revision: main\n    checkout: ./b\n"
                       "    task: t\n    configurations: []\n"),
            "neuron-cache.yaml:4:15: a model has both \"revision\" and \"checkout\": the revision "
            "of a checkout is the commit it is at; give only one");
}

TEST(ManifestYaml, DuplicateKey) {
  EXPECT_EQ(yaml_error("cache_dir: /a\ncache_dir: /b\nmodels: []\n"),
            "neuron-cache.yaml:2:1: duplicate key \"cache_dir\" in the manifest (already set at "
            "neuron-cache.yaml:1:1)");
}

TEST(ManifestYaml, WrongTypes) {
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: one\n")),
            "neuron-cache.yaml:6:21: \"batch_size\" must be a positive integer, got \"one\"");
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: \"1\"\n")),
            "neuron-cache.yaml:6:21: \"batch_size\" must be a positive integer, got the quoted "
            "string \"1\"");
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: 1.5\n")),
            "neuron-cache.yaml:6:21: \"batch_size\" must be a positive integer, got \"1.5\"");
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size:\n")),
            "neuron-cache.yaml:6:9: \"batch_size\" in a configuration has no value (give one, or "
            "remove the key)");
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: [1]\n")),
            "neuron-cache.yaml:6:21: \"batch_size\" must be a positive integer, got a list");
  EXPECT_EQ(yaml_error(with_configuration("      - batch_size: 99999999999999999999\n")),
            "neuron-cache.yaml:6:21: \"batch_size\" must be a positive integer, got "
            "\"99999999999999999999\"");
  EXPECT_EQ(yaml_error("models: {model_id: a}\n"),
            "neuron-cache.yaml:1:9: \"models\" must be a list, got a map");
  EXPECT_EQ(yaml_error("models:\n  - [a, b]\n"),
            "neuron-cache.yaml:2:5: a model must be a map, got a list");
  EXPECT_EQ(yaml_error(with_configuration("        batch_size: 1\n")),
            "neuron-cache.yaml:6:9: \"configurations\" must be a list of configurations, got a "
            "map");
  EXPECT_EQ(yaml_error("compiler_flags: {a: b}\nmodels: []\n"),
            "neuron-cache.yaml:1:17: \"compiler_flags\" must be a list of strings, got a map");
  EXPECT_EQ(yaml_error("compiler_flags: [[a]]\nmodels: []\n"),
            "neuron-cache.yaml:1:18: each item of \"compiler_flags\" must be a string, "
            "got a list");
  EXPECT_EQ(yaml_error("cache_repo:\nmodels: []\n"),
            "neuron-cache.yaml:1:1: \"cache_repo\" in the manifest has no value (give one, or "
            "remove the key)");
  EXPECT_EQ(yaml_error("cache_repo: {a: 1}\nmodels: []\n"),
            "neuron-cache.yaml:1:13: \"cache_repo\" must be a string, got a map");
  EXPECT_EQ(yaml_error("compile: {command: x, env: {A: [1]}}\nmodels: []\n"),
            "neuron-cache.yaml:1:32: environment variable \"A\" must be a string, got a list");
  EXPECT_EQ(yaml_error("compile: {command: x, env: {A: }}\nmodels: []\n"),
            "neuron-cache.yaml:1:29: environment variable \"A\" has no value");
  EXPECT_EQ(yaml_error("compile: {command: x, env: {1A: b}}\nmodels: []\n"),
            "neuron-cache.yaml:1:29: invalid environment variable name \"1A\" in compile.env "
            "(letters, digits and _, not starting with a digit)");
}

TEST(ManifestYaml, MissingRequiredFields) {
  EXPECT_EQ(yaml_error("cache_dir: /a\n"),
            "neuron-cache.yaml:1:1: the manifest is missing the required key \"models\" (a list "
            "of models)");
  EXPECT_EQ(yaml_error("models:\n  - task: text-generation\n"),
            "neuron-cache.yaml:2:5: a model is missing the required key \"model_id\" (the Hub "
            "model id, e.g. meta-llama/Llama-3.1-8B)");
  EXPECT_EQ(yaml_error("models:\n  - model_id: a/b\n    configurations: []\n"),
            "neuron-cache.yaml:2:5: a model is missing the required key \"task\" (e.g. "
            "text-generation)");
  EXPECT_EQ(yaml_error("models:\n  - {model_id: a/b, task: t}\n"),
            "neuron-cache.yaml:2:5: a model is missing the required key \"configurations\" (a "
            "list of configurations)");
  const std::string base = "      - batch_size: 1\n";
  EXPECT_EQ(yaml_error(with_configuration("      - sequence_length: 1\n")),
            "neuron-cache.yaml:6:9: a configuration is missing the required key \"batch_size\" "
            "(a positive integer)");
  EXPECT_EQ(yaml_error(with_configuration(base)),
            "neuron-cache.yaml:6:9: a configuration is missing the required key "
            "\"sequence_length\" (a positive integer)");
  EXPECT_EQ(yaml_error(with_configuration(base + "        sequence_length: 8\n")),
            "neuron-cache.yaml:6:9: a configuration is missing the required key \"num_cores\" "
            "(or its alias \"tensor_parallel_size\"): a positive integer");
  EXPECT_EQ(yaml_error(with_configuration(base + "        sequence_length: 8\n"
                                                 "        num_cores: 2\n")),
            "neuron-cache.yaml:6:9: a configuration is missing the required key \"precision\" "
            "(one of: bf16, fp16, fp32 (or bfloat16, float16, float32))");
  EXPECT_EQ(yaml_error("models:\n  - model_id: a/b\n    task: t\n    configurations:\n"
                       "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: "
                       "bf16}\n"),
            "neuron-cache.yaml:5:9: a configuration has no \"instance_type\" and the manifest "
            "sets no default (add instance_type: one of trn1, trn1n, trn2, inf2, to the "
            "configuration or to the top of the manifest)");
  EXPECT_EQ(yaml_error("models: []\n"),
            "neuron-cache.yaml:1:9: \"models\" is empty (declare at least one model)");
  EXPECT_EQ(yaml_error("models:\n  - {model_id: a/b, task: t, configurations: []}\n"),
            "neuron-cache.yaml:2:46: \"configurations\" is empty (give at least one)");
}

TEST(ManifestYaml, NonPositiveNumbers) {
  std::string prefix = "      - {batch_size: 1, sequence_length: 2, precision: bf16, ";
  EXPECT_EQ(yaml_error(with_configuration(prefix + "num_cores: 0}\n")),
            "neuron-cache.yaml:6:73: \"num_cores\" must be a positive integer, got \"0\"");
  EXPECT_EQ(yaml_error(with_configuration(prefix + "tensor_parallel_size: -2}\n")),
            "neuron-cache.yaml:6:84: \"tensor_parallel_size\" must be a positive integer, got "
            "\"-2\"");
}

// Numbers no real configuration reaches, and names too long for a file name, are typos: refused
// at the manifest with the line, not at the compiler an hour later.
TEST(ManifestYaml, NumbersAndNamesAreBounded) {
  std::string prefix = "      - {batch_size: 1, sequence_length: 2, precision: bf16, ";
  EXPECT_EQ(yaml_error(with_configuration(prefix + "num_cores: 100000}\n")),
            "neuron-cache.yaml:6:73: \"num_cores\" is 100000, more than 1024 (no Neuron instance "
            "has that many NeuronCores): check the value");
  EXPECT_NE(yaml_error(with_configuration(prefix + "tensor_parallel_size: 4096}\n"))
                .find("more than 1024"),
            std::string::npos);
  EXPECT_NE(yaml_error(with_configuration("      - {batch_size: 1000000, sequence_length: 2, "
                                          "precision: bf16, num_cores: 2}\n"))
                .find("\"batch_size\" is 1000000, more than 65536"),
            std::string::npos);
  EXPECT_NE(yaml_error(with_configuration("      - {batch_size: 1, sequence_length: 99999999, "
                                          "precision: bf16, num_cores: 2}\n"))
                .find("\"sequence_length\" is 99999999, more than 16777216"),
            std::string::npos);
  std::string long_name(300, 'a');
  EXPECT_NE(yaml_error(with_configuration(prefix + "num_cores: 2, name: " + long_name + "}\n"))
                .find("at most 200 characters"),
            std::string::npos);
  EXPECT_TRUE(is_valid_name(std::string(200, 'a')));
  EXPECT_FALSE(is_valid_name(std::string(201, 'a')));
}

TEST(ManifestYaml, UnknownPrecisionAndInstanceType) {
  std::string prefix = "      - {batch_size: 1, sequence_length: 2, num_cores: 2, ";
  EXPECT_EQ(yaml_error(with_configuration(prefix + "precision: int8}\n")),
            "neuron-cache.yaml:6:70: unknown precision \"int8\" (expected one of: bf16, fp16, "
            "fp32 (or bfloat16, float16, float32))");
  EXPECT_EQ(yaml_error(with_configuration(prefix + "precision: bf16, instance_type: trn3}\n")),
            "neuron-cache.yaml:6:91: unknown instance type \"trn3\" (expected one of: trn1, "
            "trn1n, trn2, inf2)");
  EXPECT_EQ(yaml_error("instance_type: p4d\nmodels: []\n"),
            "neuron-cache.yaml:1:16: unknown instance type \"p4d\" (expected one of: trn1, "
            "trn1n, trn2, inf2)");
}

TEST(ManifestYaml, PrecisionIsNormalised) {
  TempDir dir;
  std::string text = with_configuration(
      "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: bfloat16}\n"
      "      - {batch_size: 2, sequence_length: 2, num_cores: 2, precision: float16}\n"
      "      - {batch_size: 3, sequence_length: 2, num_cores: 2, precision: float32}\n"
      "      - {batch_size: 4, sequence_length: 2, num_cores: 2, precision: fp16}\n");
  Manifest m = load_yaml(dir, text);
  ASSERT_EQ(m.configurations.size(), 4u);
  EXPECT_EQ(m.configurations[0].precision, "bf16");
  EXPECT_EQ(m.configurations[1].precision, "fp16");
  EXPECT_EQ(m.configurations[2].precision, "fp32");
  EXPECT_EQ(m.configurations[3].precision, "fp16");
  EXPECT_EQ(normalize_precision("BF16"), std::nullopt);
}

TEST(ManifestYaml, NumCoresAndTensorParallelSizeAreAliases) {
  TempDir dir;
  std::string prefix = "      - {batch_size: 1, sequence_length: 2, precision: bf16, ";
  Manifest m = load_yaml(dir, with_configuration(prefix + "name: a, num_cores: 4}\n" + prefix +
                                                 "name: b, tensor_parallel_size: 8}\n" + prefix +
                                                 "name: c, num_cores: 2, "
                                                 "tensor_parallel_size: 2}\n"));
  EXPECT_EQ(m.configurations[0].num_cores, 4);
  EXPECT_EQ(m.configurations[1].num_cores, 8);
  EXPECT_EQ(m.configurations[2].num_cores, 2);
  EXPECT_EQ(yaml_error(with_configuration(prefix + "num_cores: 2, tensor_parallel_size: 4}\n")),
            "neuron-cache.yaml:6:98: \"tensor_parallel_size\" (4) and \"num_cores\" (2) are the "
            "same setting with different values; give only one");
}

TEST(ManifestYaml, DuplicateConfigurationNames) {
  std::string line =
      "      - {name: x, batch_size: 1, sequence_length: 2, num_cores: 2, precision: fp16}\n";
  EXPECT_EQ(yaml_error(with_configuration(line + line)),
            "neuron-cache.yaml:7:16: duplicate configuration name \"x\" (also used at "
            "neuron-cache.yaml:6:9; names must be unique)");
  std::string unnamed =
      "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: fp16}\n";
  EXPECT_EQ(yaml_error(with_configuration(unnamed + unnamed)),
            "neuron-cache.yaml:7:9: duplicate configuration name "
            "\"org--model-bs1-seq2-tp2-fp16-trn1\" (also used at neuron-cache.yaml:6:9; the name "
            "is derived from the fields: give each a \"name\")");
  EXPECT_EQ(
      yaml_error(with_configuration("      - {name: \"a b\", batch_size: 1, sequence_length: 2, "
                                    "num_cores: 2, precision: fp16}\n")),
      "neuron-cache.yaml:6:16: invalid configuration name \"a b\" (start with a letter or "
      "digit, then letters, digits and . _ - + @ : only, at most 200 characters)");
  for (const char* name : {"..", ".hidden", "-rf", "_x"}) {
    EXPECT_TRUE(
        contains(yaml_error(with_configuration(
                     std::string("      - {name: \"") + name +
                     "\", batch_size: 1, sequence_length: 2, num_cores: 2, precision: fp16}\n")),
                 "invalid configuration name"))
        << name;
  }
}

TEST(ManifestYaml, CompileCommandIsChecked) {
  EXPECT_EQ(yaml_error("compile:\n  command: run {model}\nmodels: []\n"),
            "neuron-cache.yaml:2:12: unknown placeholder {model} in the compile command "
            "(expected one of: {model_id}, {revision}, {task}, {batch_size}, {sequence_length}, "
            "{num_cores}, {tensor_parallel_size}, {precision}, {instance_type}, {name}, "
            "{output})");
  EXPECT_EQ(yaml_error("compile: {env: {}}\nmodels: []\n"),
            "neuron-cache.yaml:1:10: compile is missing the required key \"command\" (the "
            "command template, e.g. \"optimum-cli export ...\")");
}

TEST(ManifestYaml, SyntaxErrors) {
  EXPECT_EQ(yaml_error("models: [a, b\n"),
            "neuron-cache.yaml:2:1: invalid YAML: end of sequence flow not found");
  // Tabs cannot indent YAML.
  std::string tabs = yaml_error("models:\n\t- model_id: a\n");
  EXPECT_EQ(tabs.rfind("neuron-cache.yaml:2:", 0), 0u) << tabs;
  EXPECT_NE(tabs.find("invalid YAML"), std::string::npos) << tabs;
  EXPECT_EQ(yaml_error("a: *nope\n"),
            "neuron-cache.yaml:1:4: invalid YAML: the referenced anchor is not defined");
}

TEST(ManifestYaml, DegenerateDocuments) {
  const std::string empty =
      "neuron-cache.yaml:1:1: the manifest is empty (expected a map with at least \"models\")";
  EXPECT_EQ(yaml_error(""), empty);
  EXPECT_EQ(yaml_error("# only a comment\n"), empty);
  EXPECT_EQ(yaml_error("---\n"), empty);
  EXPECT_EQ(yaml_error("just a scalar\n"),
            "neuron-cache.yaml:1:1: the manifest must be a map, got \"just a scalar\"");
  EXPECT_EQ(yaml_error("- a\n- b\n"),
            "neuron-cache.yaml:1:1: the manifest must be a map, got a list");
  EXPECT_EQ(yaml_error("models: []\n---\nmodels: []\n"),
            "neuron-cache.yaml:3:1: a manifest is one YAML document; remove the second one "
            "(after ---)");
  EXPECT_EQ(yaml_error("? [a]\n: b\n"),
            "neuron-cache.yaml:1:3: a key in the manifest must be a string, got a list");
  std::string binary("models: \0\xff\xfe\n", 13);
  EXPECT_NE(yaml_error(binary), "");
}

TEST(ManifestYaml, DeepNestingIsAnErrorNotACrash) {
  std::string deep_flow = "models: " + std::string(100000, '[') + std::string(100000, ']');
  std::string message = yaml_error(deep_flow);
  EXPECT_EQ(message.rfind("neuron-cache.yaml:1:", 0), 0u) << message.substr(0, 200);
  std::string deep_block = "models:\n";
  for (int i = 0; i < 5000; ++i) deep_block += std::string(i + 2, ' ') + "- \n";
  EXPECT_NE(yaml_error(deep_block), "");
}

TEST(ManifestYaml, HugeManifests) {
  std::string text =
      "instance_type: inf2\nmodels:\n  - model_id: a/b\n    task: t\n"
      "    configurations:\n";
  for (int i = 1; i <= 5000; ++i) {
    text += "      - {batch_size: " + std::to_string(i) +
            ", sequence_length: 128, num_cores: 2, precision: bf16}\n";
  }
  TempDir dir;
  Manifest m = load_yaml(dir, text);
  ASSERT_EQ(m.configurations.size(), 5000u);
  EXPECT_EQ(m.configurations.back().batch_size, 5000);
  EXPECT_EQ(m.configurations.back().source.line, 5005);

  std::string long_value(1 << 19, 'k');
  std::string message = yaml_error("models: []\ninstance_type: " + long_value + "\n");
  EXPECT_EQ(message.rfind("neuron-cache.yaml:2:16: unknown instance type \"kkkk", 0), 0u);
  EXPECT_LT(message.size(), 400u);  // long values are cut in messages
}

TEST(ManifestLoad, ChoosesTheFormatByExtension) {
  TempDir dir;
  write_file(dir / "m.txt", "models: []\n");
  try {
    load_manifest(dir / "m.txt");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("unknown format"), std::string::npos);
  }
  write_file(dir / "m.yml", with_configuration("      - {batch_size: 1, sequence_length: 2, "
                                               "num_cores: 2, precision: bf16}\n"));
  EXPECT_EQ(load_manifest(dir / "m.yml").configurations.size(), 1u);
  write_file(dir / "m.json", R"({"a/b": [{"batch_size": 1, "sequence_length": 2,
    "tensor_parallel_size": 2, "instance_type": "trn1"}]})");
  EXPECT_EQ(load_manifest(dir / "m.json").configurations.size(), 1u);
  try {
    load_manifest(dir / "missing.yaml");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // A path that names nothing is the user's input, like a typo inside the file (issue 22).
    EXPECT_EQ(e.kind(), ErrorKind::Input);
  }
}

TEST(ManifestJson, InferenceCacheConfig) {
  TempDir dir;
  write_file(dir / "llama3.json", R"({
  "meta-llama/Meta-Llama-3-8B": [
    {"batch_size": 1, "sequence_length": 4096, "num_cores": 2, "auto_cast_type": "fp16", "instance_type": "inf2"},
    {"batch_size": 4, "sequence_length": 4096, "tensor_parallel_size": 8, "instance_type": "trn1"}
  ],
  "Qwen/Qwen2.5-7B": [
    {"batch_size": 1, "sequence_length": 8192, "tensor_parallel_size": 2, "instance_type": "trn2",
     "task": "feature-extraction", "dtype": "float32"}
  ]
})");
  Manifest m = load_manifest(dir / "llama3.json");
  ASSERT_EQ(m.configurations.size(), 3u);
  // nlohmann objects iterate in key order.
  const Configuration& q = m.configurations[0];
  EXPECT_EQ(q.model_id, "Qwen/Qwen2.5-7B");
  EXPECT_EQ(q.task, "feature-extraction");
  EXPECT_EQ(q.precision, "fp32");
  EXPECT_EQ(q.instance_type, "trn2");
  const Configuration& a = m.configurations[1];
  EXPECT_EQ(a.model_id, "meta-llama/Meta-Llama-3-8B");
  EXPECT_EQ(a.task, "text-generation");
  EXPECT_EQ(a.batch_size, 1);
  EXPECT_EQ(a.sequence_length, 4096);
  EXPECT_EQ(a.num_cores, 2);  // legacy num_cores
  EXPECT_EQ(a.precision, "fp16");
  EXPECT_EQ(a.instance_type, "inf2");
  EXPECT_EQ(a.name, "meta-llama--Meta-Llama-3-8B-bs1-seq4096-tp2-fp16-inf2");
  EXPECT_EQ(a.source.to_string(), (dir / "llama3.json").string());
  const Configuration& b = m.configurations[2];
  EXPECT_EQ(b.num_cores, 8);
  EXPECT_EQ(b.precision, "bf16");  // the default
}

std::string json_error(const std::string& text,
                       const std::optional<std::string>& instance_type = std::nullopt) {
  try {
    parse_inference_cache_config(text, "c.json", instance_type);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    return e.what();
  }
  return "";
}

TEST(ManifestJson, Errors) {
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 2, "num_cores": 2}]})"),
            "c.json: \"a/b\"[0]: missing \"instance_type\" (one of: trn1, trn1n, trn2, inf2)");
  EXPECT_EQ(
      json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 2, "num_cores": 2}]})", "trn1"),
      "");
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 2, "num_cores": 2,
              "instance_type": "trn1", "batch": 1}]})"),
            "c.json: \"a/b\"[0]: unknown key \"batch\" (expected one of: batch_size, "
            "sequence_length, tensor_parallel_size, num_cores, instance_type, task, dtype, "
            "auto_cast_type)");
  EXPECT_EQ(json_error(R"({"a/b": [{}, {"batch_size": "1", "sequence_length": 2}]})"),
            "c.json: \"a/b\"[0]: missing \"batch_size\" (a positive integer)");
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1.0, "sequence_length": 2}]})"),
            "c.json: \"a/b\"[0]: \"batch_size\" must be a positive integer, got 1.0");
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 0}]})"),
            "c.json: \"a/b\"[0]: \"sequence_length\" must be a positive integer, got 0");
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 2,
              "num_cores": 2, "tensor_parallel_size": 4}]})"),
            "c.json: \"a/b\"[0]: \"tensor_parallel_size\" and \"num_cores\" are the same setting "
            "with different values; give only one");
  EXPECT_EQ(json_error(R"({"a/b": [{"batch_size": 1, "sequence_length": 2, "num_cores": 2,
              "dtype": "int8", "instance_type": "trn1"}]})"),
            "c.json: \"a/b\"[0]: unknown precision \"int8\" (expected one of: bf16, fp16, fp32, "
            "bfloat16, float16, float32)");
  EXPECT_EQ(json_error(R"({"a/b": {"batch_size": 1}})"),
            "c.json: \"a/b\" must be a list of configurations");
  EXPECT_EQ(json_error("[1]"),
            "c.json: an inference-cache-config file must be a JSON object {\"<model_id>\": "
            "[configurations]}");
  EXPECT_EQ(json_error(R"({"a/b": [1]})"),
            "c.json: \"a/b\"[0]: a configuration must be an object, got 1");
  std::string dup = R"({"batch_size": 1, "sequence_length": 2, "num_cores": 2})";
  EXPECT_EQ(json_error("{\"a/b\": [" + dup + ", " + dup + "]}", "trn1"),
            "c.json: \"a/b\"[1]: the same configuration as \"a/b\"[0] "
            "(a--b-bs1-seq2-tp2-bf16-trn1)");
  std::string syntax = json_error("{\"a/b\": [");
  EXPECT_EQ(syntax.rfind("c.json: ", 0), 0u) << syntax;
}

// Every value with a grammar is checked where it is read (issue "Local input", item 1).
TEST(ManifestYaml, ValuesFollowTheirGrammar) {
  EXPECT_EQ(yaml_error("cache_repo: \"../../api/whoami-v2\"\nmodels: []\n"),
            "neuron-cache.yaml:1:13: cache_repo \"../../api/whoami-v2\" is not a Hub repo id "
            "(namespace/name of letters, digits, '.', '_', '-', no leading or trailing '.' or "
            "'-', no '--' or '..', at most 96 characters each): check the name (other stores: "
            "s3://bucket/prefix, file:///folder)");
  EXPECT_EQ(yaml_error("compiler_version: 2.21/../../x\nmodels: []\n"),
            "neuron-cache.yaml:1:19: compiler_version \"2.21/../../x\" is not a version (a "
            "digit, then letters, digits, '.', '+', '_', '-', at most 100 characters, e.g. "
            "2.21.33363.0+82129205): check the value");
  EXPECT_TRUE(contains(yaml_error("optimum_neuron_version: ../0.4\nmodels: []\n"),
                       "neuron-cache.yaml:1:25: optimum_neuron_version \"../0.4\" is not a "
                       "version"));
  auto model = [](const std::string& fields) {
    return "instance_type: trn1\nmodels:\n  - " + fields +
           "\n    configurations:\n"
           "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: bf16}\n";
  };
  EXPECT_TRUE(contains(yaml_error(model("model_id: a/b\n    task: t\n    model_type: ../llama")),
                       "neuron-cache.yaml:5:17: model_type \"../llama\" is not a model type "
                       "(lower-case letters, digits, '_' and '-'"));
  EXPECT_TRUE(contains(yaml_error(model("model_id: --help\n    task: t")),
                       "neuron-cache.yaml:3:15: model_id \"--help\" is not a Hub repo id"));
  EXPECT_TRUE(contains(yaml_error(model("model_id: \"{output}\"\n    task: t")),
                       "neuron-cache.yaml:3:15: model_id \"{output}\" is not a Hub repo id"));
  EXPECT_NE(yaml_error(model("model_id: a/b/c\n    task: t")), "");
  EXPECT_NE(yaml_error(model("model_id: a--b/c\n    task: t")), "");
  EXPECT_NE(yaml_error(model("model_id: a/b\n    task: t\n    revision: --force")), "");
  EXPECT_NE(yaml_error(model("model_id: a/b\n    task: Text Generation")), "");
  // A checkout names the model by its folder: a path is then a fine id, an option never.
  EXPECT_EQ(yaml_error(model("model_id: ./models/llama\n    task: t\n    checkout: ./llama")), "");
  EXPECT_TRUE(contains(yaml_error(model("model_id: --help\n    task: t\n    checkout: ./b")),
                       "neuron-cache.yaml:3:15: model_id \"--help\" can be neither an option"));
  EXPECT_EQ(yaml_error(model("model_id: gpt2\n    task: t\n    revision: refs/pr/1")), "");
}

// A string where a string is expected, an integer where an integer is expected.
TEST(ManifestYaml, ScalarsHaveTheirYamlType) {
  auto model = [](const std::string& task, const std::string& batch) {
    return "instance_type: trn1\nmodels:\n  - model_id: a/b\n    task: " + task +
           "\n    configurations:\n"
           "      - {batch_size: " +
           batch + ", sequence_length: 2, num_cores: 2, precision: bf16}\n";
  };
  EXPECT_EQ(yaml_error(model("5", "1")),
            "neuron-cache.yaml:4:11: \"task\" must be a string, got the integer 5 (quote it if "
            "you mean the text: \"5\")");
  EXPECT_EQ(yaml_error(model("true", "1")),
            "neuron-cache.yaml:4:11: \"task\" must be a string, got the boolean true (quote it "
            "if you mean the text: \"true\")");
  EXPECT_EQ(yaml_error(model("\"5\"", "1")), "");
  EXPECT_EQ(yaml_error(model("!!str 5", "1")), "");
  EXPECT_EQ(yaml_error(model("t", "!!str 1")),
            "neuron-cache.yaml:6:22: \"batch_size\" must be a positive integer, got the string "
            "\"1\" (tagged !!str)");
  EXPECT_EQ(yaml_error(model("t", "\"1\"")),
            "neuron-cache.yaml:6:22: \"batch_size\" must be a positive integer, got the quoted "
            "string \"1\"");
  EXPECT_EQ(yaml_error(model("t", "!!int 1")), "");
  EXPECT_EQ(yaml_error("compiler_version: 2.21\nmodels: []\n"),
            "neuron-cache.yaml:1:19: \"compiler_version\" must be a string, got the number 2.21 "
            "(quote it if you mean the text: \"2.21\")");
  EXPECT_EQ(yaml_error("compiler_flags: [-O2, 3]\nmodels: []\n"),
            "neuron-cache.yaml:1:23: \"compiler_flags\" must be a string, got the integer 3 "
            "(quote it if you mean the text: \"3\")");
}

TEST(ManifestHubNames, RepoIdsVersionsAndIdentifiers) {
  for (const char* good : {"gpt2", "meta-llama/Llama-3.1-8B", "aws-neuron/optimum-neuron-cache",
                           "a_b/c.d-e", "Org1/x"}) {
    EXPECT_TRUE(hub_names::is_repo_id(good)) << good;
  }
  for (const char* bad :
       {"", "/", "a/", "/a", "a/b/c", "../x", "a/..", "-a/b", "a/b-", "a/.b", "a--b/c", "a/b..c",
        "a/b c", "a/b?x", "a/b#x", "a/b%2F", "a/b.git", "a/\xc3\xa9"}) {
    EXPECT_FALSE(hub_names::is_repo_id(bad)) << bad;
  }
  EXPECT_TRUE(hub_names::is_repo_id("a/" + std::string(96, 'x')));
  EXPECT_FALSE(hub_names::is_repo_id("a/" + std::string(97, 'x')));
  EXPECT_TRUE(hub_names::is_version("2.21.33363.0+82129205"));
  EXPECT_TRUE(hub_names::is_version("0.4.6.dev4"));
  EXPECT_FALSE(hub_names::is_version("v2.21"));
  EXPECT_FALSE(hub_names::is_version("2.21/.."));
  EXPECT_FALSE(hub_names::is_version(std::string(101, '1')));
  EXPECT_TRUE(hub_names::is_identifier("text-generation"));
  EXPECT_TRUE(hub_names::is_identifier("qwen2_moe"));
  EXPECT_FALSE(hub_names::is_identifier("Llama"));
  EXPECT_FALSE(hub_names::is_identifier("-x"));
  EXPECT_FALSE(hub_names::is_identifier("a/b"));
  EXPECT_TRUE(hub_names::is_revision("main"));
  EXPECT_TRUE(hub_names::is_revision("refs/pr/1"));
  EXPECT_TRUE(hub_names::is_revision("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(hub_names::is_revision("-x"));
  EXPECT_FALSE(hub_names::is_revision("a..b"));
  EXPECT_FALSE(hub_names::is_revision("{output}"));
  EXPECT_FALSE(hub_names::is_revision("a b"));
}

TEST(ManifestJson, ModelIdsAndTasksFollowTheirGrammar) {
  std::string item = R"({"batch_size": 1, "sequence_length": 2, "num_cores": 2)";
  try {
    parse_inference_cache_config("{\"../api/whoami-v2\": [" + item + "}]}", "c.json", "trn1");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_TRUE(contains(e.what(),
                         "c.json: the model id \"../api/whoami-v2\" is not a Hub repo "
                         "id"))
        << e.what();
  }
  try {
    parse_inference_cache_config("{\"a/b\": [" + item + ", \"task\": \"--x\"}]}", "c.json", "trn1");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "c.json: \"a/b\"[0]: task \"--x\" is not a task")) << e.what();
  }
}

// Issue item 2: aliases repeat nodes without repeating text; the reader stops at its bounds.
TEST(ManifestYaml, AliasBombsStopFastAtTheBounds) {
  std::string flag(1 << 19, 'f');
  std::string text =
      "instance_type: trn1\nmodels:\n  - model_id: a/b\n    task: t\n"
      "    configurations:\n"
      "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: bf16, "
      "compiler_flags: &big [\"" +
      flag + "\"]}\n";
  for (int i = 2; i <= 200; ++i) {
    text += "      - {batch_size: " + std::to_string(i) +
            ", sequence_length: 2, num_cores: 2, precision: bf16, compiler_flags: *big}\n";
  }
  auto start = std::chrono::steady_clock::now();
  std::string message = yaml_error(text);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(contains(message, "neuron-cache.yaml:"));
  EXPECT_TRUE(contains(message, "more than 16 MiB once aliases (*name)")) << message;

  // Many nodes: 400 models that each reuse one list of 400 configurations.
  std::string nodes =
      "instance_type: trn1\nmodels:\n  - model_id: a/b\n    task: t\n"
      "    configurations: &many\n";
  for (int i = 1; i <= 400; ++i) {
    nodes += "      - {batch_size: " + std::to_string(i) +
             ", sequence_length: 2, num_cores: 2, precision: bf16}\n";
  }
  for (int i = 2; i <= 400; ++i) {
    nodes += "  - {model_id: a/m" + std::to_string(i) + ", task: t, configurations: *many}\n";
  }
  start = std::chrono::steady_clock::now();
  message = yaml_error(nodes);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(contains(message, "neuron-cache.yaml:"));
  EXPECT_TRUE(contains(message, "more than 500000 YAML nodes once aliases (*name) are expanded"))
      << message;
}

TEST(ManifestLoad, FileSizeIsBounded) {
  TempDir dir;
  write_file(dir / "big.yaml", "models: []\n#" + std::string(1 << 20, 'x') + "\n");
  try {
    load_manifest(dir / "big.yaml");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_TRUE(contains(e.what(), (dir / "big.yaml").string() + " is 1048589 bytes; a "
                                                                 "manifest is at most 1 MiB"))
        << e.what();
  }
  EXPECT_TRUE(contains(yaml_error(std::string((1 << 20) + 1, ' ')),
                       "neuron-cache.yaml: the manifest is 1048577 bytes; a manifest is at most "
                       "1 MiB"));
}

// Issue item 3: broken text is refused where it is read, with its place and field.
TEST(ManifestYaml, TextMustBeUtf8) {
  auto model = [](const std::string& task) {
    return "instance_type: trn1\nmodels:\n  - model_id: a/b\n    task: " + task +
           "\n    configurations:\n"
           "      - {batch_size: 1, sequence_length: 2, num_cores: 2, precision: bf16}\n";
  };
  EXPECT_EQ(yaml_error(model("text-\xff")),
            "neuron-cache.yaml:4:11: \"task\" is not valid UTF-8 (byte 0xFF at offset 5 of the "
            "value): save the manifest as UTF-8 text");
  EXPECT_EQ(yaml_error("compiler_flags: [\"-O2\", \"a\\0b\"]\nmodels: []\n"),
            "neuron-cache.yaml:1:25: \"compiler_flags\" contains a NUL byte (byte 0x00 at offset "
            "1 of the value): save the manifest as UTF-8 text");
  EXPECT_EQ(yaml_error("cache_dir: /tmp/\xc3\x28\nmodels: []\n"),
            "neuron-cache.yaml:1:12: \"cache_dir\" is not valid UTF-8 (byte 0xC3 at offset 5 of "
            "the value): save the manifest as UTF-8 text");
  EXPECT_EQ(yaml_error("cache_dir: /tmp/\xed\xa0\x80\nmodels: []\n"),  // a UTF-16 surrogate
            "neuron-cache.yaml:1:12: \"cache_dir\" is not valid UTF-8 (byte 0xED at offset 5 of "
            "the value): save the manifest as UTF-8 text");
  EXPECT_EQ(yaml_error("cache_\xff: x\nmodels: []\n"),
            "neuron-cache.yaml:1:1: a key in the manifest is not valid UTF-8 (byte 0xFF at offset "
            "6 of the value): save the manifest as UTF-8 text");
  EXPECT_EQ(yaml_error("cache_dir: /tmp/caf\xc3\xa9\nmodels: []\n"),
            "neuron-cache.yaml:2:9: \"models\" is empty (declare at least one model)");
}

Configuration sample() {
  Configuration c;
  c.model_id = "meta-llama/Llama-3.1-8B";
  c.revision = "0123456789abcdef0123456789abcdef01234567";
  c.task = "text-generation";
  c.name = "llama8b";
  c.batch_size = 4;
  c.sequence_length = 4096;
  c.num_cores = 8;
  c.precision = "bf16";
  c.instance_type = "trn2";
  return c;
}

using Argv = std::vector<std::string>;

TEST(ManifestCommand, RendersEveryPlaceholder) {
  EXPECT_EQ(
      render_command("export {model_id}@{revision} {task} bs={batch_size} "
                     "seq={sequence_length} {num_cores}/{tensor_parallel_size} {precision} "
                     "{instance_type} {name} {output}",
                     sample(), "/out dir"),
      (Argv{"export", "meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567",
            "text-generation", "bs=4", "seq=4096", "8/8", "bf16", "trn2", "llama8b", "/out dir"}));
  Configuration no_revision = sample();
  no_revision.revision.reset();
  EXPECT_EQ(render_command("x {revision}", no_revision, ""), (Argv{"x", "main"}));
}

TEST(ManifestCommand, QuotingAndEscapes) {
  EXPECT_EQ(render_command("  a\t'b c'  \"d \\\" e\" f\\ g '' \"\" {{x}} '{name}'\n", sample(), ""),
            (Argv{"a", "b c", "d \" e", "f g", "", "", "{x}", "llama8b"}));
  EXPECT_EQ(render_command("sh -c 'echo {{{name}}}'", sample(), ""),
            (Argv{"sh", "-c", "echo {llama8b}"}));
}

TEST(ManifestCommand, SubstitutedValuesNeverSplitOrInject) {
  Configuration evil = sample();
  evil.model_id = "a b'; rm -rf / #\" $(id) `id` && {name}";
  EXPECT_EQ(
      render_command("optimum-cli export neuron --model {model_id} {output}", evil, "out; reboot"),
      (Argv{"optimum-cli", "export", "neuron", "--model", "a b'; rm -rf / #\" $(id) `id` && {name}",
            "out; reboot"}));
  EXPECT_EQ(render_command("--model='{model_id}'", evil, ""),
            (Argv{"--model=a b'; rm -rf / #\" $(id) `id` && {name}"}));
}

TEST(ManifestCommand, Errors) {
  auto message = [](const std::string& command) {
    try {
      render_command(command, sample(), "");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message("run {model}"),
            "unknown placeholder {model} in the compile command (expected one of: {model_id}, "
            "{revision}, {task}, {batch_size}, {sequence_length}, {num_cores}, "
            "{tensor_parallel_size}, {precision}, {instance_type}, {name}, {output})");
  EXPECT_EQ(message("run {model_id"),
            "unterminated placeholder in the compile command \"{model_id\" (close it with }, or "
            "write {{ for a literal {)");
  EXPECT_EQ(message("run a}"), "lone } in the compile command \"a}\" (write }} for a literal })");
  EXPECT_EQ(message("run 'a"), "unterminated ' in the compile command (add the closing ')");
  EXPECT_EQ(message("run \"a\\\""), "unterminated \" in the compile command (add the closing \")");
  EXPECT_EQ(message(" \t\n"), "the compile command is empty (give the program to run)");
  EXPECT_EQ(message(""), "the compile command is empty (give the program to run)");
}

}  // namespace
}  // namespace neuron_cache::manifest
