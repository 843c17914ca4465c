// CPython's json and hashlib as the oracle, on random documents in both directions: Python
// writes random documents that pyjson must re-serialize byte for byte, and pyjson writes random
// documents that Python must read back and re-serialize to the same bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"

namespace neuron_cache {
namespace {

using pyjson::Json;

constexpr int kDocsPerSeed = 300;
constexpr int kEntriesPerSeed = 150;
// After this many mismatches in one test the rest would only repeat the same bug.
constexpr int kMaxReportedMismatches = 5;

std::string shell_quote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

struct CommandResult {
  std::string output;
  int status = -1;
};

CommandResult run(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[65536];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  result.status = pclose(pipe);
  return result;
}

std::string oracle_command(const std::string& arguments) {
  return shell_quote(NEURON_CACHE_PYTHON) + " " +
         shell_quote(std::string(NEURON_CACHE_TESTS_DIR) + "/oracle/random_docs.py") + " " +
         arguments;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// The oracle's JSON lines for one mode and seed; a failure if Python could not produce them.
std::vector<Json> oracle_records(const std::string& mode, int seed, int count) {
  CommandResult result =
      run(oracle_command(mode + " " + std::to_string(seed) + " " + std::to_string(count)));
  EXPECT_EQ(result.status, 0) << "python oracle failed";
  std::vector<Json> records;
  for (const std::string& line : split(result.output, '\n')) records.push_back(pyjson::parse(line));
  EXPECT_EQ(records.size(), static_cast<size_t>(count));
  return records;
}

std::string field(const Json& record, const char* name) {
  return record.at(name).get<std::string>();
}

// Checks one Python document; returns false on a mismatch.
bool doc_matches(const Json& record, size_t index) {
  Json doc = pyjson::parse(field(record, "input"));
  std::string indented = pyjson::dumps(doc, 2);
  std::string compact = pyjson::dumps(doc);
  bool ok = indented == field(record, "indented") && compact == field(record, "compact") &&
            sha512_hex(indented).substr(0, 20) == field(record, "sha512_20") &&
            sha256_hex(compact) == field(record, "sha256") &&
            md5_hex(compact).substr(0, 8) == field(record, "md5_8");
  EXPECT_TRUE(ok) << "document " << index << ": " << field(record, "input")
                  << "\n  python indented: " << field(record, "indented")
                  << "\n  pyjson indented: " << indented
                  << "\n  python compact:  " << field(record, "compact")
                  << "\n  pyjson compact:  " << compact;
  return ok;
}

bool entry_matches(const Json& record, size_t index) {
  Json entry = pyjson::parse(field(record, "input"));
  std::string serialized = registry::serialize(entry);
  std::string arch_compact = pyjson::dumps(registry::arch_input(entry));
  bool ok = serialized == field(record, "serialized") &&
            registry::entry_hash(serialized) == field(record, "entry_hash") &&
            arch_compact == field(record, "arch_compact") &&
            registry::arch_digest(entry) == field(record, "arch_digest");
  EXPECT_TRUE(ok) << "entry " << index << ": " << field(record, "input")
                  << "\n  python serialized: " << field(record, "serialized")
                  << "\n  pyjson serialized: " << serialized
                  << "\n  python arch: " << field(record, "arch_compact")
                  << "\n  pyjson arch: " << arch_compact;
  return ok;
}

class PythonDocs : public testing::TestWithParam<int> {};

TEST_P(PythonDocs, DumpsAndHashesMatchPython) {
  std::vector<Json> records = oracle_records("docs", GetParam(), kDocsPerSeed);
  int mismatches = 0;
  for (size_t i = 0; i < records.size() && mismatches < kMaxReportedMismatches; ++i) {
    if (!doc_matches(records[i], i)) ++mismatches;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PythonDocs, testing::Values(1, 2, 3));

class PythonEntries : public testing::TestWithParam<int> {};

TEST_P(PythonEntries, SerializeHashAndDigestMatchPython) {
  std::vector<Json> records = oracle_records("entries", GetParam(), kEntriesPerSeed);
  int mismatches = 0;
  for (size_t i = 0; i < records.size() && mismatches < kMaxReportedMismatches; ++i) {
    if (!entry_matches(records[i], i)) ++mismatches;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PythonEntries, testing::Values(11, 12));

// ---------------------------------------------------------------------------------------------
// Reverse direction: documents generated here, read by Python.

class RandomDocuments {
 public:
  explicit RandomDocuments(uint64_t seed) : rng_(seed) {}

  Json document() { return chance(0.2) ? value(5) : object(5); }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  uint64_t below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  uint32_t in_range(uint32_t low, uint32_t high) {
    return static_cast<uint32_t>(low + below(uint64_t{high} - low + 1));
  }

  uint32_t code_point() {
    double kind = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (kind < 0.45) return in_range(0x20, 0x7E);
    if (kind < 0.55) return in_range(0x00, 0x1F);
    if (kind < 0.60) return static_cast<unsigned char>("\"\\/\x7f"[below(4)]);
    if (kind < 0.75) return in_range(0x80, 0x7FF);
    if (kind < 0.88) return chance(0.5) ? in_range(0x800, 0xD7FF) : in_range(0xE000, 0xFFFF);
    if (kind < 0.97) return in_range(0x10000, 0x10FFFF);
    return in_range(0xD800, 0xDFFF);  // a lone surrogate, kept as WTF-8 like the parser does
  }

  // UTF-8, or WTF-8 for lone surrogates (3 bytes, like any other BMP code point).
  static void append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string text(int max_length) {
    std::string out;
    uint32_t previous = 0;
    for (uint64_t n = below(static_cast<uint64_t>(max_length) + 1); n > 0; --n) {
      uint32_t cp = code_point();
      // High then low surrogate would be read back by Python as one astral character.
      if (previous >= 0xD800 && previous <= 0xDBFF && cp >= 0xDC00 && cp <= 0xDFFF) cp = 'x';
      append(out, cp);
      previous = cp;
    }
    return out;
  }

  Json number() {
    switch (below(6)) {
      case 0:
        return static_cast<int64_t>(rng_());
      case 1:
        return static_cast<uint64_t>(rng_());
      case 2:
        return static_cast<int64_t>(below(2001)) - 1000;
      case 3: {
        const double kSpecial[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 5e-324, 1e16, 1e-05};
        return kSpecial[below(std::size(kSpecial))];
      }
      case 4: {
        uint64_t bits = rng_() & ((uint64_t{1} << 52) - 1);  // a subnormal
        double value;
        std::memcpy(&value, &bits, sizeof value);
        return chance(0.5) ? value : -value;
      }
      default: {
        uint64_t bits = rng_();
        double value;
        std::memcpy(&value, &bits, sizeof value);
        return value;
      }
    }
  }

  Json scalar() {
    switch (below(6)) {
      case 0:
      case 1:
        return text(12);
      case 2:
      case 3:
        return number();
      case 4:
        return chance(0.5);
      default:
        return nullptr;
    }
  }

  Json value(int depth) {
    if (depth <= 0 || chance(0.5)) return scalar();
    if (chance(0.5)) return object(depth - 1);
    Json array = Json::array();
    for (uint64_t n = below(6); n > 0; --n) array.push_back(value(depth - 1));
    return array;
  }

  Json object(int depth) {
    Json object = Json::object();
    for (uint64_t n = below(7); n > 0; --n) object[text(6)] = value(depth);
    return object;
  }

  std::mt19937_64 rng_;
};

std::filesystem::path temp_file(const std::string& stem) {
  return std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(getpid()) + ".txt");
}

// pyjson::dumps(doc, 2) of each document must be exactly what json.dumps(json.loads(text),
// indent=2, sort_keys=True) gives back.
void check_python_reads_back(uint64_t seed, int count) {
  RandomDocuments random(seed);
  std::vector<std::string> texts;
  for (int i = 0; i < count; ++i) texts.push_back(pyjson::dumps(random.document(), 2));
  std::filesystem::path path = temp_file("neuron-cache-oracle-" + std::to_string(seed));
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < texts.size(); ++i) out << (i > 0 ? "\x1e" : "") << texts[i];
  }
  CommandResult result = run(oracle_command("redump " + shell_quote(path.string())));
  std::filesystem::remove(path);
  ASSERT_EQ(result.status, 0) << "python could not read back the documents";
  std::vector<std::string> redumped = split(result.output, '\x1e');
  ASSERT_EQ(redumped.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size() && mismatches < kMaxReportedMismatches; ++i) {
    EXPECT_EQ(redumped[i], texts[i]) << "document " << i;
    if (redumped[i] != texts[i]) ++mismatches;
  }
}

TEST(PythonReadsPyjson, SeedOne) {
  check_python_reads_back(1, kDocsPerSeed);
}
TEST(PythonReadsPyjson, SeedTwo) {
  check_python_reads_back(0x5eed'2bad'c0de'0002, kDocsPerSeed);
}

}  // namespace
}  // namespace neuron_cache
