// `neuron-cache gc` as users run it: on the test Hub server after real `ci` runs (the stand-in
// compiler), where --manifest keeps what a pipeline still declares, --apply deletes in one commit
// and --squash leaves one commit and frees the storage; and on a shared folder, with the
// modification times it lists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "gc_layout.h"
#include "neuron_cache/storage/folder_store.h"
#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

class GcHubCli : public PipelineCliTest {
 protected:
  uint64_t used_storage() {
    net::HttpEngine http({server.url(), testing::kHubWriteToken});
    net::HttpResponse response = http.perform(
        {"GET", server.url() + "/api/models/" + std::string(kRepo) + "?expand=usedStorage"});
    return json::parse(response.body)["usedStorage"].get<uint64_t>();
  }
};

std::set<std::string> module_folders_of(const std::set<std::string>& files) {
  std::set<std::string> out;
  for (const auto& path : files) {
    size_t at = path.find("/MODULE_");
    if (at != std::string::npos) out.insert(path.substr(at + 1, path.find('/', at + 1) - at - 1));
  }
  return out;
}

TEST_F(GcHubCli, ManifestKeepsWhatItDeclaresApplyAndSquashFreeTheRest) {
  ManifestSpec both;
  both.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  ManifestSpec one;
  one.confs = {{"llama-bs1", 1, 128}};
  fs::path all = write_manifest(both);
  fs::path kept = write_manifest(one, "kept.yaml");
  ASSERT_EQ(tool("ci " + quoted(all) + " --output-dir " + quoted(work / "out")).code, 0);
  ASSERT_EQ(calls(), 2u);
  std::set<std::string> before = module_folders_of(hub_files());
  ASSERT_EQ(before.size(), 4u);
  std::set<std::string> bs1 = {context_module(one.confs[0]), token_module(one.confs[0])};
  uint64_t storage_before = used_storage();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // created_at counts seconds

  // Just pushed: the grace keeps it all. The Hub's tree lists no times; gc asks the last
  // commit of each folder that may go.
  std::string young =
      "gc --repo " + std::string(kRepo) + " --older-than 0s --manifest " + quoted(kept) + " --json";
  ToolResult graced = tool(young);
  ASSERT_EQ(graced.code, 0) << graced.all();
  EXPECT_TRUE(json::parse(graced.out)["removed_modules"].empty()) << graced.out;
  EXPECT_TRUE(contains(graced.out, "written within the grace period")) << graced.out;

  // The dry run names what goes and removes nothing.
  std::string args =
      "gc --repo " + std::string(kRepo) + " --older-than 0s --grace 0s --manifest " + quoted(kept);
  ToolResult dry = tool(args + " --json");
  ASSERT_EQ(dry.code, 0) << dry.all();
  json plan = json::parse(dry.out);
  EXPECT_EQ(plan["applied"], false);
  EXPECT_EQ(plan["configurations"], 2);
  ASSERT_EQ(plan["dropped_entries"].size(), 1u) << plan.dump(1);
  EXPECT_EQ(plan["dropped_entries"][0]["configuration"], "llama-bs2");
  ASSERT_EQ(plan["removed_modules"].size(), 2u) << plan.dump(1);
  for (const auto& folder : plan["removed_modules"]) {
    std::string name = folder["path"].get<std::string>();
    EXPECT_EQ(bs1.count(name.substr(name.find('/') + 1)), 0u) << name;
  }
  EXPECT_EQ(module_folders_of(hub_files()), before);
  ToolResult text = tool(args);
  EXPECT_TRUE(contains(text.out, "Would remove 2 MODULE folders")) << text.all();
  EXPECT_TRUE(contains(text.out, "Dry run: nothing was removed")) << text.all();

  // --squash asks for --apply; --apply then --squash leaves one commit.
  ToolResult refused = tool(args + " --squash");
  EXPECT_NE(refused.code, 0);
  EXPECT_TRUE(contains(refused.err, "give --apply too")) << refused.all();
  ToolResult applied = tool(args + " --apply --squash");
  ASSERT_EQ(applied.code, 0) << applied.all();
  EXPECT_TRUE(contains(applied.out, "Removed 2 MODULE folders")) << applied.all();
  EXPECT_TRUE(contains(applied.out, "Squashed the history")) << applied.all();
  EXPECT_EQ(module_folders_of(hub_files()), bs1);
  EXPECT_EQ(hub_index()["entries"].size(), 1u);
  EXPECT_EQ(hub_commits(), 1u);
  EXPECT_LT(used_storage(), storage_before);

  // What the pipeline declares is all still there: a new machine fetches it, compiles nothing.
  ToolResult again = tool("ci " + quoted(kept) + " --output-dir " + quoted(work / "out2"), "",
                          work / "fresh-cache");
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_EQ(calls(), 2u);
}

