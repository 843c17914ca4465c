// Hostile index content in a shared cache repo (issue 11): an attacker with write access to the
// repo commits index shards of their own making. Each test pushes two real configurations with
// `ci` (the stand-in compiler), rewrites the entry of one of them ("victim") on the Hub as an
// attacker would, then runs the tool on an empty cache: the victim must never install anything
// it did not verify, and the other configuration ("good") must still come from the Hub.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "hub_fixture.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::read_file;
using testing::TempDir;
using testing::ToolResult;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kVersion = testing::kTestCompilerVersion;
constexpr const char* kRepo = testing::kTestCacheRepo;
constexpr const char* kLlama = "meta-llama/Llama-3.2-1B";
const std::string kCompiler = testing::kCompilerDir;

json hub_config() {
  return testing::cache_hub_config(
      kRepo, {{kLlama, {{"config.json", R"({"model_type": "llama", "hidden_size": 2048})"}}}});
}

// Two configurations of one model with distinct batch sizes: they share no MODULE_ folder.
std::string manifest_text() {
  return testing::stand_in_manifest({{kLlama, {{"good", 1}, {"victim", 2}}}});
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

bool is_download_of(const json& e, const std::string& part) {
  std::string path = e["path"].get<std::string>();
  return e["method"] == "GET" && contains(path, part);
}

class HostileIndexTest : public ::testing::Test {
 protected:
  HostileIndexTest() : server(hub_config()) {}

  void SetUp() override {
    manifest = work / "neuron-cache.yaml";
    write_file(manifest, manifest_text());
    ToolResult ci = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
    ASSERT_EQ(ci.code, 0) << ci.all();
    shard_path = artifact_index::remote_shard_path(kVersion, kLlama);
    auto text = client().read_file(kRepo, shard_path);
    ASSERT_TRUE(text.has_value()) << "no shard " << shard_path;
    shard = json::parse(*text);
    for (const auto& [key, entry] : shard["entries"].items()) {
      keys[entry["configuration"].get<std::string>()] = key;
    }
    ASSERT_EQ(keys.size(), 2u) << shard.dump(1);
  }

  ToolResult tool(const std::string& args, const fs::path& cache_dir = {}) {
    return testing::ToolRunner(work.path(), home.path(), server.url(), cache)
        .run(args, "", cache_dir);
  }

  hub::HubClient client() const {
    hub::ClientOptions options;
    options.endpoint = server.url();
    options.token = testing::kHubWriteToken;
    return hub::HubClient(options);
  }

  json& victim() { return shard["entries"][keys["victim"]]; }
  json& good() { return shard["entries"][keys["good"]]; }

  // The victim's module holding model.neff (its first one) and that file's record.
  json& victim_neff() {
    for (auto& module : victim()["modules"]) {
      for (auto& file : module["files"]) {
        if (file["name"] == "model.neff") return file;
      }
    }
    throw std::runtime_error("no model.neff in the victim entry");
  }
  json& victim_file(const std::string& name) {
    for (auto& file : victim()["modules"][0]["files"]) {
      if (file["name"] == name) return file;
    }
    throw std::runtime_error("no " + name + " in the victim's first module");
  }

  // Commits `text` as the model's shard, as an attacker with write access would.
  void publish(const std::string& text) {
    fs::path local = work / ("hostile-" + std::to_string(published_++) + ".json");
    write_file(local, text);
    client().commit(kRepo, {{hub::CommitOperation::Kind::Add, shard_path, local}}, "hostile",
                    std::nullopt);
  }
  void publish() { publish(shard.dump()); }

  // A fresh, empty cache folder.
  fs::path fresh() { return work / ("fresh-" + std::to_string(fresh_++)); }

  static bool installed(const fs::path& root, const json& entry) {
    std::string key = entry["key"];
    if (!fs::exists(root / artifact_index::local_entry_path(kVersion, key))) return false;
    for (const auto& module : entry["modules"]) {
      fs::path dir = root / kCompiler / module["name"].get<std::string>();
      for (const auto& file : module["files"]) {
        std::error_code error;
        if (fs::file_size(dir / file["name"].get<std::string>(), error) != file["size"] || error)
          return false;
      }
    }
    return true;
  }

  // The victim has no local entry and its first module, the one the tests make hostile, is not
  // in `root` (its other, valid module may be: its bytes were verified).
  bool victim_absent(const fs::path& root) {
    if (fs::exists(root / artifact_index::local_entry_path(kVersion, keys["victim"]))) return false;
    std::string name = victim()["modules"][0]["name"];
    return name.size() > 200 || (!fs::exists(root / kCompiler / name / "model.neff") &&
                                 !fs::exists(root / kCompiler / name / "model.done"));
  }

  // Runs prefetch on an empty cache and checks the outcome every hostile victim must have: exit
  // 0, the good configuration installed, nothing of the victim's, and `warning` said.
  ToolResult prefetch_expecting_miss(const std::string& warning) {
    fs::path root = fresh();
    ToolResult run = tool("prefetch " + quoted(manifest), root);
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_TRUE(installed(root, good())) << "the good configuration still prefetches\n"
                                         << run.all();
    EXPECT_TRUE(victim_absent(root)) << run.all();
    EXPECT_TRUE(contains(run.all(), warning)) << "expected: " << warning << "\n" << run.all();
    EXPECT_FALSE(contains(run.all(), "File name too long")) << run.all();
    EXPECT_FALSE(contains(run.all(), "filesystem error")) << run.all();
    last_root = root;
    return run;
  }

  HubServer server;
  TempDir home;
  TempDir work;
  fs::path cache = work / "cache";
  fs::path manifest;
  std::string shard_path;
  json shard;
  std::map<std::string, std::string> keys;  // configuration -> key
  fs::path last_root;

  int published_ = 0;
  int fresh_ = 0;
};

// --- numbers ---------------------------------------------------------------------------------

class HostileIndexNumbers : public HostileIndexTest {};

// Sizes no NEFF has, and sizes that disagree with the Hub's file: a bytes count that was not
// checked is never installed.
TEST_F(HostileIndexNumbers, ImpossibleOrWrongSizesNeverInstall) {
  const json original = shard;
  const std::string neff_sha = victim_neff()["sha256"];
  const uint64_t neff_size = victim_neff()["size"];
  struct Variant {
    uint64_t size;
    std::string sha256;
    std::string warning;
  };
  const std::vector<Variant> variants = {
      {UINT64_MAX, neff_sha, "is above 1 TiB"},
      {1ull << 62, neff_sha, "is above 1 TiB"},
      {0, sha256_hex(""), "the index entry and the Hub disagree"},  // an empty file for a NEFF
      {neff_size - 1, neff_sha, "the index entry and the Hub disagree"},
      {neff_size + 1, neff_sha, "the index entry and the Hub disagree"},
  };
  for (const auto& variant : variants) {
    SCOPED_TRACE(variant.size);
    shard = original;
    victim_neff()["size"] = variant.size;
    victim_neff()["sha256"] = variant.sha256;
    publish();
    server.clear_log();
    ToolResult run = prefetch_expecting_miss(variant.warning);
    EXPECT_TRUE(contains(run.all(), "model.neff")) << run.all();
    if (variant.size > neff_size + 1) {
      EXPECT_TRUE(contains(run.all(), keys["victim"])) << "the entry is named\n" << run.all();
      EXPECT_EQ(testing::count_requests(server.access_log(),
                                        [&](const json& e) { return is_download_of(e, neff_sha); }),
                0u);
    }
  }
}

// Requests follow the bytes that exist, not the size an entry claims: a NEFF said to be 1 TiB
// (the largest allowed) costs the first parts' requests, not one per 64 MiB part; an entry that
// lists thousands of missing folders stops at its first failed batch.
TEST_F(HostileIndexNumbers, RequestsFollowTheBytesThatExist) {
  const json original = shard;
  const std::string neff_sha = victim_neff()["sha256"];
  victim_neff()["size"] = 1ull << 40;
  publish();
  server.clear_log();
  prefetch_expecting_miss("the index entry and the Hub disagree");
  // The resolve, the 8 parts in flight when the first one fails, and what a busy machine lets
  // start before the failure is seen (11 was measured once under load): a bound of twice the
  // transfers at once, against the 16,384 parts a 1 TiB claim would ask for.
  EXPECT_LE(testing::count_requests(server.access_log(),
                                    [&](const json& e) { return is_download_of(e, "model.neff"); }),
            2u * 8 + 2);

  shard = original;
  std::string tail = victim()["modules"][0]["name"].get<std::string>();
  tail = tail.substr(tail.find('+'));
  json module = victim()["modules"][0];
  for (int i = 0; i < 3000; ++i) {
    module["name"] = "MODULE_" + std::to_string(900000 + i) + tail;
    victim()["modules"].push_back(module);
  }
  publish();
  server.clear_log();
  fs::path root = fresh();
  ToolResult run = tool("prefetch " + quoted(manifest), root);
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_TRUE(installed(root, good())) << run.all();
  EXPECT_FALSE(fs::exists(root / artifact_index::local_entry_path(kVersion, keys["victim"])));
  EXPECT_TRUE(contains(run.all(), "does not exist")) << run.all();
  EXPECT_LE(testing::count_requests(server.access_log(),
                                    [&](const json& e) { return is_download_of(e, "MODULE_9"); }),
            200u);
}

TEST_F(HostileIndexNumbers, ARegularFileOfTheWrongSizeIsTheIndexEntrysFault) {
  json& flags = victim_file("compile_flags.json");
  flags["size"] = flags["size"].get<uint64_t>() - 1;
  publish();
  ToolResult run = prefetch_expecting_miss("the index entry and the Hub disagree");
  EXPECT_TRUE(contains(run.all(), "compile_flags.json")) << run.all();
}

// A traced export folder (any file names) named MODULE_<20 hex> from `n`.
json traced_module(int n, size_t files) {
  char hex[21];
  std::snprintf(hex, sizeof hex, "%020x", n + 1);
  json list = json::array({{{"name", "config.json"}, {"size", 2}, {"sha256", sha256_hex("{}")}},
                           {{"name", "model.neuron"}, {"size", 1}, {"sha256", sha256_hex("x")}}});
  for (size_t i = 2; i < files; ++i) {
    list.push_back({{"name", "f" + std::to_string(i) + ".bin"},
                    {"size", 1},
                    {"sha256", sha256_hex(std::to_string(i))}});
  }
  return {{"name", std::string("MODULE_") + hex}, {"files", list}};
}

// Modules, files and bytes of one entry are bounded, each with its own message, and an entry
// beyond a bound costs no request.
TEST_F(HostileIndexNumbers, WhatOneEntryHoldsIsBoundedBeforeAnyRequest) {
  const json original = shard;
  std::string tail = victim()["modules"][0]["name"].get<std::string>();
  tail = tail.substr(tail.find('+'));

  // 100,000 modules.
  json modules = json::array();
  for (int m = 0; m < 100000; ++m) {
    modules.push_back(
        {{"name", "MODULE_" + std::to_string(m) + tail},
         {"files",
          json::array({{{"name", "model.neff"}, {"size", 1}, {"sha256", sha256_hex("")}}})}});
  }
  victim()["modules"] = modules;
  publish();
  server.clear_log();
  prefetch_expecting_miss("100000 modules in one entry");
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [&](const json& e) {
                                      return is_download_of(e, "MODULE_99") ||
                                             is_download_of(e, "MODULE_0%2B");
                                    }),
            0u);

  // Three NEFFs of 1 TiB each: every one within the bound of a file, the entry above its own.
  shard = original;
  for (int i = 0; i < 3; ++i) {
    json module = original["entries"][keys["victim"]]["modules"][0];
    std::string name = module["name"];
    module["name"] = name.substr(0, name.size() - 1) + std::to_string(i);
    for (auto& file : module["files"]) {
      if (file["name"] == "model.neff") file["size"] = 1ull << 40;
    }
    victim()["modules"].push_back(module);
  }
  publish();
  prefetch_expecting_miss("bytes in one entry");

  // 60 folders of 1,000 files each: every list within its bound, the entry above its own.
  shard = original;
  for (int m = 0; m < 60; ++m) victim()["modules"].push_back(traced_module(m, 1000));
  publish();
  server.clear_log();
  prefetch_expecting_miss("files in one entry");
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [&](const json& e) { return is_download_of(e, "f2.bin"); }),
            0u);
}

