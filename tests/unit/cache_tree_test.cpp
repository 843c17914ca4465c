// LocalCache::scan: states, sizes and registry files of a local cache laid out as libneuronxla
// and optimum-neuron write it (format spec 2.2-2.5, 4.1, 4.8), and the symlink trust rules.
#include "neuron_cache/local/cache_tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/registry.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using layout::EntryState;
using registry::Json;
using testing::Kind;
using testing::make_entry;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kCurrentDir = testing::kCompilerDir;  // neuronxcc-2.21.33363.0+82129205
constexpr const char* kOldDir = "neuronxcc-2.19.0.1+abcdef12";
constexpr const char* kInstalled = "2.21.33363.0";  // the short version: prefix rule
constexpr const char* kOptimum = "0.4.6.dev4";
constexpr const char* kTracedModule = "MODULE_5e484d66cb3e29251244";

// Byte counts of the files make_entry writes.
constexpr uint64_t kHlo = 9;      // "hlo-bytes"
constexpr uint64_t kFlags = 48;   // ["--model-type=transformer", "--auto-cast=none"]
constexpr uint64_t kLog = 25;     // "ERROR: compilation failed"
constexpr uint64_t kTraced = 40;  // model.neuron 12 + config.json 22 + tokenizer/vocab.txt 6

Json llama_entry() {
  return Json{{"_entry_class", "SingleModelCacheEntry"},
              {"_model_id", "org/model"},
              {"_task", "text-generation"},
              {"model_type", "llama"},
              {"hidden_size", 64},
              {"neuron", {{"batch_size", 1}, {"sequence_length", 128}, {"target", "trn1"}}}};
}

const local::ModuleEntry* find_module(const local::CompilerDir& compiler, const std::string& name) {
  auto it = std::find_if(compiler.modules.begin(), compiler.modules.end(),
                         [&](const local::ModuleEntry& m) { return m.name == name; });
  return it == compiler.modules.end() ? nullptr : &*it;
}

bool contains(const std::vector<std::string>& items, const std::string& needle) {
  return std::any_of(items.begin(), items.end(), [&](const std::string& item) {
    return item.find(needle) != std::string::npos;
  });
}

class CacheTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    write_file(outside() / "secret.neff", "outside neff");
    write_file(outside() / "folder" / "model.log", "outside log");
    write_file(hub() / "blobs" / "abc123", "hub neff bytes");
  }
  fs::path root() const { return temp_ / "cache"; }
  fs::path outside() const { return temp_ / "outside"; }
  fs::path hub() const { return temp_ / "hf-hub"; }
  fs::path current() const { return root() / kCurrentDir; }

  // The primary registry file, its absolute-symlink alias and a 0.0.20 legacy file.
  // Returns the entry hash of the current entry.
  std::string write_registry() {
    std::string text = registry::serialize(llama_entry());
    std::string hash = registry::entry_hash(text);
    std::string digest = registry::arch_digest(llama_entry());
    fs::path primary = current() / registry::primary_path(kOptimum, digest, hash);
    write_file(primary, text);
    fs::path alias = current() / registry::alias_path(kOptimum, "llama", "org/model", hash);
    fs::create_directories(alias.parent_path());
    fs::create_symlink(primary, alias);
    return hash;
  }

  std::string write_legacy_registry() {
    std::string text = R"({"model_type": "llama", "neuron": {"task": "text-generation"}})";
    std::string hash = registry::entry_hash(text);
    write_file(current() / "0_REGISTRY/0.0.20/inference/llama/org/model" / (hash + ".json"), text);
    return hash;
  }

  TempDir temp_;
};

