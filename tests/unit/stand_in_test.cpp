// The compiler stand-in (tests/tools/stand-in-export) follows libneuronxla's and optimum-neuron's
// cache contract: complete entries per graph, registry entries, cache hits, failures and flags.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/local/cache_tree.h"
#include "stand_in.h"

namespace neuron_cache::compile {
namespace {

using testing::contains;

std::set<std::string> file_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) names.insert(item.path().filename());
  return names;
}

TEST(StandIn, WritesOneCompleteEntryPerGraph) {
  TempDir tmp;
  StandIn stand_in(tmp);
  Config config;
  RunOutcome outcome = stand_in.run(config, tmp / "cache");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.start_error << stand_in.last_log();
  const std::set<std::string> complete = {"compile_flags.json", "model.done", "model.hlo_module.pb",
                                          "model.neff"};
  for (const auto& name : {ctx_module(config), tkg_module(config)}) {
    fs::path dir = tmp / "cache" / kCompiler / name;
    ASSERT_TRUE(fs::is_directory(dir)) << name << "\n" << stand_in.last_log();
    EXPECT_EQ(file_names(dir), complete);
    std::string flags = read_file(dir / "compile_flags.json");
    EXPECT_EQ(flags, flags_json());
    EXPECT_TRUE(name.ends_with("+" + flags_key(flags)));
    EXPECT_EQ(fs::file_size(dir / "model.neff"), 65536u);
    EXPECT_EQ(fs::file_size(dir / "model.hlo_module.pb"), 2048u);
    EXPECT_EQ(fs::file_size(dir / "model.done"), 0u);
  }
  local::CacheTree tree = local::LocalCache(tmp / "cache").scan("");
  ASSERT_EQ(tree.compilers.size(), 1u);
  ASSERT_EQ(tree.compilers[0].modules.size(), 2u);
  local::LocalCache cache(tmp / "cache");
  sys::SafeDir compiler_dir = sys::SafeDir::open(tmp / "cache" / tree.compilers[0].name);
  for (const auto& module : tree.compilers[0].modules) {
    EXPECT_EQ(module.state, layout::EntryState::Success);
    EXPECT_EQ(module.module.flags_key,
              cache.inspect_module(compiler_dir, module.name, true).flags_file_key);
  }
  EXPECT_TRUE(fs::exists(tmp / "out1" / "neuron_config.json"));
  EXPECT_TRUE(contains(read_file(tmp / "out1" / "model.neuron-info.txt"), ctx_module(config)));
}

TEST(StandIn, WritesTheRegistryEntryAndItsAliasOnce) {
  TempDir tmp;
  StandIn stand_in(tmp);
  ASSERT_EQ(stand_in.run(Config{}, tmp / "cache").exit_code, 0) << stand_in.last_log();
  local::LocalCache cache(tmp / "cache");
  sys::SafeDir compiler = sys::SafeDir::open(tmp / "cache" / kCompiler);
  std::vector<local::RegistryFile> files = cache.scan_registry(compiler);
  ASSERT_EQ(files.size(), 2u);
  const local::RegistryFile& primary = files[0].is_link ? files[1] : files[0];
  const local::RegistryFile& alias = files[0].is_link ? files[0] : files[1];
  ASSERT_TRUE(primary.record && alias.record) << primary.problem << alias.problem;
  EXPECT_TRUE(primary.record->hash_matches);
  EXPECT_EQ(primary.record->location.shape, registry::PathShape::ByArch);
  EXPECT_EQ(primary.record->model_id, "org/tiny");
  EXPECT_EQ(primary.record->task, "text-generation");
  EXPECT_EQ(primary.record->neuron.at("sequence_length"), 128);
  EXPECT_EQ(alias.path,
            "0_REGISTRY/0.4.5/llama/org/tiny/" + primary.record->location.hash + ".json");
  std::string text = read_file(compiler.path() / primary.path);
  EXPECT_EQ(primary.record->location.arch_digest, registry::arch_digest(pyjson::parse(text)));
  EXPECT_EQ(registry::serialize(pyjson::parse(text)), text);
  fs::path link_target = fs::read_symlink(compiler.path() / alias.path);
  EXPECT_TRUE(link_target.is_absolute());
  EXPECT_EQ(link_target, compiler.path() / primary.path);

  // optimum-neuron's quirk: a second entry of the same model gets no alias.
  Config longer;
  longer.sequence = 256;
  ASSERT_EQ(stand_in.run(longer, tmp / "cache").exit_code, 0);
  files = cache.scan_registry(compiler);
  EXPECT_EQ(files.size(), 3u);
  EXPECT_EQ(std::count_if(files.begin(), files.end(), [](auto& f) { return f.is_link; }), 1);
}