// --- names -----------------------------------------------------------------------------------

class HostileIndexNames : public HostileIndexTest {};

TEST_F(HostileIndexNames, ModuleNamesFollowLibneuronxla) {
  const json original = shard;
  std::string real = victim()["modules"][0]["name"];
  std::string key = real.substr(7, real.find('+') - 7);
  const std::vector<std::string> names = {
      "MODULE_" + std::string(5000, 'a') + "+12345678",  // too long for any filesystem
      "MODULE_" + key + "+1234567",                      // flags key not 8 hex
      "MODULE_" + key + "+1234567G",
      "MODULE_+12345678",                // no graph key
      "MODULE_" + key + "\n+12345678",   // a newline
      "MODULE_" + key + "\\x+12345678",  // a backslash
      "MODULE_" + key + "\x01+12345678",
      "MODULE_a b+12345678",
  };
  for (const auto& name : names) {
    SCOPED_TRACE(name.substr(0, 60));
    shard = original;
    victim()["modules"][0]["name"] = name;
    publish();
    prefetch_expecting_miss("is not a MODULE_ folder name");
  }
}

TEST_F(HostileIndexNames, FileNamesFollowLibneuronxla) {
  const json original = shard;
  const std::vector<std::string> names = {
      std::string(5000, 'f'),          // far too long
      std::string(300, 'f') + ".bin",  // too long for one file name
      "model\n.neff",
      "model\\x.neff",
      "model\x7f.neff",
      "sub/model.neff",  // a plain MODULE_ folder is flat
      "model.bin",       // not a file libneuronxla writes
  };
  for (const auto& name : names) {
    SCOPED_TRACE(name.substr(0, 60));
    shard = original;
    victim_neff()["name"] = name;
    publish();
    prefetch_expecting_miss("not a file of a MODULE_ folder");
  }
}