// Without --squash the deletion is one commit and the text says how storage is freed.
TEST_F(GcHubCli, ApplyWithoutSquashSaysTheStorageIsNotFreedYet) {
  ManifestSpec both;
  both.confs = {{"llama-bs1", 1, 128}, {"llama-bs2", 2, 128}};
  fs::path all = write_manifest(both);
  ASSERT_EQ(tool("ci " + quoted(all) + " --output-dir " + quoted(work / "out")).code, 0);
  size_t commits = hub_commits();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ToolResult applied = tool("gc --older-than 0s --grace 0s --apply --repo " + std::string(kRepo));
  ASSERT_EQ(applied.code, 0) << applied.all();
  EXPECT_TRUE(contains(applied.out, "until the history is squashed")) << applied.all();
  EXPECT_TRUE(module_folders_of(hub_files()).empty());
  EXPECT_EQ(hub_commits(), commits + 2);  // the index rewrite, then the deletion
}

TEST_F(GcHubCli, AReadOnlyTokenIsRefusedBeforeAnyWrite) {
  token = testing::kHubReadToken;
  ToolResult run = tool("gc --apply --repo " + std::string(kRepo));
  EXPECT_NE(run.code, 0);
  EXPECT_TRUE(contains(run.err, "read-only")) << run.all();
}

// gc and du act on the store the manifest names, not on the saved default (which every `create`
// and `set` replaces), say where their store came from, and --apply never deletes from a store
// nobody named for it.
TEST_F(GcHubCli, TheManifestsStoreNotTheSavedOneAndApplyOnlyOnANamedStore) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ASSERT_EQ(tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out")).code, 0);
  ToolResult made = tool("create -n other-cache");  // saved as the default, silently
  ASSERT_EQ(made.code, 0) << made.all();
  ToolResult shown = tool("config show");
  ASSERT_TRUE(contains(shown.out, "/other-cache")) << shown.all();
  const std::string from_manifest = std::string(kRepo) +
                                    " (the cache repo from the manifest's cache_repo in " +
                                    manifest.string() + ")";

  ToolResult planned = tool("gc --manifest " + quoted(manifest) + " --older-than 90d");
  ASSERT_EQ(planned.code, 0) << planned.all();
  EXPECT_TRUE(contains(planned.out, "gc of " + from_manifest)) << planned.all();
  ToolResult measured = tool("du --manifest " + quoted(manifest));
  ASSERT_EQ(measured.code, 0) << measured.all();
  EXPECT_TRUE(contains(measured.out, "Cache store " + from_manifest)) << measured.all();

  // The saved default: gc shows where it came from, and --apply refuses before any request.
  ToolResult dry = tool("gc");
  ASSERT_EQ(dry.code, 0) << dry.all();
  EXPECT_TRUE(contains(dry.out, "/other-cache (the cache repo from ")) << dry.all();
  server.clear_log();
  ToolResult refused = tool("gc --apply");
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_TRUE(contains(refused.err, "/other-cache, the cache repo from ")) << refused.all();
  EXPECT_TRUE(contains(refused.err, "name the store to delete from with --repo or --manifest"))
      << refused.all();
  EXPECT_EQ(server.access_log().size(), 0u) << server.access_log().dump();
  // Named by the manifest or --repo, --apply goes ahead.
  EXPECT_EQ(tool("gc --apply --manifest " + quoted(manifest) + " --older-than 90d").code, 0);
  EXPECT_EQ(tool("gc --apply --repo " + std::string(kRepo)).code, 0);

  ManifestSpec elsewhere_spec = spec;
  elsewhere_spec.cache_repo = "acme/elsewhere";
  fs::path elsewhere = write_manifest(elsewhere_spec, "elsewhere.yaml");
  ToolResult mixed = tool("gc --manifest " + quoted(manifest) + " --manifest " + quoted(elsewhere) +
                          " --older-than 90d");
  EXPECT_EQ(mixed.code, 2) << mixed.all();
  EXPECT_TRUE(contains(mixed.err, "the manifests name different cache stores")) << mixed.all();
}

class GcFolderCli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    storage::create_folder_store(root());
    now = static_cast<int64_t>(std::time(nullptr));
    layout = testing::gc_layout(now);
    for (const auto& [path, content] : layout.files) {
      write_file(root() / path, content);
      timespec times[2] = {{layout.modified[path], 0}, {layout.modified[path], 0}};
      ASSERT_EQ(utimensat(AT_FDCWD, (root() / path).c_str(), times, 0), 0);
    }
  }
  fs::path root() const { return dir / "store"; }
  int gc(const std::string& args, std::string& out, std::string& err) {
    return tool("gc --repo 'file://" + root().string() + "' " + args, out, err);
  }
  // The tool with `args` as they are: no --repo unless they give it.
  int tool(const std::string& args, std::string& out, std::string& err,
           const std::string& env = "") {
    std::string command = "(" + std::string(testing::kCleanEnv) + " " + env +
                          " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
                          (dir / "hf").string() + "' " + testing::tool_path() + " " + args +
                          " 2>'" + (dir / "err").string() + "')";
    int code = testing::run_command(command, &out);
    err = read_file(dir / "err");
    return code;
  }

  TempDir dir;
  int64_t now = 0;
  testing::GcLayout layout;
};

