// maintenance::plan_gc / apply_gc (`neuron-cache gc`) on a shared folder (modification times
// listed) and the in-memory store (a Hub: none listed): exactly the folders nothing needs go, what
// a push in flight, a live compile or another writer may need stays, and a push that lands between
// the plan and the deletion keeps its folder.
#include "neuron_cache/maintenance/gc.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "gc_layout.h"
#include "memory_store.h"
#include "neuron_cache/error.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/storage/folder_store.h"
#include "optimum_writer.h"
#include "test_support.h"

namespace neuron_cache::maintenance {
namespace {

namespace fs = std::filesystem;
using testing::GcLayout;
using testing::kGcDay;
using testing::kGcHour;
using testing::MemoryStore;

constexpr int64_t kNow = 1'780'000'000;  // 2026-05-28

net::RetryPolicy quick() {
  return {6, std::chrono::milliseconds(1), std::chrono::milliseconds(2)};
}

GcOptions options(std::optional<int64_t> older_than = 90 * kGcDay) {
  GcOptions o;
  o.now = kNow;
  o.older_than = older_than;
  return o;
}

// options() keeping what the layout's manifest declares (C's entry).
GcOptions declaring(const GcLayout& layout) {
  GcOptions o = options();
  o.declared = {layout.declared_key};
  return o;
}

void set_mtime(const fs::path& path, int64_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// A shared folder holding `layout`, with its modification times.
struct FolderFixture {
  explicit FolderFixture(const GcLayout& layout) : root(dir / "store") {
    fs::create_directories(root);
    storage::create_folder_store(root);
    for (const auto& [path, content] : layout.files) {
      testing::write_file(root / path, content);
      auto it = layout.modified.find(path);
      set_mtime(root / path, it == layout.modified.end() ? kNow - 30 * kGcDay : it->second);
    }
    store = std::make_unique<storage::FolderStore>(root);
  }
  testing::TempDir dir;
  fs::path root;
  std::unique_ptr<storage::FolderStore> store;  // opened once the files are there
};

void put_all(MemoryStore& store, const GcLayout& layout) {
  for (const auto& [path, content] : layout.files) {
    auto it = layout.modified.find(path);
    store.put(path, content, it == layout.modified.end() ? kNow - 30 * kGcDay : it->second);
  }
}

template <typename List>
std::string joined(const List& items) {
  std::string out;
  for (const auto& item : items) out += item + "; ";
  return out;
}

std::set<std::string> kept_reasons(const GcPlan& plan) {
  std::set<std::string> out;
  for (const auto& kept : plan.kept) out.insert(kept.why);
  return out;
}

bool has_reason(const GcPlan& plan, const std::string& part) {
  for (const auto& kept : plan.kept)
    if (kept.why.find(part) != std::string::npos) return true;
  return false;
}

std::set<std::string> lease_paths(const GcPlan& plan) {
  std::set<std::string> out;
  for (const auto& lease : plan.leases) out.insert(lease.path);
  return out;
}

TEST(GcPlan, FolderStoreRemovesExactlyWhatNothingNeeds) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(store, o);

  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'B', 'U'}));
  ASSERT_EQ(plan.dropped.size(), 1u);
  EXPECT_EQ(plan.dropped[0].key, layout.dropped_key);
  EXPECT_EQ(plan.folders.count, 7u);
  EXPECT_EQ(plan.referenced.count, 3u);  // A, C, R
  EXPECT_EQ(plan.configurations, 3u);
  EXPECT_TRUE(has_reason(plan, "grace")) << joined(kept_reasons(plan));
  EXPECT_TRUE(has_reason(plan, "no neuron-cache index")) << joined(kept_reasons(plan));
  EXPECT_EQ(lease_paths(plan),
            (std::set<std::string>{layout.lease_done_old, layout.lease_damaged}));
  uint64_t bytes =
      layout.bytes_below(layout.folder('B') + "/") + layout.bytes_below(layout.folder('U') + "/") +
      layout.files.at(layout.lease_done_old).size() + layout.files.at(layout.lease_damaged).size();
  EXPECT_EQ(plan.freed.bytes, bytes);
  EXPECT_EQ(plan.freed.count, 10u);
  EXPECT_TRUE(plan.problems.empty()) << joined(plan.problems);
  EXPECT_FALSE(plan.applied);
  // A dry run touches nothing.
  for (const auto& [path, content] : layout.files) EXPECT_TRUE(fs::exists(fixture.root / path));
}

