// Seeded mutation fuzzing of the readers of untrusted text: the manifest reader (YAML and
// inference-cache-config JSON), the artifact index parser (index files and entries from the Hub)
// and the registry parser (optimum-neuron's registry files from the Hub). Valid seeds are mutated
// (bit flips, truncation, duplication, huge numbers and strings, deep nesting, YAML aliases) and
// every case must either parse or throw the project's Error with a message: never another
// exception, never a crash, and never take long.
//
// A few thousand cases run by default (a few seconds); more with NEURON_CACHE_FUZZ_CASES, another
// run with NEURON_CACHE_FUZZ_SEED. A failure prints the seed and case number that reproduce it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "index_samples.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/storage/s3_xml.h"
#include "neuron_cache/sys/safe_dir.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace ai = artifact_index;

constexpr uint64_t kDefaultSeed = 20261201;
constexpr size_t kDefaultCases = 1000;  // per reader
// A case slower than this is a hang in the making (a parse of at most a few MB takes ms).
constexpr auto kMaxCaseTime = std::chrono::seconds(5);

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::strtoull(text, nullptr, 10);
}

// What the mutator splices in: values at the edges of what a reader accepts.
const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> words = {"18446744073709551616",
                                                 "-9223372036854775809",
                                                 "1e999999",
                                                 "-1e-999999",
                                                 "99999999999999999999999999999999999999",
                                                 "1.7976931348623157e309",
                                                 "NaN",
                                                 "-Infinity",
                                                 "-0",
                                                 "0x10",
                                                 "null",
                                                 "true",
                                                 "false",
                                                 "{}",
                                                 "[]",
                                                 "\"\"",
                                                 "\"\\ud800\"",
                                                 "\"\\u0000\"",
                                                 "\xff\xfe",
                                                 "\xc0\x80",
                                                 std::string("\0", 1),
                                                 "\"format\"",
                                                 "\"entries\"",
                                                 "\"modules\"",
                                                 "\"files\"",
                                                 "\"registry\"",
                                                 "\"inputs\"",
                                                 "\"_entry_class\"",
                                                 "\"MultiModelCacheEntry\"",
                                                 "\"neuron\"",
                                                 "\"unet\"",
                                                 "\"_task\"",
                                                 "\"sha256\"",
                                                 "\"size\"",
                                                 "models:",
                                                 "configurations:",
                                                 "- ",
                                                 "&a ",
                                                 "*a",
                                                 "<<: *a",
                                                 "!!binary ",
                                                 "!!python/object ",
                                                 "? ",
                                                 "---\n",
                                                 "...\n",
                                                 "{batch_size: 1}",
                                                 "\t",
                                                 "\n",
                                                 "\r\n",
                                                 ": ",
                                                 ", ",
                                                 "%YAML 1.2\n",
                                                 "'",
                                                 "\"",
                                                 "\\",
                                                 "#"};
  return words;
}

class Mutator {
 public:
  Mutator(uint64_t seed, size_t reader, size_t number) {
    std::seed_seq sequence{seed, static_cast<uint64_t>(reader), static_cast<uint64_t>(number)};
    random_.seed(sequence);
  }

  // 1 to 4 mutations of one of `seeds` (or of two spliced together).
  std::string input(const std::vector<std::string>& seeds) {
    std::string text = seeds[below(seeds.size())];
    if (below(8) == 0) {
      const std::string& other = seeds[below(seeds.size())];
      text = text.substr(0, below(text.size() + 1)) + other.substr(below(other.size() + 1));
    }
    // Mostly one mutation: more and nearly nothing parses any more.
    for (size_t n = below(4) == 0 ? 2 + below(3) : 1; n > 0; --n) mutate(text);
    return text;
  }

 private:
  size_t below(size_t bound) { return bound == 0 ? 0 : random_() % bound; }