TEST_F(GcFolderCli, DryRunThenApplyRemovesTheUnreferencedAndEndedLeases) {
  std::string out, err;
  ASSERT_EQ(gc("", out, err), 0) << out << err;
  EXPECT_TRUE(contains(out, "Would remove 1 MODULE folders and 2 lease files")) << out;
  EXPECT_TRUE(contains(out, layout.folder('U'))) << out;
  EXPECT_TRUE(contains(out, "written within the grace period")) << out;
  EXPECT_TRUE(contains(out, "no neuron-cache index")) << out;
  EXPECT_TRUE(fs::exists(root() / layout.folder('U')));

  ASSERT_EQ(gc("--apply --json", out, err), 0) << out << err;
  json applied = json::parse(out);
  EXPECT_EQ(applied["applied"], true);
  EXPECT_EQ(applied["files_deleted"], 6);
  EXPECT_EQ(applied["removed_modules"].size(), 1u);
  EXPECT_EQ(applied["squashed_revision"], "");
  EXPECT_FALSE(fs::exists(root() / layout.folder('U')));
  for (char letter : {'A', 'B', 'C', 'R', 'Y', 'O'})
    EXPECT_TRUE(fs::exists(root() / layout.folder(letter) / "model.neff")) << letter;
  EXPECT_FALSE(fs::exists(root() / layout.lease_done_old));
  EXPECT_TRUE(fs::exists(root() / layout.lease_live));
}

// What a killed writer left, as a user sees it: named with why in the dry run and in --json,
// removed by --apply; a copy a live writer is filling stays.
TEST_F(GcFolderCli, LeftoversOfKilledWritersAreNamedThenRemoved) {
  std::string c = layout.folder('C');
  std::string old = c + "/.model.neff.0123456789ab.tmp";
  std::string live = c + "/.model.neff.ba9876543210.tmp";
  std::string empty = c.substr(0, c.find('/')) + "/MODULE_9999+empty";
  for (const auto& [path, age] : {std::pair{old, 2 * testing::kGcHour}, {live, int64_t{60}}}) {
    write_file(root() / path, "partial");
    timespec times[2] = {{now - age, 0}, {now - age, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (root() / path).c_str(), times, 0), 0);
  }
  fs::create_directories(root() / empty);
  timespec times[2] = {{now - 2 * testing::kGcDay, 0}, {now - 2 * testing::kGcDay, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (root() / empty).c_str(), times, 0), 0);

  std::string out, err;
  ASSERT_EQ(gc("", out, err), 0) << out << err;
  EXPECT_TRUE(contains(out, "Would remove 2 leftovers of killed writers")) << out;
  EXPECT_TRUE(contains(out, old + "  copy, ")) << out;
  EXPECT_TRUE(contains(out, empty + "  empty folder, ")) << out;
  EXPECT_FALSE(contains(out, live)) << out;
  ASSERT_EQ(gc("--json", out, err), 0) << out << err;
  json dry = json::parse(out);
  ASSERT_EQ(dry["leftovers"].size(), 2u) << out;
  EXPECT_EQ(dry["leftovers"][0]["why"].get<std::string>().empty(), false);
  EXPECT_TRUE(fs::exists(root() / old));

  ASSERT_EQ(gc("--apply --json", out, err), 0) << out << err;
  EXPECT_EQ(json::parse(out)["leftovers_removed"], 2) << out;
  EXPECT_FALSE(fs::exists(root() / old));
  EXPECT_FALSE(fs::exists(root() / empty));
  EXPECT_TRUE(fs::exists(root() / live));
}

TEST_F(GcFolderCli, BadFlagsAreInputErrors) {
  std::string out, err;
  EXPECT_NE(gc("--apply --squash", out, err), 0);
  EXPECT_TRUE(contains(err, "keeps no history")) << err;
  EXPECT_NE(gc("--grace 1y", out, err), 0);
  EXPECT_TRUE(contains(err, "--grace")) << err;
  EXPECT_NE(gc("--manifest x.yaml", out, err), 0);
  EXPECT_TRUE(contains(err, "give --older-than too")) << err;
  EXPECT_NE(gc("--unreferenced all", out, err), 0);
  for (const auto& [path, content] : layout.files) EXPECT_TRUE(fs::exists(root() / path)) << path;
}

}  // namespace
}  // namespace neuron_cache
