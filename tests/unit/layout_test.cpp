// Names of the local cache tree and the entry classification shared with libneuronxla and
// optimum-neuron (format spec 2.2-2.4).
#include "neuron_cache/format/layout.h"

#include <gtest/gtest.h>

#include <string>

namespace neuron_cache::layout {
namespace {

// ---------------------------------------------------------------------------------------------
// MODULE_ names

struct ModuleCase {
  std::string dir_name;
  std::string graph_key;
  std::string flags_key;
};

// Real kinds of graph keys (spec 2.3): torch-xla decimal u64 (some above INT64_MAX), NxD 20 hex,
// and traced exports named after the registry entry hash without a flags key.
const ModuleCase kModuleCases[] = {
    {"MODULE_9993940051196728623+3cc9a3cb", "9993940051196728623", "3cc9a3cb"},
    {"MODULE_18446744073709551615+d7517139", "18446744073709551615", "d7517139"},
    {"MODULE_198775565831884870+d41d8cd9", "198775565831884870", "d41d8cd9"},
    {"MODULE_26254ca2c7a3ba18d3e1+39f12043", "26254ca2c7a3ba18d3e1", "39f12043"},
    {"MODULE_56f0d314fda2b6e1e336+617f6939", "56f0d314fda2b6e1e336", "617f6939"},
    {"MODULE_5e484d66cb3e29251244", "5e484d66cb3e29251244", ""},
};

TEST(LayoutModuleName, ParsesEveryKindOfGraphKey) {
  for (const auto& [dir_name, graph_key, flags_key] : kModuleCases) {
    std::optional<ModuleName> name = parse_module_name(dir_name);
    ASSERT_TRUE(name.has_value()) << dir_name;
    EXPECT_EQ(name->graph_key, graph_key) << dir_name;
    EXPECT_EQ(name->flags_key, flags_key) << dir_name;
  }
}

TEST(LayoutModuleName, NamesRoundTripThroughDirName) {
  for (const auto& module : kModuleCases) {
    EXPECT_EQ(parse_module_name(module.dir_name)->dir_name(), module.dir_name);
    EXPECT_EQ((ModuleName{module.graph_key, module.flags_key}.dir_name()), module.dir_name);
  }
}

TEST(LayoutModuleName, TracedExportHasNoPlus) {
  EXPECT_EQ((ModuleName{"5e484d66cb3e29251244", ""}.dir_name()), "MODULE_5e484d66cb3e29251244");
}

TEST(LayoutModuleName, OtherNamesAreNotModules) {
  for (const char* name : {"", "MODULE", "module_1+d7517139", "0_REGISTRY", "neuronxcc-2.21.0",
                           "lock", "XMODULE_1+d7517139", " MODULE_1"}) {
    EXPECT_FALSE(parse_module_name(name).has_value()) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// neuronxcc-<version> folders

TEST(LayoutCompilerDir, NameAndVersionRoundTrip) {
  EXPECT_EQ(compiler_dir_name("2.21.33363.0+82129205"), "neuronxcc-2.21.33363.0+82129205");
  EXPECT_EQ(compiler_version_of("neuronxcc-2.21.33363.0+82129205"), "2.21.33363.0+82129205");
  EXPECT_EQ(compiler_version_of(compiler_dir_name("2.8.0.25+a3ad0f342")), "2.8.0.25+a3ad0f342");
}

TEST(LayoutCompilerDir, OtherFoldersHaveNoVersion) {
  for (const char* name : {"lock", "0_REGISTRY", "neuronx-cc-2.21", "NEURONXCC-2.21", "neuronxcc",
                           "xneuronxcc-2.21", ".cache"}) {
    EXPECT_FALSE(compiler_version_of(name).has_value()) << name;
  }
}

TEST(LayoutCompilerDir, CurrentIsAPrefixMatchLikeOptimumNeuron) {
  const std::string dir = "neuronxcc-2.21.33363.0+82129205";
  EXPECT_TRUE(is_current_compiler_dir(dir, "2.21.33363.0+82129205"));
  // neuronxcc.__version__ without the commit suffix still matches the full folder name.
  EXPECT_TRUE(is_current_compiler_dir(dir, "2.21.33363.0"));
  EXPECT_FALSE(is_current_compiler_dir(dir, "2.21.33364.0"));
  EXPECT_FALSE(is_current_compiler_dir(dir, "2.20.33363.0"));
  EXPECT_FALSE(is_current_compiler_dir("neuronxcc-2.21", "2.21.33363.0"));
  EXPECT_FALSE(is_current_compiler_dir("0_REGISTRY", "2.21.33363.0"));
  // startswith() semantics, kept on purpose: a shorter version string matches longer ones.
  EXPECT_TRUE(is_current_compiler_dir(dir, "2.21.3"));
}

TEST(LayoutCompilerDir, UnknownInstalledVersionIsNeverCurrent) {
  // Otherwise "neuronxcc-" would be a prefix of every compiler folder.
  EXPECT_FALSE(is_current_compiler_dir("neuronxcc-2.21.33363.0+82129205", ""));
}

// ---------------------------------------------------------------------------------------------
// Entry states

TEST(LayoutLockFile, OnlyDotLockSuffix) {
  EXPECT_TRUE(is_lock_file("model.hlo_module.pb.lock"));
  EXPECT_TRUE(is_lock_file(kEntryLock));
  EXPECT_TRUE(is_lock_file(".lock"));
  EXPECT_FALSE(is_lock_file(kRootLock));  // the root "lock" is not an entry lock
  EXPECT_FALSE(is_lock_file("model.lock.bak"));
  EXPECT_FALSE(is_lock_file("model.LOCK"));
}

EntryFiles files(bool neff, bool done, bool log, bool lock) {
  EntryFiles result;
  result.has_neff = neff;
  result.has_done = done;
  result.has_log = log;
  if (lock) result.lock_files = {std::string(kEntryLock)};
  return result;
}

// _classify_entry's rules, checked in order (spec 2.4), written out for all 16 combinations.
struct ClassifyCase {
  bool neff, done, log, lock;
  EntryState expected;
};

constexpr ClassifyCase kClassifyCases[] = {
    // neff  done   log    lock
    {false, false, false, false, EntryState::Empty},
    {false, false, false, true, EntryState::Locked},
    {false, false, true, false, EntryState::Failed},
    {false, false, true, true, EntryState::Failed},  // FAILED is checked before LOCKED
    {false, true, false, false, EntryState::Empty},
    {false, true, false, true, EntryState::Locked},
    {false, true, true, false, EntryState::Failed},
    {false, true, true, true, EntryState::Failed},
    {true, false, false, false, EntryState::Empty},  // neff without done: incomplete
    {true, false, false, true, EntryState::Locked},
    {true, false, true, false, EntryState::Empty},  // a log next to a neff is not a failure
    {true, false, true, true, EntryState::Locked},
    {true, true, false, false, EntryState::Success},
    {true, true, false, true, EntryState::Success},  // SUCCESS wins over a leftover lock
    {true, true, true, false, EntryState::Success},
    {true, true, true, true, EntryState::Success},
};

TEST(LayoutClassify, AllCombinationsInOptimumNeuronOrder) {
  for (const auto& c : kClassifyCases) {
    EXPECT_EQ(classify(files(c.neff, c.done, c.log, c.lock)), c.expected)
        << "neff=" << c.neff << " done=" << c.done << " log=" << c.log << " lock=" << c.lock;
  }
}

TEST(LayoutClassify, AnyLockFileCounts) {
  EntryFiles entry;
  entry.lock_files = {"something-else.lock"};
  EXPECT_EQ(classify(entry), EntryState::Locked);
}

TEST(LayoutClassify, StateNames) {
  EXPECT_EQ(state_name(EntryState::Success), "success");
  EXPECT_EQ(state_name(EntryState::Failed), "failed");
  EXPECT_EQ(state_name(EntryState::Locked), "locked");
  EXPECT_EQ(state_name(EntryState::Empty), "empty");
}

TEST(LayoutClassify, ExplanationsNameTheCause) {
  EXPECT_NE(explain(EntryState::Success, files(true, true, false, false)).find("model.done"),
            std::string::npos);
  EXPECT_NE(explain(EntryState::Failed, files(false, false, true, false)).find("model.log"),
            std::string::npos);
  EntryFiles locked;
  locked.lock_files = {"a.lock", "b.lock"};
  EXPECT_NE(explain(EntryState::Locked, locked).find("a.lock, b.lock"), std::string::npos);
  EXPECT_NE(
      explain(EntryState::Empty, files(true, false, false, false)).find("model.done is missing"),
      std::string::npos);
  EntryFiles traced;
  traced.traced_name = true;
  EXPECT_NE(explain(EntryState::Empty, traced).find("traced export"), std::string::npos);
  EXPECT_NE(explain(EntryState::Traced, traced).find("cleanup --all"), std::string::npos);
}

TEST(LayoutTraced, NameIsTwentyLowercaseHexWithoutFlags) {
  EXPECT_TRUE(is_traced_module_name("MODULE_0123456789abcdef0123"));
  EXPECT_FALSE(is_traced_module_name("MODULE_0123456789abcdef0123+d7cde3b5"));  // NxD graph
  EXPECT_FALSE(is_traced_module_name("MODULE_0123456789ABCDEF0123"));
  EXPECT_FALSE(is_traced_module_name("MODULE_0123456789abcdef012"));
  EXPECT_FALSE(is_traced_module_name("MODULE_0123456789abcdef01234"));
  EXPECT_FALSE(is_traced_module_name("MODULE_9993940051196728623"));  // 19 digits
  EXPECT_FALSE(is_traced_module_name("0123456789abcdef0123"));
  EXPECT_EQ(traced_entry_hash("MODULE_0123456789abcdef0123"), "0123456789abcdef0123");
  EXPECT_EQ(traced_entry_hash("MODULE_0123456789abcdef0123+d7cde3b5"), std::nullopt);
}

EntryFiles traced_files(std::initializer_list<std::string_view> paths) {
  EntryFiles result;
  result.traced_name = true;
  for (auto path : paths) note_traced_file(result, path);
  return result;
}

TEST(LayoutTraced, CompleteWithConfigAndANeuronFile) {
  EXPECT_EQ(classify(traced_files({"config.json", "model.neuron", "tokenizer.json"})),
            EntryState::Traced);
  // Diffusion: model_index.json at the top, the compiled components in sub-folders.
  EXPECT_EQ(classify(traced_files({"model_index.json", "unet/config.json", "unet/model.neuron",
                                   "text_encoder/model.neuron"})),
            EntryState::Traced);
  EXPECT_TRUE(is_complete(EntryState::Traced));
  EXPECT_TRUE(is_complete(EntryState::Success));
  EXPECT_FALSE(is_complete(EntryState::Empty));
  EXPECT_EQ(state_name(EntryState::Traced), "traced");
}

TEST(LayoutTraced, IncompleteOrLockedOrMisnamedIsNotTraced) {
  EXPECT_EQ(classify(traced_files({"model.neuron", "tokenizer.json"})), EntryState::Empty);
  EXPECT_EQ(classify(traced_files({"config.json", "tokenizer.json"})), EntryState::Empty);
  EXPECT_EQ(classify(traced_files({"unet/config.json", "unet/model.neuron"})), EntryState::Empty)
      << "a config below the top does not make the folder an export";
  EXPECT_EQ(classify(traced_files({"config.json", ".neuron"})), EntryState::Empty);
  EntryFiles locked = traced_files({"config.json", "model.neuron"});
  locked.lock_files = {"unet/model.neuron.lock"};
  EXPECT_EQ(classify(locked), EntryState::Locked);
  EntryFiles misnamed = traced_files({"config.json", "model.neuron"});
  misnamed.traced_name = false;
  EXPECT_EQ(classify(misnamed), EntryState::Empty);
}

// A listing (an index record, a store's folder) is judged by the rule a folder on disk is.
TEST(LayoutClassify, AListingIsJudgedLikeAFolder) {
  const std::string plain = "MODULE_42+d7cde3b5";
  const std::string traced = "MODULE_5e484d66cb3e29251244";
  EXPECT_EQ(classify_listed(plain, {"model.neff", "model.done", "compile_flags.json"}),
            EntryState::Success);
  EXPECT_EQ(classify_listed(plain, {"model.done"}), EntryState::Empty);
  EXPECT_EQ(classify_listed(plain, {"model.neff", "compile_flags.json"}), EntryState::Empty);
  EXPECT_EQ(classify_listed(plain, {"model.log"}), EntryState::Failed);
  EXPECT_EQ(classify_listed(plain, {"sub/model.neff", "sub/model.done"}), EntryState::Empty);
  EXPECT_EQ(classify_listed(traced, {"config.json", "unet/model.neuron"}), EntryState::Traced);
  EXPECT_EQ(classify_listed(traced, {"unet/config.json", "model.neuron"}), EntryState::Empty);
  EXPECT_EQ(classify_listed(plain, {"config.json", "model.neuron"}), EntryState::Empty);
}

}  // namespace
}  // namespace neuron_cache::layout