TEST(StandIn, ASecondRunOnlyHitsTheCache) {
  TempDir tmp;
  StandIn stand_in(tmp);
  Config config;
  ASSERT_EQ(stand_in.run(config, tmp / "cache").exit_code, 0);
  ASSERT_EQ(stand_in.run(config, tmp / "cache").exit_code, 0);
  EXPECT_TRUE(contains(stand_in.last_log(), "Using a cached neff for " + ctx_module(config)));
  auto calls = stand_in.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["compiled"], (nlohmann::json{ctx_module(config), tkg_module(config)}));
  EXPECT_EQ(calls[0]["hits"], nlohmann::json::array());
  EXPECT_EQ(calls[1]["compiled"], nlohmann::json::array());
  EXPECT_EQ(calls[1]["hits"], (nlohmann::json{ctx_module(config), tkg_module(config)}));
  EXPECT_EQ(calls[1]["failed"], false);
  EXPECT_EQ(calls[1]["cache_root"], (tmp / "cache").string());
  EXPECT_EQ(calls[1]["argv"][1], "org/tiny");
}

TEST(StandIn, AFailureLeavesModelLogExits70AndIsNeverRetried) {
  TempDir tmp;
  StandIn stand_in(tmp);
  Config failing;
  failing.sequence = 256;
  std::map<std::string, std::string> env = {{"STAND_IN_FAIL", "other,sequence_length=256"}};
  ASSERT_EQ(stand_in.run(failing, tmp / "cache", env).exit_code, 70) << stand_in.last_log();
  EXPECT_TRUE(
      contains(stand_in.last_log(), "ERROR: compilation failed for " + ctx_module(failing)));
  fs::path dir = tmp / "cache" / kCompiler / ctx_module(failing);
  EXPECT_TRUE(fs::exists(dir / "model.log"));
  EXPECT_FALSE(fs::exists(dir / "model.neff"));
  EXPECT_FALSE(fs::exists(dir / "model.done"));
  EXPECT_EQ(stand_in.calls().back()["failed"], true);

  EXPECT_EQ(stand_in.run(failing, tmp / "cache").exit_code, 1);
  EXPECT_TRUE(contains(stand_in.last_log(), "Got a cached failed neff"));
  EXPECT_EQ(stand_in.run(Config{}, tmp / "cache", env).exit_code, 0);
}

TEST(StandIn, CacheDirFlagWinsAndWrapperFlagsAreNotCompilerFlags) {
  TempDir tmp;
  StandIn stand_in(tmp);
  Config config;
  config.instance = "trn2";
  std::string cc_flags = "--cache_dir=" + (tmp / "flag-cache").string() +
                         " --no_cache -O1 --retry_failed_compilation --no-cache";
  ASSERT_EQ(stand_in.run(config, tmp / "url-cache", {{"NEURON_CC_FLAGS", cc_flags}}).exit_code, 0);
  EXPECT_FALSE(fs::exists(tmp / "url-cache"));
  fs::path compiler = tmp / "flag-cache" / kCompiler;
  ASSERT_TRUE(fs::is_directory(compiler));
  std::string expected = compile_flags_json(
      {"--model-type=transformer", "--auto-cast=matmult", "--target=trn2", "-O1"});
  for (const auto& item : fs::directory_iterator(compiler)) {
    if (item.path().filename() == "0_REGISTRY") continue;
    EXPECT_EQ(read_file(item.path() / "compile_flags.json"), expected);
    EXPECT_TRUE(item.path().filename().string().ends_with("+" + flags_key(expected)));
  }
}

TEST(StandIn, BadArgumentsExit2WithAUsage) {
  TempDir tmp;
  CommandRun run;
  run.argv = {STAND_IN_EXPORT, "--model", "x", "out"};
  run.log_file = tmp / "log";
  EXPECT_EQ(run_command(run).exit_code, 2);
  EXPECT_TRUE(contains(read_file(tmp / "log"), "usage: stand-in-export"));
}

}  // namespace
}  // namespace neuron_cache::compile