TEST_F(HostileIndexNames, ALongConfigurationNameIsRefusedAndTheOthersStillPlan) {
  victim()["configuration"] = std::string(5000, 'c');
  publish();
  ToolResult plan = tool("plan --json " + quoted(manifest), fresh());
  ASSERT_EQ(plan.code, 0) << plan.all();
  json rows = json::parse(plan.out)["configurations"];
  for (const auto& row : rows) {
    EXPECT_EQ(row["status"] == "store", row["name"] == "good") << row.dump();
  }
  EXPECT_TRUE(contains(plan.err, "configuration name")) << plan.all();
  prefetch_expecting_miss("configuration name");
}

// --- duplicates ------------------------------------------------------------------------------

class HostileIndexDuplicates : public HostileIndexTest {
 protected:
  // prefetch --export-dir on an empty cache: the good configuration exports, the victim is a
  // miss with `warning`.
  void export_expecting_miss(const std::string& warning) {
    ToolResult run = prefetch_expecting_miss(warning);
    fs::path out = work / ("export-" + std::to_string(exports_++));
    ToolResult again =
        tool("prefetch " + quoted(manifest) + " --export-dir " + quoted(out), last_root);
    EXPECT_EQ(again.code, 0) << again.all();
    EXPECT_FALSE(contains(again.all(), "filesystem error")) << again.all();
    EXPECT_TRUE(fs::exists(out / "good" / kCompiler)) << again.all();
    EXPECT_FALSE(fs::exists(out / "victim")) << again.all();
  }
  int exports_ = 0;
};