TEST(GcApply, FolderStoreDeletesThePlanAndLeavesNoEmptyFolders) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(store, o);
  apply_gc(store, plan, o, quick());

  EXPECT_TRUE(plan.applied);
  EXPECT_EQ(plan.files_deleted, 10u);
  EXPECT_EQ(plan.index_files_rewritten, 1u);
  EXPECT_TRUE(plan.spared.empty());
  for (const auto& [path, content] : layout.files) {
    bool gone = path.starts_with(layout.folder('B') + "/") ||
                path.starts_with(layout.folder('U') + "/") || path == layout.lease_done_old ||
                path == layout.lease_damaged;
    EXPECT_EQ(fs::exists(fixture.root / path), !gone) << path;
  }
  EXPECT_FALSE(fs::exists(fixture.root / layout.folder('B')));
  EXPECT_FALSE(fs::exists(fixture.root / layout.folder('U')));
  // The emptied shard stays, without its entry; the other shard is untouched.
  auto mistral =
      artifact_index::parse_index(testing::read_file(fixture.root / layout.v1_shard_mistral), "t");
  EXPECT_TRUE(mistral.entries.empty());
  for (const auto& [path, content] : layout.files) {
    if (path.starts_with("neuron-cache-index/") && path != layout.v1_shard_mistral) {
      EXPECT_EQ(testing::read_file(fixture.root / path), content) << path;
    }
  }
  // A second run finds nothing more to remove.
  GcPlan again = plan_gc(store, o);
  EXPECT_TRUE(again.removed.empty());
  EXPECT_TRUE(again.dropped.empty());
  EXPECT_TRUE(again.leases.empty());
}

std::set<std::string> leftover_paths(const GcPlan& plan) {
  std::set<std::string> out;
  for (const auto& l : plan.leftovers) out.insert(l.path);
  return out;
}

// What killed writers left in a shared folder, which no publication sweeps: temporary copies and
// probes of exactly neuron-cache's shape older than an hour, anywhere, and empty MODULE_ folders
// nothing references older than the grace. Younger ones (a live writer), other shapes, other
// writers' files and anything behind a symlink stay.
TEST(GcLeftovers, FolderCopiesAndEmptyFoldersAreNamedThenRemoved) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  const fs::path& root = fixture.root;
  std::string c = layout.folder('C');
  std::string version = c.substr(0, c.find('/'));
  auto file = [&](const std::string& path, int64_t modified) {
    testing::write_file(root / path, "partial");
    set_mtime(root / path, modified);
  };
  std::set<std::string> old = {
      c + "/.model.neff.0123456789ab.tmp",                 // a copy killed mid-way
      "neuron-cache-index/.shard.json.aaaaaaaaaaaa.tmp",   // an index write
      "neuron-cache-leases/.lease.json.bbbbbbbbbbbb.tmp",  // a lease probe (write_times)
      ".neuron-cache-store.cccccccccccc.tmp"};             // at the root
  for (const auto& path : old) file(path, kNow - 2 * kGcHour);
  std::set<std::string> untouched = {
      c + "/.model.neff.ba9876543210.tmp",  // 10 minutes old: a live writer
      c + "/.model.neff.0123456789AB.tmp",  // other shapes
      c + "/.model.neff.12345.tmp",
      c + "/model.neff.0123456789ab.tmp",
      c + "/.abc.json.1234-xyz.tmp",  // another writer's
      c + "/..0123456789ab.tmp"};
  for (const auto& path : untouched)
    file(path, path.find("ba98") != std::string::npos ? kNow - 600 : kNow - 2 * kGcDay);
  // Behind a symlink: never followed, and a symlink of the shape is not a file.
  testing::TempDir outside;
  testing::write_file(outside / ".x.0123456789ab.tmp", "not the store's");
  set_mtime(outside / ".x.0123456789ab.tmp", kNow - 2 * kGcDay);
  fs::create_directory_symlink(outside.path(), root / "linked");
  fs::create_symlink(outside / ".x.0123456789ab.tmp", root / ".y.0123456789ab.tmp");
  // Empty MODULE_ folders: an old one goes; a young one, and one an entry references (A's,
  // whose files are missing), stay.
  fs::create_directories(root / version / "MODULE_9999+empty");
  set_mtime(root / version / "MODULE_9999+empty", kNow - 2 * kGcDay);
  fs::create_directories(root / version / "MODULE_9998+young");
  set_mtime(root / version / "MODULE_9998+young", kNow - kGcHour);
  for (const auto& entry : fs::directory_iterator(root / layout.folder('A')))
    fs::remove_all(entry.path());
  set_mtime(root / layout.folder('A'), kNow - 2 * kGcDay);

  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(*fixture.store, o);
  std::set<std::string> expected = old;
  expected.insert(version + "/MODULE_9999+empty");
  EXPECT_EQ(leftover_paths(plan), expected);
  for (const auto& l : plan.leftovers) {
    bool folder = l.path.ends_with("+empty");
    EXPECT_EQ(l.kind,
              folder ? storage::Leftover::Kind::EmptyFolder : storage::Leftover::Kind::Copy);
    EXPECT_EQ(l.age, folder ? 2 * kGcDay : 2 * kGcHour) << l.path;
    EXPECT_FALSE(l.why.empty());
  }
  for (const auto& path : old) EXPECT_TRUE(fs::exists(root / path)) << "a dry run removed " << path;

  apply_gc(*fixture.store, plan, o, quick());
  EXPECT_EQ(plan.leftovers_removed, expected.size()) << joined(plan.problems);
  for (const auto& path : expected) EXPECT_FALSE(fs::exists(root / path)) << path;
  for (const auto& path : untouched) EXPECT_TRUE(fs::exists(root / path)) << path;
  EXPECT_TRUE(fs::exists(outside / ".x.0123456789ab.tmp"));
  EXPECT_TRUE(fs::is_symlink(root / ".y.0123456789ab.tmp"));
  EXPECT_TRUE(fs::exists(root / version / "MODULE_9998+young"));
  EXPECT_TRUE(fs::exists(root / layout.folder('A')));
  EXPECT_TRUE(plan_gc(*fixture.store, o).leftovers.empty());
}