  void mutate(std::string& text) {
    size_t at = below(text.size() + 1);
    switch (below(12)) {
      case 0:  // a bit flip
        if (!text.empty()) text[below(text.size())] ^= static_cast<char>(1 << below(8));
        break;
      case 1:  // any byte
        if (!text.empty()) text[below(text.size())] = static_cast<char>(below(256));
        break;
      case 2:  // truncation
        text.resize(at);
        break;
      case 3: {  // a slice duplicated
        size_t from = below(text.size() + 1);
        size_t length = below(std::min<size_t>(text.size() - from, 256) + 1);
        text.insert(at, text.substr(from, length));
        break;
      }
      case 4: {  // a slice removed
        text.erase(at, below(64));
        break;
      }
      case 5:  // a word of the dictionary
      case 6:
        text.insert(at, dictionary()[below(dictionary().size())]);
        break;
      case 7: {  // a word replaced by another: what was a string becomes a number, an object...
        size_t end = text.find_first_of(",}]\n", at);
        if (end == std::string::npos) end = text.size();
        text.replace(at, end - at, dictionary()[below(dictionary().size())]);
        break;
      }
      case 8:  // a huge number
        text.insert(at, std::string(1 + below(5000), '9'));
        break;
      case 9:  // a huge string
        // Now and then past the readers' size limits (a manifest is at most 1 MiB).
        text.insert(
            at,
            "\"" + std::string(below(16) == 0 ? (1 << 20) + below(1000) : below(5000), 'x') + "\"");
        break;
      case 10: {  // deep nesting, JSON or YAML flow style
        // Past the parsers' depth limits (pyjson 512 levels, yaml-cpp's 2000) now and then.
        size_t depth = 1 + below(below(4) == 0 ? 5000 : 300);
        const char* open[] = {"[", "{\"a\":", "- ", "{a: "};
        std::string prefix;
        for (const char* piece = open[below(4)]; depth > 0; --depth) prefix += piece;
        text.insert(at, prefix);
        break;
      }
      default: {  // YAML anchors and aliases, up to an alias bomb
        std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
        char name = 'a';
        for (size_t level = below(12); level > 0; --level, ++name) {
          std::string next(1, static_cast<char>(name + 1));
          std::string alias = "*" + std::string(1, name);
          bomb += next + ": &" + next + " [" + alias + ", " + alias + ", " + alias + ", " + alias +
                  ", " + alias + ", " + alias + ", " + alias + ", " + alias + ", " + alias + "]\n";
        }
        text.insert(at, bomb);
        break;
      }
    }
  }

  std::mt19937_64 random_;
};

// A printable excerpt of a failing input.
std::string excerpt(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 400)) {
    bool plain = c >= 0x20 && c < 0x7f;
    out += plain ? std::string(1, c) : "\\x" + std::to_string(static_cast<unsigned char>(c));
  }
  return out + (text.size() > 400 ? "... (" + std::to_string(text.size()) + " bytes)" : "");
}

// Runs the reader on many mutations of `seeds`; each case parses or throws Error.
void fuzz(const std::string& name, size_t reader, const std::vector<std::string>& seeds,
          const std::function<void(const std::string&)>& read) {
  const uint64_t seed = env_number("NEURON_CACHE_FUZZ_SEED", kDefaultSeed);
  const size_t cases = env_number("NEURON_CACHE_FUZZ_CASES", kDefaultCases);
  for (const auto& valid : seeds) ASSERT_NO_THROW(read(valid)) << name << " seed: " << valid;
  size_t parsed = 0;
  for (size_t number = 0; number < cases; ++number) {
    std::string input = Mutator(seed, reader, number).input(seeds);
    std::string again = "NEURON_CACHE_FUZZ_SEED=" + std::to_string(seed) + ", case " +
                        std::to_string(number) + " of " + name + " (run with at least " +
                        std::to_string(number + 1) + " NEURON_CACHE_FUZZ_CASES); input: ";
    auto start = std::chrono::steady_clock::now();
    try {
      read(input);
      ++parsed;
    } catch (const Error& error) {
      ASSERT_FALSE(std::string(error.what()).empty()) << again << excerpt(input);
    } catch (const std::exception& other) {
      FAIL() << "not the project's Error: " << other.what() << "\n" << again << excerpt(input);
    } catch (...) {
      FAIL() << "an exception that is not a std::exception\n" << again << excerpt(input);
    }
    ASSERT_LT(std::chrono::steady_clock::now() - start, kMaxCaseTime) << "too slow\n"
                                                                      << again << excerpt(input);
  }
  // Mutations that all fail to parse would only test the error paths.
  if (cases >= 500) {
    EXPECT_GT(parsed, cases / 200) << name << ": too few mutations still parse";
  }
  std::cout << name << ": " << parsed << " of " << cases << " cases parsed (seed " << seed << ")\n";
}

std::string vectors_file(const std::string& name) {
  std::ifstream in(std::string(NEURON_CACHE_VECTORS_DIR) + "/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The manifest test's full manifest: every field of the YAML grammar.
const std::string kManifest =
    testing::read_file(std::filesystem::path(NEURON_CACHE_TESTS_DIR) / "data/manifests/full.yaml");

constexpr const char* kAnchors = R"(instance_type: &trn trn1
models:
  - model_id: a/b
    revision: 0123456789abcdef0123456789abcdef01234567
    task: &task text-generation
    configurations:
      - {batch_size: 1, sequence_length: &seq 128, num_cores: &cores 2, precision: &p bf16}
      - {batch_size: 2, sequence_length: *seq, num_cores: *cores, precision: *p, instance_type: *trn}
)";

constexpr const char* kInferenceConfig = R"({
  "meta-llama/Llama-3.1-8B": [
    {"batch_size": 1, "sequence_length": 4096, "num_cores": 8, "auto_cast_type": "bf16",
     "instance_type": "trn2"},
    {"batch_size": 4, "sequence_length": 2048, "num_cores": 2, "auto_cast_type": "fp16"}
  ]
})";