// Records listed twice never reach --export-dir as a raw "cannot create symlink: File exists":
// the entry is refused with what it repeats, and the valid configuration still exports. Folders
// shared by two entries are no duplicate.
TEST_F(HostileIndexDuplicates, RecordsListedTwiceAreRefusedAndTheOthersExport) {
  const json original = shard;
  {
    SCOPED_TRACE("a module twice in one entry");
    json copy = victim()["modules"][0];
    victim()["modules"].push_back(copy);
    publish();
    export_expecting_miss("lists " + victim()["modules"][0]["name"].get<std::string>() + " twice");
  }
  {
    SCOPED_TRACE("a file twice in one module");
    shard = original;
    json& files = victim()["modules"][0]["files"];
    json copy = files[0];
    files.push_back(copy);
    publish();
    export_expecting_miss("lists " + files[0]["name"].get<std::string>() + " twice");
  }
  {
    // Two entries naming the same folders, as configurations sharing a graph do: both are
    // valid, both prefetch and both export.
    SCOPED_TRACE("two entries naming the same module");
    shard = original;
    for (const auto& module : good()["modules"]) victim()["modules"].push_back(module);
    publish();
    fs::path root = fresh();
    fs::path out = work / "export-shared";
    ToolResult run = tool("prefetch " + quoted(manifest) + " --export-dir " + quoted(out), root);
    EXPECT_EQ(run.code, 0) << run.all();
    EXPECT_FALSE(contains(run.all(), "filesystem error")) << run.all();
    EXPECT_TRUE(installed(root, good())) << run.all();
    EXPECT_TRUE(installed(root, victim())) << run.all();
    for (const auto& module : good()["modules"]) {
      std::string name = module["name"];
      EXPECT_TRUE(fs::exists(out / "good" / kCompiler / name / "model.neff")) << name;
      EXPECT_TRUE(fs::exists(out / "victim" / kCompiler / name / "model.neff")) << name;
    }
  }
}