// Between the plan and --apply a leftover may change: each is checked again where it is.
TEST(GcLeftovers, WhatChangedSinceThePlanIsKept) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  const fs::path& root = fixture.root;
  std::string version = layout.folder('C').substr(0, layout.folder('C').find('/'));
  fs::path folder = root / version / "MODULE_9999+empty";
  fs::create_directories(folder);
  set_mtime(folder, kNow - 2 * kGcDay);
  std::string copy = layout.folder('C') + "/.model.neff.0123456789ab.tmp";
  testing::write_file(root / copy, "partial");
  set_mtime(root / copy, kNow - 2 * kGcHour);
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(*fixture.store, o);
  ASSERT_EQ(plan.leftovers.size(), 2u);
  testing::write_file(folder / "model.neff", "a writer's first file");  // no longer empty
  set_mtime(root / copy, kNow - 60);                                    // written again
  // A leftover that is not of this store's shapes is refused, whatever the plan says.
  plan.leftovers.push_back({storage::Leftover::Kind::Copy, "../outside.0123456789ab.tmp", 0, 0});
  plan.leftovers.push_back(
      {storage::Leftover::Kind::Copy, layout.folder('C') + "/model.neff", 0, 0});
  apply_gc(*fixture.store, plan, o, quick());
  EXPECT_EQ(plan.leftovers_removed, 0u);
  EXPECT_EQ(plan.problems.size(), 4u) << joined(plan.problems);
  EXPECT_TRUE(fs::exists(folder / "model.neff"));
  EXPECT_TRUE(fs::exists(root / copy));
  EXPECT_TRUE(fs::exists(root / layout.folder('C') / "model.neff"));
}

// The Hub's commit lands whole: nothing is left behind, and nothing is asked for it.
TEST(GcLeftovers, TheHubHasNone) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcPlan plan = plan_gc(store, declaring(layout));
  EXPECT_TRUE(plan.leftovers.empty());
  EXPECT_TRUE(plan.problems.empty()) << joined(plan.problems);
}

TEST(GcPlan, WithoutOlderThanNoEntryIsDropped) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcPlan plan = plan_gc(store, options(std::nullopt));
  EXPECT_TRUE(plan.dropped.empty());
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'U'}));
  EXPECT_EQ(plan.referenced.count, 4u);  // A, B, C, R
}

TEST(GcPlan, UndeclaredOldEntriesAreDroppedWhateverTheirModel) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcPlan plan = plan_gc(store, options());  // no manifest: C's entry is old and undeclared too
  EXPECT_EQ(plan.dropped.size(), 2u);
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'B', 'C', 'U'}));
}