TEST_F(CacheTreeTest, ScanClassifiesEveryKindOfEntry) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_2+d7cde3b5", Kind::Failed);
  make_entry(root(), "MODULE_3+d7cde3b5", Kind::Locked);
  make_entry(root(), "MODULE_4+d7cde3b5", Kind::Empty);
  make_entry(root(), "MODULE_5+2c2d707e", Kind::LegacySuccess);
  make_entry(root(), kTracedModule, Kind::Traced);

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  ASSERT_TRUE(tree.exists);
  ASSERT_EQ(tree.compilers.size(), 1u);
  const local::CompilerDir& compiler = tree.compilers[0];
  ASSERT_EQ(compiler.modules.size(), 6u);
  std::map<std::string, EntryState> states;
  for (const auto& module : compiler.modules) states[module.name] = module.state;
  EXPECT_EQ(states["MODULE_1+d7cde3b5"], EntryState::Success);
  EXPECT_EQ(states["MODULE_2+d7cde3b5"], EntryState::Failed);
  EXPECT_EQ(states["MODULE_3+d7cde3b5"], EntryState::Locked);
  EXPECT_EQ(states["MODULE_4+d7cde3b5"], EntryState::Empty);
  EXPECT_EQ(states["MODULE_5+2c2d707e"], EntryState::Success);
  // optimum-neuron calls it EMPTY; neuron-cache knows a complete traced export.
  EXPECT_EQ(states[kTracedModule], EntryState::Traced);
  EXPECT_TRUE(tree.skipped.empty());
}

TEST_F(CacheTreeTest, SizesCountRegularFilesOnly) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_2+d7cde3b5", Kind::Failed);
  make_entry(root(), kTracedModule, Kind::Traced);
  // A link inside the root still counts for the state, never for the size.
  fs::create_symlink("../MODULE_1+d7cde3b5/model.neff", current() / "MODULE_2+d7cde3b5" / "x.bin");

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  const local::CompilerDir& compiler = tree.compilers.at(0);
  uint64_t neff = std::string("neff-bytes-MODULE_1+d7cde3b5").size();
  EXPECT_EQ(find_module(compiler, "MODULE_1+d7cde3b5")->size_bytes, kHlo + kFlags + neff);
  EXPECT_EQ(find_module(compiler, "MODULE_2+d7cde3b5")->size_bytes, kHlo + kFlags + kLog);
  EXPECT_EQ(find_module(compiler, kTracedModule)->size_bytes, kTraced);
  EXPECT_EQ(compiler.size_bytes, kHlo + kFlags + neff + kHlo + kFlags + kLog + kTraced);
}

TEST_F(CacheTreeTest, CompilerFoldersAreMarkedCurrentByPrefix) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_9+d7cde3b5", Kind::Success, kOldDir);
  write_file(root() / "neuronxcc-not-a-dir", "");
  write_file(root() / "lock", "");

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  ASSERT_EQ(tree.compilers.size(), 2u);
  EXPECT_EQ(tree.compilers[0].name, kOldDir);  // sorted by name
  EXPECT_FALSE(tree.compilers[0].current);
  EXPECT_EQ(tree.compilers[0].version, "2.19.0.1+abcdef12");
  EXPECT_EQ(tree.compilers[1].name, kCurrentDir);
  EXPECT_TRUE(tree.compilers[1].current);
  EXPECT_TRUE(contains(tree.skipped, "neuronxcc-not-a-dir"));
  // Unknown installed compiler: nothing is current.
  for (const auto& compiler : local::LocalCache(root()).scan("").compilers) {
    EXPECT_FALSE(compiler.current) << compiler.name;
  }
}

TEST_F(CacheTreeTest, FlagsKeyIsMd5OfTheFlagsFile) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_5+2c2d707e", Kind::LegacySuccess);
  local::LocalCache cache(root());
  sys::SafeDir compiler_dir = sys::SafeDir::open(current());
  // The scan (status, cleanup) does without the key; inspect asks for it.
  const local::CompilerDir compiler = cache.scan(kInstalled).compilers.at(0);
  EXPECT_TRUE(find_module(compiler, "MODULE_1+d7cde3b5")->flags_file_key.empty());
  EXPECT_EQ(find_module(compiler, "MODULE_1+d7cde3b5")->flags_file, "compile_flags.json");

  const local::ModuleEntry inspected =
      cache.inspect_module(compiler_dir, "MODULE_1+d7cde3b5", true);
  const local::ModuleEntry* json = &inspected;
  std::string bytes = testing::read_file(current() / "MODULE_1+d7cde3b5" / "compile_flags.json");
  EXPECT_EQ(json->flags_file, "compile_flags.json");
  EXPECT_EQ(json->flags_file_key, md5_hex(bytes).substr(0, 8));
  EXPECT_EQ(json->flags_file_key, "d7cde3b5");  // spec 2.3 vector
  EXPECT_EQ(json->flags_file_key, json->module.flags_key);
  EXPECT_EQ(json->hlo_file, "model.hlo_module.pb");

  const local::ModuleEntry inspected_legacy =
      cache.inspect_module(compiler_dir, "MODULE_5+2c2d707e", true);
  const local::ModuleEntry* legacy = &inspected_legacy;
  EXPECT_EQ(legacy->flags_file, "compile_flags.txt");
  EXPECT_EQ(legacy->flags_file_key, "2c2d707e");
  EXPECT_EQ(legacy->hlo_file, "model.hlo.pb");
  EXPECT_EQ(legacy->module.graph_key, "5");
}