// --- an index entry that disagrees with the Hub ----------------------------------------------

class HostileIndexChecksums : public HostileIndexTest {};

TEST_F(HostileIndexChecksums, AnLfsFileMatchingTheHubButNotTheEntryIsTheEntrysFault) {
  json& neff = victim_neff();
  const std::string hub_sha = neff["sha256"];
  neff["sha256"] = sha256_hex("something else");
  publish();
  server.clear_log();
  ToolResult run = prefetch_expecting_miss("the index entry is wrong");
  EXPECT_TRUE(contains(run.all(), keys["victim"].substr(0, 12)) || contains(run.all(), "victim"))
      << run.all();
  EXPECT_TRUE(contains(run.all(), "model.neff")) << run.all();
  EXPECT_FALSE(contains(run.all(), "corrupted in transit")) << run.all();
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [&](const json& e) {
                                      return e["listener"] == "cdn" && is_download_of(e, hub_sha);
                                    }),
            1u)
      << "no retry: the bytes were right";
}

TEST_F(HostileIndexChecksums, ARegularFileMatchingTheHubButNotTheEntryIsTheEntrysFault) {
  json& flags = victim_file("compile_flags.json");
  flags["sha256"] = sha256_hex("something else");
  publish();
  server.clear_log();
  ToolResult run = prefetch_expecting_miss("the index entry is wrong");
  EXPECT_TRUE(contains(run.all(), "compile_flags.json")) << run.all();
  EXPECT_FALSE(contains(run.all(), "corrupted in transit")) << run.all();
  std::string module = victim()["modules"][0]["name"];
  EXPECT_EQ(testing::count_requests(server.access_log(),
                                    [&](const json& e) {
                                      return is_download_of(e, module.substr(0, 20)) &&
                                             is_download_of(e, "compile_flags.json") &&
                                             !testing::is_redirect_hop(e);
                                    }),
            1u)
      << "no retry: the bytes were right (the Hub's same-host redirect is one download)";
}

// A right entry and a Hub answer that lies about the size: the message names both sides and
// blames neither, and the bytes are not installed.
TEST_F(HostileIndexChecksums, AHubAnswerOfAnotherSizeIsNotBlamedOnTheEntry) {
  std::string module = victim()["modules"][0]["name"];
  server.set_faults(json::array(
      {{{"match",
         {{"path_contains", module + "/model.neff"}, {"listener", "hub"}, {"method", "GET"}}},
        {"count", -1},
        {"action", "status"},
        {"status", 200},
        {"headers", {{"X-Linked-Size", "5"}}},
        {"body", "abc"}}}));
  ToolResult run = prefetch_expecting_miss("the index entry and the Hub disagree");
  server.clear_faults();
  EXPECT_TRUE(contains(run.all(), "the Hub's answer says")) << run.all();
  EXPECT_FALSE(contains(run.all(), "the index entry is wrong")) << run.all();
}

// A body shorter than the file, well framed (its Content-Length says the short length) while the
// entry is right: a transfer fault, resumed and verified, and everything is installed.
TEST_F(HostileIndexChecksums, AShortButWellFramedBodyIsResumedNotBlamedOnTheEntry) {
  std::string module = victim()["modules"][0]["name"];
  server.set_faults(json::array(
      {{{"match",
         {{"path_contains", module + "/model.neff"}, {"listener", "hub"}, {"method", "GET"}}},
        {"action", "status"},
        {"status", 200},
        {"body", "abc"}}}));
  fs::path root = fresh();
  ToolResult run = tool("prefetch " + quoted(manifest), root);
  server.clear_faults();
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_TRUE(installed(root, good())) << run.all();
  EXPECT_TRUE(installed(root, victim())) << run.all();
  EXPECT_FALSE(contains(run.all(), "disagree")) << run.all();
}

