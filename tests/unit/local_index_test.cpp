// The local side of the artifact index: entry files, completeness checks, registry installs and
// per-configuration exports.
#include <gtest/gtest.h>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/export_dir.h"
#include "neuron_cache/local/local_index.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace ai = artifact_index;
namespace fs = std::filesystem;
using testing::Kind;
using testing::make_entry;
using testing::TempDir;

constexpr const char* kModule = "MODULE_0123456789abcdef0123+d7517139";

ai::Entry entry_for(const local::LocalIndex& index, const std::string& version) {
  ai::Entry entry;
  entry.inputs = {
      "org/model", "llama", "text-generation", "bf16",       1,           128, version, 2,
      "trn1",      {},      std::nullopt,      std::nullopt, std::nullopt};
  entry.key = cache_key::key_of(entry.inputs);
  entry.configuration = "c1";
  entry.modules.push_back(index.record_module(entry.compiler_dir(), kModule));
  entry.tool = "test";
  entry.created_at = ai::utc_now();
  return entry;
}

std::string version_of(const std::string& compiler_dir) {
  return compiler_dir.substr(10);
}

TEST(LocalIndex, RecordsWritesAndFindsEntries) {
  TempDir root;
  make_entry(root.path(), kModule, Kind::Success);
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  std::string version = version_of(testing::kCompilerDir);
  ai::Entry entry = entry_for(index, version);
  ASSERT_EQ(entry.modules[0].files.size(), 4u);  // hlo, flags, neff, done; never a lock file
  EXPECT_EQ(entry.modules[0].files[0].sha256.size(), 64u);
  index.write(entry);
  auto found = index.find(version, entry.key);
  ASSERT_TRUE(found);
  EXPECT_EQ(ai::serialize_entry(*found), ai::serialize_entry(entry));
  EXPECT_EQ(index.entries(version, nullptr).size(), 1u);
  EXPECT_TRUE(index.module_complete(entry.compiler_dir(), entry.modules[0]));
  // A NEFF of another size is not the recorded one.
  testing::write_file(root.path() / entry.compiler_dir() / kModule / "model.neff", "changed!!");
  EXPECT_FALSE(index.module_complete(entry.compiler_dir(), entry.modules[0]));
}

TEST(LocalIndex, DamagedEntryFilesAreReportedNotTrusted) {
  TempDir root;
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  std::string version = version_of(testing::kCompilerDir);
  fs::path dir = root.path() / ai::kLocalDir / testing::kCompilerDir;
  testing::write_file(dir / (std::string(32, 'a') + ".json"), "{not json");
  std::vector<std::string> problems;
  EXPECT_TRUE(index.entries(version, &problems).empty());
  EXPECT_EQ(problems.size(), 1u);
  EXPECT_FALSE(index.find(version, std::string(32, 'a')));
}

TEST(LocalIndex, FailedModulesCannotBeRecorded) {
  TempDir root;
  make_entry(root.path(), kModule, Kind::Failed);
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  EXPECT_THROW(index.record_module(testing::kCompilerDir, kModule), Error);
}

// A diffusion export: one traced folder whose components sit in sub-folders.
TEST(LocalIndex, TracedExportIsRecordedWithSubPathsAndCheckedByItsListedFiles) {
  TempDir root;
  const std::string traced = "MODULE_5e484d66cb3e29251244";
  fs::path dir = root.path() / testing::kCompilerDir / traced;
  testing::write_file(dir / "model_index.json", "{}");
  testing::write_file(dir / "unet/config.json", "{\"neuron\": {}}");
  testing::write_file(dir / "unet/model.neuron", "unet");
  testing::write_file(dir / "text_encoder/model.neuron", "text");
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  ai::ModuleRecord record = index.record_module(testing::kCompilerDir, traced);
  std::vector<std::string> names;
  for (const auto& file : record.files) names.push_back(file.name);
  EXPECT_EQ(names, (std::vector<std::string>{"model_index.json", "text_encoder/model.neuron",
                                             "unet/config.json", "unet/model.neuron"}));

  make_entry(root.path(), kModule, Kind::Success);  // what entry_for records
  ai::Entry entry = entry_for(index, version_of(testing::kCompilerDir));
  entry.modules = {record};
  ai::Entry back = ai::parse_entry(ai::serialize_entry(entry), "test");
  EXPECT_EQ(back.modules.at(0).files.size(), 4u);
  EXPECT_TRUE(index.module_complete(entry.compiler_dir(), record));
  EXPECT_EQ(index.missing(entry).files, 0u);
  fs::remove(dir / "unet/model.neuron");
  EXPECT_FALSE(index.module_complete(entry.compiler_dir(), record));
  EXPECT_EQ(index.missing(entry).files, 4u);
  fs::remove(dir / "model_index.json");
  EXPECT_THROW(index.record_module(testing::kCompilerDir, traced), Error) << "no longer complete";

  // An index that lists a traced export without what makes it whole is refused: a prefetch
  // would install an incomplete folder.
  entry.modules[0].files.erase(entry.modules[0].files.begin());  // model_index.json
  EXPECT_THROW(ai::parse_entry(ai::serialize_entry(entry), "hub"), Error);
}