TEST(GcPlan, UnreferencedModesDecideForeignCompilerFolders) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcOptions o = options(std::nullopt);
  o.unreferenced = Unreferenced::Remove;
  EXPECT_EQ(testing::removed_letters(plan_gc(store, o), layout), (std::set<char>{'U', 'O'}));
  o.unreferenced = Unreferenced::Keep;
  GcPlan kept = plan_gc(store, o);
  EXPECT_TRUE(kept.removed.empty());
  EXPECT_TRUE(has_reason(kept, "--unreferenced keep"));
  // Grace and live leases still hold with remove: Y, written an hour ago, is past a 30 minute
  // grace but was written while a compile of its version is live.
  o.unreferenced = Unreferenced::Remove;
  o.grace = 30 * 60;
  GcPlan short_grace = plan_gc(store, o);
  EXPECT_EQ(testing::removed_letters(short_grace, layout), (std::set<char>{'U', 'O'}));
  EXPECT_TRUE(has_reason(short_grace, "live compile lease"));
}

// optimum-neuron's synchronize writes MODULE_ folders and registry files no neuron-cache index
// lists into a compiler folder that also has one: auto keeps every unreferenced folder there.
TEST(GcPlan, RegistryFilesNoEntryListsKeepTheCompilerFolder) {
  GcLayout layout = testing::gc_layout(kNow);
  std::string foreign = "neuronxcc-" + std::string(testing::kUsageV1) +
                        "/0_REGISTRY/0.4.5/llama/acme/other/99999999999999999999.json";
  layout.files[foreign] = "{}";
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcPlan plan = plan_gc(store, options(std::nullopt));
  EXPECT_TRUE(plan.removed.empty()) << plan.removed.size();
  EXPECT_TRUE(has_reason(plan, "optimum-neuron also writes"));
}

// Files optimum-neuron wrote (its registry writer run by CPython, a traced export's
// MODULE_<registry hash> folder, decoder graphs named by HLO hash) in the compiler folder that
// neuron-cache also indexes: auto removes none of them; remove takes only the graphs nothing
// references, never the traced export its registry file names.
TEST(GcPlan, AFolderOptimumNeuronWroteLosesNothing) {
  GcLayout layout = testing::gc_layout(kNow);
  std::string compiler = "neuronxcc-" + std::string(testing::kUsageV1);
  std::string traced_module;
  nlohmann::json written = testing::optimum_written(testing::optimum_sample_entries(compiler));
  for (const auto& [path, text] : written.items()) {
    layout.files[path] = text.get<std::string>();
    layout.modified[path] = kNow - 100 * kGcDay;
    if (path.find("/org/bert-tiny/") != std::string::npos) {
      std::string name = path.substr(path.rfind('/') + 1);
      traced_module = "MODULE_" + name.substr(0, name.size() - 5);
    }
  }
  ASSERT_FALSE(traced_module.empty());
  testing::add_gc_module(layout, 'T', testing::kUsageV1, traced_module, 800, kNow - 100 * kGcDay);
  testing::add_gc_module(layout, 'G', testing::kUsageV1, "MODULE_8d2f0a61c4b7e9d3a5f1+39f12043",
                         900, kNow - 100 * kGcDay);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;

  GcPlan plan = plan_gc(store, options(std::nullopt));
  EXPECT_TRUE(plan.removed.empty()) << plan.removed.front().path;
  EXPECT_TRUE(has_reason(plan, "optimum-neuron also writes"));
  EXPECT_EQ(plan.referenced.count, 5u);  // A, B, C, R and the traced export T

  GcOptions remove = options(std::nullopt);
  remove.unreferenced = Unreferenced::Remove;
  EXPECT_EQ(testing::removed_letters(plan_gc(store, remove), layout),
            (std::set<char>{'U', 'G', 'O'}));
}

TEST(GcPlan, AnUnreadableShardKeepsItsCompilerVersion) {
  GcLayout layout = testing::gc_layout(kNow);
  layout.files[artifact_index::remote_shard_path(testing::kUsageV1, "acme/broken")] =
      "{\"entries\": {\"x\": [";
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcPlan plan = plan_gc(store, options());
  EXPECT_TRUE(testing::removed_letters(plan, layout).empty());
  EXPECT_TRUE(has_reason(plan, "could not be read whole"));
  ASSERT_FALSE(plan.problems.empty());
  EXPECT_NE(plan.problems[0].find("acme--broken"), std::string::npos) << plan.problems[0];
  // Entries are still dropped by age: their own folders are known.
  EXPECT_EQ(plan.dropped.size(), 2u);
}