TEST(Fuzz, ManifestReaderParsesOrSaysWhy) {
  fuzz("the YAML manifest reader", 0, {kManifest, kAnchors},
       [](const std::string& text) { manifest::parse_yaml(text, "fuzz.yaml"); });
  fuzz("the inference-cache-config reader", 1, {kInferenceConfig}, [](const std::string& text) {
    manifest::parse_inference_cache_config(text, "fuzz.json", std::string("trn1"));
  });
}

cache_key::KeyInputs key_inputs(const std::string& model_id) {
  return testing::sample_key_inputs(model_id);
}

ai::Entry entry_of(const std::string& model_id, int64_t batch) {
  cache_key::KeyInputs inputs = key_inputs(model_id);
  inputs.batch_size = batch;
  return testing::sample_index_entry(inputs, "conf-bs" + std::to_string(batch));
}

TEST(Fuzz, IndexParserParsesOrSaysWhy) {
  ai::IndexFile shard = ai::shard_for(key_inputs("meta-llama/Llama-3.1-8B"));
  for (int64_t batch : {1, 4}) {
    ai::Entry entry = entry_of("meta-llama/Llama-3.1-8B", batch);
    shard.entries.emplace(entry.key, entry);
  }
  ai::IndexFile legacy;
  legacy.format = ai::kLegacyFormat;
  ai::Entry other = entry_of("Qwen/Qwen2.5-0.5B", 8);
  legacy.entries.emplace(other.key, other);
  std::vector<std::string> seeds = {ai::serialize_index(shard), ai::serialize_index(legacy)};
  fuzz("the index parser", 2, seeds,
       [](const std::string& text) { ai::parse_index(text, "fuzz/index.json"); });
  fuzz("the index entry parser", 3, {ai::serialize_entry(other)},
       [](const std::string& text) { ai::parse_entry(text, "fuzz/entry.json"); });
}

TEST(Fuzz, RegistryParserParsesOrSaysWhy) {
  std::vector<std::string> seeds;
  for (const auto& vector : pyjson::parse(vectors_file("registry-entries.json")))
    seeds.push_back(vector["serialized"].get<std::string>());
  ASSERT_GE(seeds.size(), 10u);
  auto location = registry::locate("0.4.5/llama/meta-llama/Llama-3.1-8B/0123456789abcdef0123.json");
  ASSERT_TRUE(location);
  fuzz("the registry parser", 4, seeds, [&](const std::string& text) {
    registry::read_record(*location, text);
    try {
      // What inspect computes from a registry file: only for current entries, the others say
      // why with an Error (counted as parsed here, as read_record took them).
      registry::arch_digest(pyjson::parse(text));
    } catch (const Error&) {
    }
  });
}

TEST(Fuzz, S3XmlReaderParsesOrSaysWhy) {
  const std::vector<std::string> seeds = {
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>abc"
      "</NextContinuationToken><Contents><Key>p/neuronxcc-2/MODULE_1+abcdef01/model.neff</Key>"
      "<Size>1234</Size><ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag></Contents>"
      "<CommonPrefixes><Prefix>p/neuronxcc-2/</Prefix></CommonPrefixes></ListBucketResult>",
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><IsTruncated>false"
      "</IsTruncated></ListBucketResult>",
      "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>",
      "<InitiateMultipartUploadResult><UploadId>VXBsb2FkIElE</UploadId>"
      "</InitiateMultipartUploadResult>"};
  fuzz("the S3 XML reader", 5, seeds, [](const std::string& text) {
    // An error answer is read whatever else the text is; a case counts as parsed when it is a
    // listing page or an upload id.
    storage::s3xml::parse_error(text);
    try {
      storage::s3xml::parse_list_page(text);
      return;
    } catch (const Error&) {
    }
    if (text.find("<Error>") != std::string::npos) return;
    storage::s3xml::parse_upload_id(text);
  });
}

// The tool's own memos are best effort: whatever a file there holds, reading it never throws and
// never takes long; a damaged memo is as good as none.
TEST(Fuzz, MemoFilesAreReadOrIgnored) {
  testing::TempDir dir;
  const sys::RootedFile file(dir.path(), "memo.json");
  const std::vector<std::string> seeds = {
      R"({"repo": "acme/cache", "revision": "0123456789abcdef0123456789abcdef01234567",)"
      R"( "keys": ["k1", "k2"]})",
      R"({"revision": "r", "paths": {"a/b.json": {"path": "a/b.json", "directory": false,)"
      R"( "size": 12, "oid": "abc", "sha256": ""}, "c.json": null}})"};
  fuzz("the memo reader", 6, seeds, [&](const std::string& text) {
    testing::write_file(dir / "memo.json", text);
    std::optional<pyjson::Json> memo = pyjson::read_kept(file);
    if (!memo) throw input_error("not a memo");  // counted as not parsed
  });
}

}  // namespace
}  // namespace neuron_cache