TEST_F(CacheTreeTest, RegistryFilesOfEveryGenerationAreRead) {
  std::string hash = write_registry();
  std::string legacy_hash = write_legacy_registry();
  // A file whose name is not the hash of its text (hand-edited).
  write_file(current() / "0_REGISTRY/0.4.4/llama/org/model/00000000000000000000.json",
             registry::serialize(llama_entry()));
  write_file(current() / "0_REGISTRY/0.4.6.dev4/README.txt", "not an entry");

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  const std::vector<local::RegistryFile>& files = tree.compilers.at(0).registry;
  ASSERT_EQ(files.size(), 4u);  // sorted by path
  EXPECT_EQ(files[0].path, "0_REGISTRY/0.0.20/inference/llama/org/model/" + legacy_hash + ".json");
  EXPECT_EQ(files[1].path, "0_REGISTRY/0.4.4/llama/org/model/00000000000000000000.json");
  EXPECT_EQ(files[3].path, "0_REGISTRY/0.4.6.dev4/llama/org/model/" + hash + ".json");
  std::string digest = registry::arch_digest(llama_entry());
  EXPECT_EQ(files[2].path, "0_REGISTRY/0.4.6.dev4/" + digest + "/" + hash + ".json");
  for (const auto& file : files) ASSERT_TRUE(file.record.has_value()) << file.problem;

  const registry::Record& legacy = *files[0].record;
  EXPECT_EQ(legacy.location.shape, registry::PathShape::ByMode);
  EXPECT_EQ(legacy.location.mode, "inference");
  EXPECT_EQ(legacy.model_id, "org/model");
  EXPECT_EQ(legacy.task, "text-generation");  // kept in the neuron config then
  EXPECT_TRUE(legacy.entry_class.empty());
  EXPECT_TRUE(legacy.hash_matches);

  EXPECT_FALSE(files[1].record->hash_matches);

  const registry::Record& primary = *files[2].record;
  EXPECT_FALSE(files[2].is_link);
  EXPECT_EQ(primary.location.shape, registry::PathShape::ByArch);
  EXPECT_EQ(primary.location.arch_digest, digest);
  EXPECT_EQ(primary.entry_class, "SingleModelCacheEntry");
  EXPECT_EQ(primary.model_id, "org/model");
  EXPECT_EQ(primary.task, "text-generation");
  EXPECT_TRUE(primary.hash_matches);

  EXPECT_TRUE(files[3].is_link);  // the absolute alias, inside the root: trusted
  EXPECT_EQ(files[3].record->location.shape, registry::PathShape::ByModelType);
  EXPECT_TRUE(files[3].record->hash_matches);

  EXPECT_TRUE(local::LocalCache(root()).scan(kInstalled, false).compilers.at(0).registry.empty());
}

// The alias is trusted because it resolves inside the root, even when the LocalCache was made
// before the root existed (a fresh cache filled by the same command).
TEST_F(CacheTreeTest, AliasIsTrustedWhenTheRootIsCreatedAfterTheLocalCache) {
  fs::remove_all(root());
  local::LocalCache cache(root());
  write_registry();
  const std::vector<local::RegistryFile> files = cache.scan(kInstalled).compilers.at(0).registry;
  ASSERT_EQ(files.size(), 2u);
  EXPECT_TRUE(files[1].is_link);
  EXPECT_TRUE(files[1].record.has_value()) << files[1].problem;
}