TEST(GcPlan, ALiveLeaseKeepsFoldersWrittenSinceItBegan) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcOptions o = options(std::nullopt);
  o.grace = 30 * 60;  // Y (an hour old) is past the grace, but written during the live compile
  GcPlan plan = plan_gc(store, o);
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'U'}));
  EXPECT_TRUE(has_reason(plan, "live compile lease"));
  // Once that compile ended, Y goes.
  testing::write_file(fixture.root / layout.lease_live,
                      testing::gc_lease(lease::State::Released, std::string(32, '1'),
                                        kNow - 2 * kGcHour, kNow - 50 * 60, kNow - 50 * 60));
  EXPECT_EQ(testing::removed_letters(plan_gc(store, o), layout), (std::set<char>{'U', 'Y'}));
}

TEST(GcPlan, AnExpiredCompileLeaseGoesAfterTheGrace) {
  GcLayout layout = testing::gc_layout(kNow);
  layout.files[layout.lease_live] =
      testing::gc_lease(lease::State::Compiling, std::string(32, '1'), kNow - 3 * kGcDay,
                        kNow - 3 * kGcDay, kNow - 3 * kGcDay + 600);  // 10 min after its heartbeat
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcPlan plan = plan_gc(store, options(std::nullopt));
  EXPECT_EQ(lease_paths(plan), (std::set<std::string>{layout.lease_live, layout.lease_done_old,
                                                      layout.lease_damaged}));
  for (const auto& lease : plan.leases) {
    if (lease.path == layout.lease_live) {
      EXPECT_EQ(lease.why, "expired without a result");
    }
  }
}

// A lease of this format that no live holder wrote goes at once, with why: it protects nothing,
// and waiting for it to expire could mean waiting until the year 9999.
TEST(GcPlan, ADamagedLeaseGoesAtOnceWithWhy) {
  GcLayout layout = testing::gc_layout(kNow);
  const std::string future = lease::remote_path(testing::kUsageV1, std::string(32, '5'));
  layout.files[layout.lease_live] =
      testing::gc_lease(lease::State::Compiling, std::string(32, '1'), kNow - kGcHour, kNow - 60,
                        *parse_utc_timestamp("9999-12-31T23:59:59Z"));
  layout.files[future] = testing::gc_lease(
      lease::State::Done, std::string(32, '5'), *parse_utc_timestamp("2099-01-01T00:00:00Z"),
      *parse_utc_timestamp("2099-01-01T00:00:00Z"), *parse_utc_timestamp("2099-01-01T00:10:00Z"));
  layout.modified[future] = kNow - 60;  // within the grace: damaged is enough
  FolderFixture fixture(layout);
  GcPlan plan = plan_gc(*fixture.store, options(std::nullopt));
  EXPECT_EQ(lease_paths(plan),
            (std::set<std::string>{layout.lease_live, future, layout.lease_done_old,
                                   layout.lease_damaged}));
  for (const auto& lease : plan.leases) {
    if (lease.path == layout.lease_live) {
      EXPECT_EQ(lease.why.rfind("damaged: it expires 9999-12-31T23:59:59Z", 0), 0u) << lease.why;
    }
    if (lease.path == future) {
      EXPECT_EQ(lease.why.rfind("damaged: its heartbeat 2099-01-01", 0), 0u) << lease.why;
    }
  }
  collect_garbage(*fixture.store, options(std::nullopt), GcRun{true, false}, quick());
  EXPECT_FALSE(fs::exists(fixture.root / layout.lease_live));
  EXPECT_FALSE(fs::exists(fixture.root / future));
  EXPECT_TRUE(fs::exists(fixture.root / layout.lease_done_young));
}

// A lease claiming a compile from 1970 to 9999 would keep every unreferenced folder of its
// compiler version for ever: it is damaged, so it keeps none, as if that compile had ended.
TEST(GcPlan, ALeaseFrom1970To9999KeepsNoFolder) {
  GcLayout layout = testing::gc_layout(kNow);
  layout.files[layout.lease_live] =
      testing::gc_lease(lease::State::Compiling, std::string(32, '1'), 0, 0,
                        *parse_utc_timestamp("9999-12-31T23:59:59Z"));
  FolderFixture fixture(layout);
  GcOptions o = options(std::nullopt);
  o.grace = 30 * 60;  // Y (an hour old) is past the grace
  GcPlan plan = plan_gc(*fixture.store, o);
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'U', 'Y'}));
  EXPECT_FALSE(has_reason(plan, "live compile lease"));
  EXPECT_EQ(lease_paths(plan).count(layout.lease_live), 1u);
}