// The index file itself: a body damaged once in transit is fetched again (its listed id is
// checked); one damaged every time, or one that is no index at all, is skipped as a whole, says
// so, and its configurations count as not cached: nothing is installed from it, exit 0.
class HostileIndexFile : public HostileIndexTest {};

TEST_F(HostileIndexFile, ADamagedOrInvalidIndexFileIsRefetchedOrSkippedAsAWhole) {
  std::string shard_file = shard_path.substr(shard_path.rfind('/') + 1);
  server.set_faults(json::array(
      {{{"match", {{"path_contains", shard_file}}}, {"action", "corrupt"}, {"offset", 10}}}));
  fs::path once = fresh();
  ToolResult refetched = tool("prefetch " + quoted(manifest), once);
  ASSERT_EQ(refetched.code, 0) << refetched.all();
  EXPECT_TRUE(installed(once, good())) << refetched.all();
  EXPECT_TRUE(installed(once, victim())) << refetched.all();

  server.set_faults(json::array({{{"match", {{"path_contains", shard_file}}},
                                  {"count", -1},
                                  {"action", "corrupt"},
                                  {"offset", 10}}}));
  fs::path always = fresh();
  ToolResult damaged = tool("prefetch " + quoted(manifest), always);
  server.clear_faults();
  EXPECT_EQ(damaged.code, 0) << damaged.all();
  EXPECT_TRUE(contains(damaged.all(), "could not be fetched intact")) << damaged.all();
  EXPECT_FALSE(contains(damaged.all(), "skipped an index entry")) << damaged.all();
  EXPECT_FALSE(installed(always, good()));

  publish("{\"format\": 2, \"entries\": [");
  fs::path invalid = fresh();
  ToolResult skipped = tool("prefetch " + quoted(manifest), invalid);
  EXPECT_EQ(skipped.code, 0) << skipped.all();
  EXPECT_TRUE(contains(skipped.all(),
                       "skipped a whole index file: " + std::string(kRepo) + "/" + shard_path))
      << skipped.all();
  EXPECT_FALSE(contains(skipped.all(), "skipped an index entry")) << skipped.all();
  EXPECT_FALSE(installed(invalid, good()));
}

// --- integrity: nothing incomplete is ever called complete -------------------------------------

class HostileIndexIntegrity : public HostileIndexTest {
 protected:
  // Keeps only the victim's first module's files for which `keep` says yes.
  void keep_victim_files(const std::function<bool(const std::string&)>& keep) {
    json kept = json::array();
    for (const auto& file : victim()["modules"][0]["files"]) {
      if (keep(file["name"].get<std::string>())) kept.push_back(file);
    }
    victim()["modules"][0]["files"] = kept;
  }

  // `ci` on a fresh cache after a prefetch from it: the victim is compiled, the good one is not.
  void ci_compiles_the_victim_only() {
    fs::path out = work / ("out-" + std::to_string(fresh_));
    ToolResult ci = tool("ci " + quoted(manifest) + " --read-only --output-dir " + quoted(out) +
                             " --report " + quoted(out / "report.json"),
                         last_root);
    ASSERT_EQ(ci.code, 0) << ci.all();
    json report = json::parse(read_file(out / "report.json"));
    for (const auto& row : report["configurations"]) {
      EXPECT_EQ(row["outcome"] == "compiled", row["name"] == "victim") << row.dump();
    }
  }
};