TEST(LocalIndex, RegistryFilesInstallOnceAndOnlyInsideTheRegistry) {
  TempDir root;
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  std::string path = "0_REGISTRY/0.4.5/llama/org/model/abc.json";
  EXPECT_TRUE(index.install_registry_file(testing::kCompilerDir, path, "{}"));
  EXPECT_FALSE(index.install_registry_file(testing::kCompilerDir, path, "{\"other\": 1}"));
  EXPECT_EQ(testing::read_file(root.path() / testing::kCompilerDir / path), "{}");
  EXPECT_THROW(index.install_registry_file(testing::kCompilerDir, "../../x.json", "{}"), Error);
  EXPECT_THROW(index.install_registry_file(testing::kCompilerDir, "MODULE_x/y.json", "{}"), Error);
  // A symlink planted in the registry path is never followed.
  TempDir outside;
  fs::create_directories(root.path() / testing::kCompilerDir / "0_REGISTRY" / "0.4.6");
  fs::create_directory_symlink(
      outside.path(), root.path() / testing::kCompilerDir / "0_REGISTRY" / "0.4.6" / "llama");
  EXPECT_THROW(
      index.install_registry_file(testing::kCompilerDir, "0_REGISTRY/0.4.6/llama/a.json", "{}"),
      Error);
  EXPECT_TRUE(fs::is_empty(outside.path()));
}

TEST(ExportDir, ExportsAMiniCacheOfSymlinksAndKeepsAnUnchangedExport) {
  TempDir root, exports;
  make_entry(root.path(), kModule, Kind::Success);
  local::LocalCache cache(root.path());
  local::LocalIndex index(cache);
  ai::Entry entry = entry_for(index, version_of(testing::kCompilerDir));
  fs::path dir = local::export_configuration(cache, entry, exports.path(), "c1");
  EXPECT_EQ(dir, exports.path() / "c1");
  fs::path neff = dir / testing::kCompilerDir / kModule / "model.neff";
  ASSERT_TRUE(fs::is_symlink(neff));
  EXPECT_EQ(fs::read_symlink(neff),
            fs::canonical(root.path() / testing::kCompilerDir / kModule / "model.neff"));
  auto before = fs::last_write_time(dir / local::kExportEntryFile);
  local::export_configuration(cache, entry, exports.path(), "c1");
  EXPECT_EQ(fs::last_write_time(dir / local::kExportEntryFile), before);  // untouched
  // Another entry under the same name replaces the export whole.
  entry.configuration = "c1-again";
  local::export_configuration(cache, entry, exports.path(), "c1");
  EXPECT_TRUE(testing::contains(testing::read_file(dir / local::kExportEntryFile), "c1-again"));
  EXPECT_EQ(std::distance(fs::directory_iterator(exports.path()), fs::directory_iterator()), 1);
  // A module missing locally fails the export and leaves the previous one in place.
  fs::remove(root.path() / testing::kCompilerDir / kModule / "model.neff");
  entry.configuration = "c1-third";
  EXPECT_THROW(local::export_configuration(cache, entry, exports.path(), "c1"), Error);
  EXPECT_TRUE(testing::contains(testing::read_file(dir / local::kExportEntryFile), "c1-again"));
  EXPECT_EQ(std::distance(fs::directory_iterator(exports.path()), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace neuron_cache