// A sound live lease keeps folders for its bounded life only: once it expired by more than the
// grace, the same folders go and so does the lease.
TEST(GcPlan, ALiveLeaseKeepsFoldersOnlyWhileItLives) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  GcOptions o = options(std::nullopt);
  o.grace = 30 * 60;
  EXPECT_EQ(testing::removed_letters(plan_gc(*fixture.store, o), layout), (std::set<char>{'U'}));
  o.now = kNow + kGcHour + o.grace + 1;  // the lease expired at kNow + 1 h, unrenewed
  GcPlan later = plan_gc(*fixture.store, o);
  EXPECT_EQ(testing::removed_letters(later, layout), (std::set<char>{'U', 'Y'}));
  EXPECT_EQ(lease_paths(later).count(layout.lease_live), 1u);
}

// The Hub's tree lists no modification times: the folders that may go and the damaged lease
// files are asked for theirs (the last commit touching each), and only they. Y, an hour old,
// stays by the grace, and the damaged lease, five days old, goes, as on the other stores.
TEST(GcPlan, HubAsksTheTimesOfTheFoldersThatMayGo) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(store, o);
  EXPECT_EQ(plan.kind, "hub");
  EXPECT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'B', 'U'}));
  EXPECT_TRUE(has_reason(plan, "grace")) << joined(kept_reasons(plan));
  EXPECT_EQ(lease_paths(plan),
            (std::set<std::string>{layout.lease_done_old, layout.lease_damaged}));
  EXPECT_FALSE(plan.revision.empty());
  // Without an answer the candidates stay: a failure is not an age.
  MemoryStore failing;
  put_all(failing, layout);
  failing.fail_time_queries();
  GcPlan without = plan_gc(failing, o);
  EXPECT_TRUE(without.removed.empty()) << testing::removed_letters(without, layout).size();
  EXPECT_TRUE(has_reason(without, "no modification time")) << joined(kept_reasons(without));
  EXPECT_EQ(lease_paths(without), (std::set<std::string>{layout.lease_done_old}));
  EXPECT_NE(joined(without.problems).find("could not be read"), std::string::npos)
      << joined(without.problems);
}

// A folder written on the Hub a moment ago is not removed either, whatever references it.
TEST(GcPlan, HubFolderPushedJustNowStaysForTheGrace) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  for (const auto& [path, content] : layout.files) {
    if (path.starts_with(layout.folder('U') + "/")) store.put(path, content, kNow - 60);
  }
  GcOptions o = declaring(layout);
  EXPECT_EQ(testing::removed_letters(plan_gc(store, o), layout), (std::set<char>{'B'}));
}

TEST(GcApply, HubDeletionIsOneCommitThenSquashLeavesOneRevision) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(store, o);
  int commits = store.commits();
  apply_gc(store, plan, o, quick());
  EXPECT_EQ(store.commits(), commits + 2);  // the index rewrite, then the deletion
  for (char letter : {'B', 'U'})
    EXPECT_FALSE(store.has(layout.folder(letter) + "/model.neff")) << letter;
  for (char letter : {'A', 'C', 'R', 'O', 'Y'})
    EXPECT_TRUE(store.has(layout.folder(letter) + "/model.neff")) << letter;
  EXPECT_GT(store.revisions(), 2u);
  squash_after_gc(store, plan);
  EXPECT_EQ(store.revisions(), 1u);
  EXPECT_EQ(plan.squashed_revision, store.head());
  EXPECT_THROW(store.list("", false, plan.revision), Error);  // older revisions stop resolving
}

// A push that references a planned folder again between the plan and the deletion keeps it.
TEST(GcApply, APushBetweenPlanAndDeletionSparesItsFolder) {
  GcLayout layout = testing::gc_layout(kNow);
  for (const auto& [path, content] : layout.files) {
    if (path.starts_with(layout.folder('Y') + "/")) layout.modified[path] = kNow - 5 * kGcDay;
  }
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = options(std::nullopt);
  GcPlan plan = plan_gc(store, o);
  ASSERT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'U', 'Y'}));
  uint64_t planned = plan.freed.bytes;
  auto [path, content] = testing::gc_push("acme/bert", "MODULE_1004+e30acd3a", kNow);
  store.put(path, content);

  apply_gc(store, plan, o, quick());
  EXPECT_EQ(plan.spared, (std::vector<std::string>{layout.folder('U')}));
  EXPECT_TRUE(store.has(layout.folder('U') + "/model.neff"));
  EXPECT_FALSE(store.has(layout.folder('Y') + "/model.neff"));
  EXPECT_EQ(plan.freed.bytes, planned - layout.bytes_below(layout.folder('U') + "/"));
}