// A MODULE_ folder listed with only model.done, or with every file but model.neff, is a miss
// with a warning: nothing of it is installed (no model.done is made up locally), and `ci` compiles
// it instead of calling it fetched.
TEST_F(HostileIndexIntegrity, AFolderListedWithoutItsNeffIsAMissAndGetsCompiled) {
  const json original = shard;
  const std::vector<std::pair<std::string, std::function<bool(const std::string&)>>> cases = {
      {"only model.done", [](const std::string& name) { return name == "model.done"; }},
      {"all but model.neff", [](const std::string& name) { return name != "model.neff"; }},
      {"all but model.done", [](const std::string& name) { return name != "model.done"; }},
  };
  for (const auto& [what, keep] : cases) {
    SCOPED_TRACE(what);
    shard = original;
    keep_victim_files(keep);
    publish();
    prefetch_expecting_miss("lists no model.neff or no model.done");
    ci_compiles_the_victim_only();
  }
  {
    SCOPED_TRACE("only model.done, for a folder the store does not have");
    shard = original;
    keep_victim_files([](const std::string& name) { return name == "model.done"; });
    victim()["modules"][0]["name"] = "MODULE_1234567890+abcdef12";
    publish();
    server.clear_log();
    prefetch_expecting_miss("lists no model.neff or no model.done");
    EXPECT_FALSE(fs::exists(last_root / kCompiler / "MODULE_1234567890+abcdef12"));
    EXPECT_EQ(testing::count_requests(server.access_log(),
                                      [](const json& e) {
                                        return contains(e["path"].get<std::string>(),
                                                        "MODULE_1234567890");
                                      }),
              0u);
  }
  {
    SCOPED_TRACE("a model.done that is not the empty marker");
    shard = original;
    victim_file("model.done")["size"] = 3;
    victim_file("model.done")["sha256"] = sha256_hex("abc");
    publish();
    prefetch_expecting_miss("libneuronxla's marker is empty");
  }
}

// Two entries that describe one folder differently get one verdict, the same on every run: the
// folder is trusted for neither, whatever is installed meanwhile.
TEST_F(HostileIndexIntegrity, EntriesThatDisagreeAboutAFolderGetOneVerdictEveryRun) {
  json shared = good()["modules"][0];
  for (auto& file : shared["files"]) {
    if (file["name"] == "model.neff") file["size"] = file["size"].get<uint64_t>() + 1;
  }
  victim()["modules"].push_back(shared);
  publish();
  fs::path root = fresh();
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    ToolResult prefetch = tool("prefetch " + quoted(manifest), root);
    EXPECT_EQ(prefetch.code, 0) << prefetch.all();
    EXPECT_TRUE(contains(prefetch.all(), "disagree about the files of")) << prefetch.all();
    EXPECT_TRUE(contains(prefetch.all(), keys["good"])) << prefetch.all();
    EXPECT_TRUE(contains(prefetch.all(), keys["victim"])) << prefetch.all();
    EXPECT_FALSE(installed(root, victim())) << prefetch.all();
    EXPECT_FALSE(fs::exists(root / artifact_index::local_entry_path(kVersion, keys["good"])));
  }
}

// A module name of the longest length allowed (255 bytes) installs: staging names do not grow
// with it, and the other configuration of the run is installed too.
TEST_F(HostileIndexIntegrity, AModuleNameOfTheMaximumLengthInstalls) {
  json& module = victim()["modules"][0];
  const std::string old_name = module["name"];
  const std::string flags = old_name.substr(old_name.find('+'));
  const std::string name = "MODULE_" + std::string(255 - 7 - flags.size(), '9') + flags;
  std::vector<hub::CommitOperation> copies;
  for (const auto& file : module["files"]) {
    std::string base = file["name"];
    auto content = client().read_file(kRepo, kCompiler + "/" + old_name + "/" + base);
    ASSERT_TRUE(content) << base;
    fs::path local = work / ("copy-" + base);
    write_file(local, *content);
    copies.push_back({hub::CommitOperation::Kind::Add, kCompiler + "/" + name + "/" + base, local});
  }
  client().commit(kRepo, copies, "a module with a 255-byte name", std::nullopt);
  module["name"] = name;
  publish();
  fs::path root = fresh();
  ToolResult run = tool("prefetch " + quoted(manifest), root);
  EXPECT_EQ(run.code, 0) << run.all();
  EXPECT_FALSE(contains(run.all(), "File name too long")) << run.all();
  EXPECT_TRUE(installed(root, good())) << run.all();
  EXPECT_TRUE(installed(root, victim())) << run.all();
  EXPECT_EQ(read_file(root / kCompiler / name / "model.done"), "");
}

}  // namespace
}  // namespace neuron_cache