TEST_F(CacheTreeTest, RegistryLinkToOutsideIsNotRead) {
  fs::path alias = current() / "0_REGISTRY/0.4.6.dev4/llama/org/model/aaaaaaaaaaaaaaaaaaaa.json";
  fs::create_directories(alias.parent_path());
  write_file(outside() / "entry.json", registry::serialize(llama_entry()));
  fs::create_symlink(outside() / "entry.json", alias);

  const std::vector<local::RegistryFile> files =
      local::LocalCache(root()).scan(kInstalled).compilers[0].registry;

  ASSERT_EQ(files.size(), 1u);
  EXPECT_FALSE(files[0].record.has_value());
  EXPECT_NE(files[0].problem.find("outside the cache"), std::string::npos) << files[0].problem;
}

TEST_F(CacheTreeTest, SymlinkedModuleFolderIsSkippedAndReported) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  fs::create_directory_symlink(outside() / "folder", current() / "MODULE_evil+d7cde3b5");
  write_file(current() / "MODULE_file", "not a folder");
  auto before = snapshot_tree(outside());

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  const local::CompilerDir& compiler = tree.compilers.at(0);
  EXPECT_EQ(compiler.modules.size(), 1u);
  EXPECT_EQ(find_module(compiler, "MODULE_evil+d7cde3b5"), nullptr);
  EXPECT_TRUE(contains(tree.skipped, "MODULE_evil+d7cde3b5"));
  EXPECT_TRUE(contains(tree.skipped, "MODULE_file"));
  EXPECT_EQ(snapshot_tree(outside()), before);
}

TEST_F(CacheTreeTest, SymlinkedCompilerFolderIsSkippedAndReported) {
  make_entry(outside(), "MODULE_1+d7cde3b5", Kind::Success, "elsewhere");
  fs::create_directory_symlink(outside() / "elsewhere", root() / "neuronxcc-2.21.1.0+linked");
  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);
  EXPECT_TRUE(tree.compilers.empty());
  EXPECT_TRUE(contains(tree.skipped, "neuronxcc-2.21.1.0+linked"));
}

// A planted model.neff link to an arbitrary file must not turn an entry into a usable SUCCESS.
TEST_F(CacheTreeTest, NeffLinkOutsideTheTrustedPlacesDoesNotCount) {
  fs::path entry = make_entry(root(), "MODULE_7+d7cde3b5", Kind::Empty);
  fs::create_symlink(outside() / "secret.neff", entry / "model.neff");
  write_file(entry / "model.done", "");

  local::CacheTree tree = local::LocalCache(root(), {hub()}).scan(kInstalled);

  const local::ModuleEntry* module = find_module(tree.compilers.at(0), "MODULE_7+d7cde3b5");
  ASSERT_NE(module, nullptr);
  EXPECT_NE(module->state, EntryState::Success);
  EXPECT_FALSE(module->files.has_neff);
  EXPECT_EQ(module->untrusted_links, std::vector<std::string>{"model.neff"});
  EXPECT_EQ(module->size_bytes, kHlo);
}

// optimum-neuron links NEFFs downloaded from the Hub into the HF hub file cache.
TEST_F(CacheTreeTest, NeffLinkIntoATrustedRootCounts) {
  fs::path entry = make_entry(root(), "MODULE_7+d7cde3b5", Kind::Empty);
  fs::create_symlink(hub() / "blobs" / "abc123", entry / "model.neff");
  write_file(entry / "model.done", "");

  local::CacheTree tree = local::LocalCache(root(), {hub()}).scan(kInstalled);
  const local::ModuleEntry* trusted = find_module(tree.compilers.at(0), "MODULE_7+d7cde3b5");
  EXPECT_EQ(trusted->state, EntryState::Success);
  EXPECT_TRUE(trusted->untrusted_links.empty());
  EXPECT_EQ(trusted->size_bytes, kHlo);  // the linked blob is not counted

  local::CacheTree without_hub = local::LocalCache(root()).scan(kInstalled);
  EXPECT_NE(without_hub.compilers.at(0).modules.at(0).state, EntryState::Success);
}