// An entry pushed again (a new created_at) between the plan and the rewrite stays, and so does
// the folder it references.
TEST(GcApply, AnEntryPushedAgainIsNotDropped) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;
  GcOptions o = declaring(layout);
  GcPlan plan = plan_gc(store, o);
  ASSERT_EQ(plan.dropped.size(), 1u);
  auto [path, content] = testing::gc_push("acme/mistral", "MODULE_1002+e30acd3a", kNow);
  testing::write_file(fixture.root / path, content);

  apply_gc(store, plan, o, quick());
  EXPECT_EQ(plan.index_files_rewritten, 0u);
  EXPECT_EQ(plan.spared, (std::vector<std::string>{layout.folder('B')}));
  EXPECT_TRUE(fs::exists(fixture.root / layout.folder('B') / "model.neff"));
  EXPECT_FALSE(fs::exists(fixture.root / layout.folder('U')));
  auto mistral =
      artifact_index::parse_index(testing::read_file(fixture.root / layout.v1_shard_mistral), "t");
  EXPECT_EQ(mistral.entries.size(), 1u);
}

// A shared folder deletes without a condition: a push that publishes an entry naming a folder
// while gc deletes it is found afterwards and said.
class RacingFolderStore : public storage::FolderStore {
 public:
  RacingFolderStore(const fs::path& root, std::function<void()> before_delete)
      : FolderStore(root), before_delete_(std::move(before_delete)) {}
  storage::CommitResult commit(const std::vector<storage::CommitOperation>& operations,
                               const std::string& message,
                               const std::optional<std::string>& parent) override {
    if (!operations.empty() && operations[0].kind == storage::CommitOperation::Kind::Delete &&
        before_delete_) {
      before_delete_();
      before_delete_ = nullptr;
    }
    return FolderStore::commit(operations, message, parent);
  }

 private:
  std::function<void()> before_delete_;
};

TEST(GcApply, APushDuringAFolderDeletionIsReported) {
  GcLayout layout = testing::gc_layout(kNow);
  FolderFixture fixture(layout);
  auto push = [&] {
    auto [path, content] = testing::gc_push("acme/bert", "MODULE_1004+e30acd3a", kNow);
    testing::write_file(fixture.root / path, content);
  };
  RacingFolderStore store(fixture.root, push);
  GcOptions o = options(std::nullopt);
  GcPlan plan = plan_gc(store, o);
  ASSERT_EQ(testing::removed_letters(plan, layout), (std::set<char>{'U'}));
  apply_gc(store, plan, o, quick());
  ASSERT_EQ(plan.problems.size(), 1u);
  EXPECT_NE(plan.problems[0].find(layout.folder('U')), std::string::npos) << plan.problems[0];
  EXPECT_NE(plan.problems[0].find("push that configuration again"), std::string::npos);
}

// An index file listed larger than one may be at deletion time is never downloaded, and nothing
// is deleted.
TEST(GcApply, AnOversizedIndexFileAtDeletionTimeDeletesNothing) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = options(std::nullopt);
  GcPlan plan = plan_gc(store, o);
  ASSERT_FALSE(plan.removed.empty());
  store.lie_about_sizes("neuron-cache-index", remote::kMaxIndexFileBytes);
  try {
    apply_gc(store, plan, o, quick());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("larger than an index file may be"), std::string::npos)
        << error.what();
  }
  for (const auto& [path, content] : layout.files) EXPECT_TRUE(store.has(path)) << path;
}

// A store whose index cannot be read at deletion time deletes nothing.
TEST(GcApply, AnIndexThatFailsAtDeletionTimeDeletesNothing) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = options(std::nullopt);
  GcPlan plan = plan_gc(store, o);
  ASSERT_FALSE(plan.removed.empty());
  store.fail_reads("neuron-cache-index", 100);
  EXPECT_THROW(apply_gc(store, plan, o, quick()), Error);
  for (const auto& [path, content] : layout.files) EXPECT_TRUE(store.has(path)) << path;
}

TEST(GcPlan, ARootThatCannotBeListedDecidesNothing) {
  MemoryStore store;
  put_all(store, testing::gc_layout(kNow));
  store.fail_reads("", 100);
  EXPECT_THROW(plan_gc(store, options()), Error);
}

