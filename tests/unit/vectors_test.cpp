// The CPython reference vectors (tests/data/vectors): every registry entry and every flag list
// must reproduce Python's exact text and hashes. One test per vector so a failure names it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"

namespace neuron_cache {
namespace {

using pyjson::Json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Loaded at registration time, so a missing or broken file yields an empty list here and a
// failure in the *Loads tests below rather than a crash before main.
Json load_vectors(const std::string& file_name) {
  try {
    return pyjson::parse(read_text(std::string(NEURON_CACHE_VECTORS_DIR) + "/" + file_name));
  } catch (const std::exception&) {
    return Json::array();
  }
}

const Json& registry_vectors() {
  static const Json vectors = load_vectors("registry-entries.json");
  return vectors;
}

const Json& flags_vectors() {
  static const Json vectors = load_vectors("compile-flags.json");
  return vectors;
}

// gtest parameter names allow only [A-Za-z0-9_].
std::string sanitize(std::string_view text) {
  std::string name;
  for (char c : text) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum) {
      name += c;
    } else if (!name.empty() && name.back() != '_') {
      name += '_';
    }
  }
  name = name.substr(0, 60);
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

std::vector<size_t> indices(const Json& vectors) {
  std::vector<size_t> result(vectors.size());
  for (size_t i = 0; i < result.size(); ++i) result[i] = i;
  return result;
}

TEST(VectorFiles, RegistryEntriesLoad) {
  // The README promises 12 vectors; fewer means the file did not parse.
  EXPECT_EQ(registry_vectors().size(), 12u);
}

TEST(VectorFiles, CompileFlagsLoad) {
  EXPECT_EQ(flags_vectors().size(), 12u);
}

class RegistryVector : public testing::TestWithParam<size_t> {
 protected:
  const Json& vector() const { return registry_vectors().at(GetParam()); }
  // The entry goes through text, as a real reader would see it, not through the parsed file.
  Json entry() const { return pyjson::parse(pyjson::dumps(vector().at("entry"))); }
  std::string expected(const char* field) const { return vector().at(field).get<std::string>(); }
};

TEST_P(RegistryVector, SerializesLikePython) {
  EXPECT_EQ(registry::serialize(entry()), expected("serialized"));
}

TEST_P(RegistryVector, EntryHash) {
  EXPECT_EQ(registry::entry_hash(registry::serialize(entry())), expected("entry_hash"));
  // The hash of the reference text itself, independently of our serializer.
  EXPECT_EQ(registry::entry_hash(expected("serialized")), expected("entry_hash"));
}

TEST_P(RegistryVector, ArchInput) {
  Json input = registry::arch_input(entry());
  EXPECT_EQ(input, vector().at("arch_input"));
  EXPECT_EQ(pyjson::dumps(input), expected("arch_compact"));
}

TEST_P(RegistryVector, ArchDigest) {
  EXPECT_EQ(registry::arch_digest(entry()), expected("arch_digest"));
}

TEST_P(RegistryVector, SerializedTextParsesBackToTheEntry) {
  Json reparsed = pyjson::parse(expected("serialized"));
  EXPECT_EQ(pyjson::dumps(reparsed, 2), expected("serialized"));
}

INSTANTIATE_TEST_SUITE_P(Vectors, RegistryVector, testing::ValuesIn(indices(registry_vectors())),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return sanitize(
                               registry_vectors().at(info.param).at("name").get<std::string>());
                         });

class FlagsVector : public testing::TestWithParam<size_t> {
 protected:
  const Json& vector() const { return flags_vectors().at(GetParam()); }
  std::vector<std::string> flags() const {
    return vector().at("flags").get<std::vector<std::string>>();
  }
  std::string expected(const char* field) const { return vector().at(field).get<std::string>(); }
};

TEST_P(FlagsVector, CompileFlagsJson) {
  EXPECT_EQ(compile_flags_json(flags()), expected("compile_flags_json"));
}

TEST_P(FlagsVector, FlagsKey) {
  EXPECT_EQ(flags_key(compile_flags_json(flags())), expected("flags_key"));
}

TEST_P(FlagsVector, LegacyText) {
  EXPECT_EQ(legacy_compile_flags_txt(flags()), expected("legacy_txt"));
}

TEST_P(FlagsVector, LegacyKey) {
  EXPECT_EQ(flags_key(legacy_compile_flags_txt(flags())), expected("legacy_key"));
}

TEST_P(FlagsVector, ParsesBackToTheFlags) {
  EXPECT_EQ(parse_compile_flags_json(expected("compile_flags_json")), flags());
}

TEST(CompileFlagsParse, RejectsAnythingButAListOfStrings) {
  for (const char* text :
       {"{}", "\"--target=trn1\"", "[1]", "[[\"a\"]]", "[null]", "", "[\"a\",]"}) {
    EXPECT_THROW(parse_compile_flags_json(text), Error) << text;
  }
}

TEST(CompileFlagsParse, AcceptsAnyWhitespaceJsonAllows) {
  // A hand-edited or differently formatted file still parses; its key is another matter.
  EXPECT_EQ(parse_compile_flags_json("[\n  \"-O2\",\"--target=trn1\"\n]"),
            (std::vector<std::string>{"-O2", "--target=trn1"}));
}

std::string flags_vector_name(const testing::TestParamInfo<size_t>& info) {
  std::string flags = flags_vectors().at(info.param).at("compile_flags_json").get<std::string>();
  std::string name = sanitize(flags);
  return "v" + std::to_string(info.param) + (name.empty() ? "" : "_") + name;
}

INSTANTIATE_TEST_SUITE_P(Vectors, FlagsVector, testing::ValuesIn(indices(flags_vectors())),
                         flags_vector_name);

}  // namespace
}  // namespace neuron_cache