TEST_F(CacheTreeTest, NeffLinkInsideTheRootCounts) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  fs::path entry = make_entry(root(), "MODULE_2+d7cde3b5", Kind::Empty);
  fs::create_symlink("../MODULE_1+d7cde3b5/model.neff", entry / "model.neff");
  write_file(entry / "model.done", "");
  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);
  EXPECT_EQ(find_module(tree.compilers.at(0), "MODULE_2+d7cde3b5")->state, EntryState::Success);
}

TEST_F(CacheTreeTest, DanglingLinksAreUntrustedAndDoNotCount) {
  fs::path entry = make_entry(root(), "MODULE_1+d7cde3b5", Kind::Empty);
  fs::create_symlink(root() / "missing.neff", entry / "model.neff");
  write_file(entry / "model.done", "");
  const local::ModuleEntry module =
      local::LocalCache(root()).scan(kInstalled).compilers.at(0).modules.at(0);
  EXPECT_EQ(module.state, EntryState::Empty);
  EXPECT_EQ(module.untrusted_links, std::vector<std::string>{"model.neff"});
}

// One odd entry (a FIFO or a huge file under the flags name) must not hang or abort the scan of
// the whole cache: status and cleanup still have to work.
TEST_F(CacheTreeTest, UnreadableFlagsFileDoesNotStopTheScan) {
  fs::path fifo_entry = make_entry(root(), "MODULE_1+d7cde3b5", Kind::Failed);
  fs::remove(fifo_entry / "compile_flags.json");
  ASSERT_EQ(mkfifo((fifo_entry / "compile_flags.json").c_str(), 0644), 0);
  fs::path big_entry = make_entry(root(), "MODULE_2+d7cde3b5", Kind::Success);
  write_file(big_entry / "compile_flags.json", std::string(2 << 20, ' '));

  local::CacheTree tree = local::LocalCache(root()).scan(kInstalled);

  const local::CompilerDir& compiler = tree.compilers.at(0);
  ASSERT_EQ(compiler.modules.size(), 2u);
  EXPECT_EQ(compiler.modules[0].state, EntryState::Failed);
  EXPECT_TRUE(compiler.modules[0].flags_file_key.empty());
  EXPECT_EQ(compiler.modules[1].state, EntryState::Success);
  EXPECT_TRUE(compiler.modules[1].flags_file_key.empty());
  // inspect reads the flags file: it neither hangs on the FIFO nor takes the huge file.
  local::LocalCache cache(root());
  sys::SafeDir dir = sys::SafeDir::open(current());
  EXPECT_TRUE(cache.inspect_module(dir, "MODULE_1+d7cde3b5", true).flags_file_key.empty());
  local::ModuleEntry big = cache.inspect_module(dir, "MODULE_2+d7cde3b5", true);
  EXPECT_EQ(big.state, EntryState::Success);
  EXPECT_TRUE(big.flags_file_key.empty());
}

TEST_F(CacheTreeTest, InspectModuleReadsOneEntry) {
  make_entry(root(), "MODULE_3+d7cde3b5", Kind::Locked);
  local::LocalCache cache(root());
  sys::SafeDir compiler = sys::SafeDir::open(current());
  local::ModuleEntry entry = cache.inspect_module(compiler, "MODULE_3+d7cde3b5");
  EXPECT_EQ(entry.compiler_dir, kCurrentDir);
  EXPECT_EQ(entry.state, EntryState::Locked);
  EXPECT_EQ(entry.files.lock_files, std::vector<std::string>{"model.hlo_module.pb.lock"});
  EXPECT_EQ(entry.module.graph_key, "3");
  EXPECT_EQ(entry.module.flags_key, "d7cde3b5");
  EXPECT_THROW(cache.inspect_module(compiler, "MODULE_missing"), Error);
}

TEST_F(CacheTreeTest, MissingRootScansAsEmpty) {
  local::CacheTree tree = local::LocalCache(temp_ / "nowhere").scan(kInstalled);
  EXPECT_FALSE(tree.exists);
  EXPECT_TRUE(tree.compilers.empty());
  EXPECT_FALSE(local::LocalCache(temp_ / "nowhere").exists());
}

}  // namespace
}  // namespace neuron_cache