TEST(GcPlan, TooManyFilesAreRefused) {
  GcLayout layout = testing::gc_layout(kNow);
  MemoryStore store;
  put_all(store, layout);
  GcOptions o = options();
  o.max_files = 10;
  try {
    plan_gc(store, o);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("more than 10 files"), std::string::npos)
        << error.what();
  }
}

TEST(GcPlan, EmptyStoreRemovesNothing) {
  MemoryStore store;
  GcPlan plan = plan_gc(store, options());
  EXPECT_EQ(plan.folders.count, 0u);
  EXPECT_TRUE(plan.removed.empty());
  apply_gc(store, plan, options(), quick());
  EXPECT_EQ(store.commits(), 0);
}

// Production shape: 500 models of 20 configurations (10,000 entries, one shard per model), each
// entry with its own MODULE_ folder, and 1,000 folders nothing references. Exactly those go, and
// only the planned files are deleted.
TEST(GcScale, TenThousandConfigurationsRemoveExactlyTheUnreferenced) {
  constexpr int kModels = 500, kConfigs = 20, kOrphans = 1000;
  GcLayout layout;
  std::string v1 = testing::kUsageV1;
  for (int m = 0; m < kModels; ++m) {
    std::string model = "org/model-" + std::to_string(m);
    std::vector<artifact_index::Entry> entries;
    for (int c = 0; c < kConfigs; ++c) {
      std::string module = "MODULE_" + std::to_string(100000 + m * kConfigs + c) + "+e30acd3a";
      layout.files["neuronxcc-" + v1 + "/" + module + "/model.neff"] = "n";
      layout.files["neuronxcc-" + v1 + "/" + module + "/model.done"] = "";
      entries.push_back(testing::usage_entry(model, v1, c + 1, utc_text(kNow - kGcDay), {module}));
    }
    testing::UsageLayout shard;
    testing::add_usage_shard(shard, model, v1, entries);
    layout.files.insert(shard.files.begin(), shard.files.end());
  }
  for (int i = 0; i < kOrphans; ++i) {
    std::string module = "MODULE_" + std::to_string(900000 + i) + "+e30acd3a";
    layout.files["neuronxcc-" + v1 + "/" + module + "/model.neff"] = "orphan";
    layout.files["neuronxcc-" + v1 + "/" + module + "/model.done"] = "";
  }
  for (const auto& [path, content] : layout.files) layout.modified[path] = kNow - 10 * kGcDay;
  FolderFixture fixture(layout);
  storage::FolderStore& store = *fixture.store;

  GcPlan plan = plan_gc(store, options(std::nullopt));
  EXPECT_EQ(plan.configurations, uint64_t(kModels * kConfigs));
  EXPECT_EQ(plan.folders.count, uint64_t(kModels * kConfigs + kOrphans));
  EXPECT_EQ(plan.removed.size(), size_t(kOrphans));
  EXPECT_EQ(plan.freed.bytes, uint64_t(kOrphans * 6));
  for (const auto& folder : plan.removed)
    EXPECT_NE(folder.path.find("MODULE_9"), std::string::npos) << folder.path;
  apply_gc(store, plan, options(std::nullopt), quick());
  EXPECT_EQ(plan.files_deleted, size_t(2 * kOrphans));
  EXPECT_TRUE(plan_gc(store, options(std::nullopt)).removed.empty());
}

TEST(GcOptionsText, DurationsAndModes) {
  EXPECT_EQ(parse_duration("90d", "--older-than"), 90 * kGcDay);
  EXPECT_EQ(parse_duration("12h", "--grace"), 12 * kGcHour);
  EXPECT_EQ(parse_duration("2w", "x"), 14 * kGcDay);
  EXPECT_EQ(parse_duration("30m", "x"), 1800);
  EXPECT_EQ(parse_duration("45s", "x"), 45);
  EXPECT_EQ(parse_duration("0", "x"), 0);
  for (const char* bad : {"", "d", "-1d", "1y", "1.5d", "99999999999999999999d", "1 d"})
    EXPECT_THROW(parse_duration(bad, "--grace"), Error) << bad;
  EXPECT_EQ(duration_text(90 * kGcDay), "90 days");
  EXPECT_EQ(unreferenced_named("auto"), Unreferenced::Auto);
  EXPECT_EQ(unreferenced_named("remove"), Unreferenced::Remove);
  EXPECT_FALSE(unreferenced_named("all"));
}

}  // namespace
}  // namespace neuron_cache::maintenance
