// CaptureCache tells exactly which entries a compile run of the stand-in (stand_in.h) produced
// and which cached ones it reused, installs only complete ones, and never writes outside the
// cache root.
#include "neuron_cache/compile/capture.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "neuron_cache/compile/runner.h"
#include "neuron_cache/compile/seed_view.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/entry_install.h"
#include "stand_in.h"
#include "test_support.h"

namespace neuron_cache::compile {
namespace {

using testing::contains;
using testing::Kind;
using testing::make_entry;
using testing::read_file;
using testing::snapshot_tree;
using testing::TempDir;
using testing::write_file;

CapturedModule captured(const std::string& name) {
  return {kCompiler, name};
}

using Modules = std::vector<CapturedModule>;

// ---------------------------------------------------------------------------------------------
// CaptureCache.

class Capture : public ::testing::Test {
 protected:
  fs::path root() const { return tmp_ / "cache"; }
  fs::path view(int n = 0) const {
    return root() / ".cache/huggingface/neuron-cache-work" / ("view-" + std::to_string(n));
  }

  // The seeded views of this "process" (the pipeline keeps one SeedViews for all its runs).
  SeedViews& views() {
    if (!views_) views_ = std::make_unique<SeedViews>(root());
    return *views_;
  }
  // What a later process starts from: the views on disk and their state files, nothing else.
  void new_process() { views_.reset(); }

  // One compile run through a seeded view, as the product does it.
  CaptureResult capture(const Config& config, bool adopt = true, int expected_exit = 0,
                        const std::map<std::string, std::string>& env = {},
                        size_t* installed = nullptr, SeedViews* through = nullptr) {
    CaptureCache cache(through ? *through : views(), "test");
    RunOutcome outcome = stand_in_.run(config, cache.dir(), env);
    EXPECT_EQ(outcome.exit_code, expected_exit) << stand_in_.last_log();
    CaptureResult result = cache.collect(outcome.exit_code == 0);
    size_t count = adopt ? cache.adopt(result) : 0;
    if (installed) *installed = count;
    return result;
  }

  fs::path real(const std::string& module) const { return root() / kCompiler / module; }

  TempDir tmp_;
  StandIn stand_in_{tmp_};
  std::unique_ptr<SeedViews> views_;
};

bool is_success(const fs::path& dir) {
  return fs::is_regular_file(fs::symlink_status(dir / "model.neff")) &&
         fs::is_regular_file(fs::symlink_status(dir / "model.done"));
}

TEST_F(Capture, AFirstRunProducesBothGraphsAndAdoptsThem) {
  Config config;
  size_t installed = 0;
  CaptureResult result = capture(config, true, 0, {}, &installed);
  Modules expected = {captured(ctx_module(config)), captured(tkg_module(config))};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(result.produced, expected);
  EXPECT_TRUE(result.used.empty());
  EXPECT_TRUE(result.failed.empty());
  EXPECT_TRUE(result.usage_tracked);
  EXPECT_EQ(result.registry_files.size(), 2u);
  EXPECT_EQ(installed, 2u);
  for (const auto& module : expected) {
    EXPECT_TRUE(is_success(real(module.name))) << module.name;
    EXPECT_FALSE(fs::exists(real(module.name) / "model.hlo_module.pb.lock"));
    EXPECT_EQ(fs::file_size(real(module.name) / "model.neff"), 65536u);
  }
  local::CacheTree tree = local::LocalCache(root()).scan("");
  ASSERT_EQ(tree.compilers.size(), 1u);
  for (const auto& module : tree.compilers[0].modules) {
    EXPECT_EQ(module.state, layout::EntryState::Success) << module.name;
  }
}

TEST_F(Capture, RegistryFilesAreAdoptedWithTheAliasPointingAtTheRealRoot) {
  CaptureResult result = capture(Config{});
  ASSERT_EQ(result.registry_files.size(), 2u);
  sys::SafeDir compiler = sys::SafeDir::open(root() / kCompiler);
  std::vector<local::RegistryFile> files = local::LocalCache(root()).scan_registry(compiler);
  ASSERT_EQ(files.size(), 2u);
  for (const auto& file : files) {
    ASSERT_TRUE(file.record) << file.path << ": " << file.problem;
    EXPECT_TRUE(file.record->hash_matches);
    EXPECT_TRUE(contains(result.registry_files[0] + result.registry_files[1], file.path));
    if (!file.is_link) continue;
    // Relative, so a copy or move of the cache keeps it (optimum-neuron's own are absolute).
    fs::path link = compiler.path() / file.path;
    EXPECT_TRUE(fs::read_symlink(link).is_relative()) << fs::read_symlink(link);
    fs::path target = (link.parent_path() / fs::read_symlink(link)).lexically_normal();
    EXPECT_TRUE(target.string().starts_with(fs::absolute(root()).string() + "/" + kCompiler + "/"))
        << target;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target)));
  }
}

TEST_F(Capture, ADifferentSequenceLengthReusesTheSharedTokenGraph) {
  Config first;
  capture(first);
  Config second;
  second.sequence = 512;
  size_t installed = 0;
  CaptureResult result = capture(second, true, 0, {}, &installed);
  EXPECT_EQ(result.produced, Modules{captured(ctx_module(second))});
  EXPECT_EQ(result.used, Modules{captured(tkg_module(first))});
  EXPECT_TRUE(result.failed.empty());
  // The registry is not seeded (each run starts with an empty one): the run writes its primary
  // file and its alias, both new to the real cache.
  EXPECT_EQ(result.registry_files.size(), 2u);
  EXPECT_EQ(installed, 1u);
  EXPECT_EQ(stand_in_.calls().back()["hits"], nlohmann::json::array({tkg_module(first)}));
  EXPECT_TRUE(is_success(real(ctx_module(second))));
}

TEST_F(Capture, AnUnrelatedConfigurationUsesNothing) {
  capture(Config{});
  Config other;
  other.model = "org/other";
  CaptureResult result = capture(other);
  EXPECT_TRUE(result.used.empty());
  EXPECT_EQ(result.produced.size(), 2u);
}

TEST_F(Capture, ParallelRunsEachReportOnlyTheirOwnUse) {
  Config tiny, second;
  second.model = "org/second";
  capture(tiny);
  capture(second);
  // Both runs' views hold hard links to both token graphs (the same inodes): each run must see
  // only the opens made through its own view.
  Config tiny_long = tiny, second_long = second;
  tiny_long.sequence = second_long.sequence = 1024;
  CaptureResult results[2];
  std::thread a([&] { results[0] = capture(tiny_long, false, 0, {{"STAND_IN_DELAY", "0.3"}}); });
  std::thread b([&] { results[1] = capture(second_long, false, 0, {{"STAND_IN_DELAY", "0.3"}}); });
  a.join();
  b.join();
  EXPECT_EQ(results[0].used, Modules{captured(tkg_module(tiny))});
  EXPECT_EQ(results[1].used, Modules{captured(tkg_module(second))});
  EXPECT_EQ(results[0].produced, Modules{captured(ctx_module(tiny_long))});
  EXPECT_EQ(results[1].produced, Modules{captured(ctx_module(second_long))});
}

TEST_F(Capture, AFailedCompileIsReportedAndNeverAdopted) {
  Config failing;
  failing.sequence = 256;
  size_t installed = 99;
  CaptureResult result =
      capture(failing, true, 70, {{"STAND_IN_FAIL", "sequence_length=256"}}, &installed);
  EXPECT_EQ(result.failed, Modules{captured(ctx_module(failing))});
  EXPECT_TRUE(result.produced.empty());
  EXPECT_TRUE(result.registry_files.empty());
  EXPECT_EQ(installed, 0u);
  EXPECT_FALSE(fs::exists(real(ctx_module(failing))));
  local::CacheTree tree = local::LocalCache(root()).scan("");
  for (const auto& compiler : tree.compilers) EXPECT_TRUE(compiler.modules.empty());
}

// Traced exports: the stand-in copies the export folder whole to MODULE_<entry hash>.
const std::map<std::string, std::string> kTraced = {{"STAND_IN_TRACED", "1"}};
const std::map<std::string, std::string> kDiffusion = {{"STAND_IN_TRACED", "1"},
                                                       {"STAND_IN_DIFFUSION", "1"}};

layout::EntryState real_state(const fs::path& root, const std::string& module) {
  sys::SafeDir compiler = sys::SafeDir::open(root / kCompiler);
  return local::LocalCache(root).inspect_module(compiler, module).state;
}

TEST_F(Capture, ATracedExportIsProducedAdoptedThenUsedFromTheView) {
  size_t installed = 0;
  CaptureResult first = capture(Config{}, true, 0, kTraced, &installed);
  ASSERT_EQ(first.produced.size(), 1u);
  const std::string name = first.produced[0].name;
  EXPECT_TRUE(layout::is_traced_module_name(name)) << name;
  EXPECT_TRUE(first.failed.empty());
  EXPECT_EQ(first.registry_files.size(), 2u);
  EXPECT_EQ(installed, 1u);
  EXPECT_EQ(real_state(root(), name), layout::EntryState::Traced);
  EXPECT_EQ(fs::file_size(real(name) / "model.neuron"), 65536u);

  CaptureResult second = capture(Config{}, true, 0, kTraced);
  EXPECT_EQ(second.used, Modules{captured(name)});
  EXPECT_TRUE(second.produced.empty());
  EXPECT_TRUE(second.failed.empty());
  EXPECT_EQ(stand_in_.calls().back()["hits"], nlohmann::json::array({name}));
}

TEST_F(Capture, ADiffusionExportIsAdoptedWithItsComponentFolders) {
  CaptureResult first = capture(Config{}, true, 0, kDiffusion);
  ASSERT_EQ(first.produced.size(), 1u);
  const std::string name = first.produced[0].name;
  EXPECT_EQ(real_state(root(), name), layout::EntryState::Traced);
  for (const char* file :
       {"model_index.json", "unet/config.json", "unet/model.neuron", "text_encoder/config.json",
        "text_encoder/model.neuron", "tokenizer/tokenizer.json"}) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(real(name) / file))) << file;
  }
  CaptureResult second = capture(Config{}, true, 0, kDiffusion);
  EXPECT_EQ(second.used, Modules{captured(name)}) << "seeded with its sub-folders";
  EXPECT_TRUE(second.produced.empty());
}

TEST_F(Capture, ATracedExportOfAFailedRunIsNeverAdopted) {
  // config.json missing; the folder whole; the folder whole and its registry entry written
  for (const char* at : {"copy", "after", "registry"}) {
    auto env = kTraced;
    env["STAND_IN_FAIL"] = "model=";
    env["STAND_IN_TRACED_FAIL_AT"] = at;
    size_t installed = 99;
    CaptureResult result = capture(Config{}, true, 70, env, &installed);
    EXPECT_EQ(result.failed.size(), 1u) << at;
    EXPECT_TRUE(result.produced.empty()) << at;
    EXPECT_EQ(installed, 0u) << at;
    local::CacheTree tree = local::LocalCache(root()).scan("");
    for (const auto& compiler : tree.compilers) {
      EXPECT_TRUE(compiler.modules.empty()) << at;
      EXPECT_TRUE(compiler.registry.empty()) << at << ": the entry of a folder not adopted";
    }
  }
}

TEST_F(Capture, PlantedSymlinksAreNeitherSeededNorWrittenThrough) {
  fs::path outside = tmp_ / "outside";
  make_entry(outside, "MODULE_1+d7cde3b5", Kind::Success);
  write_file(outside / "secret.neff", "not yours");
  fs::create_directories(root() / kCompiler);
  fs::create_directory_symlink(outside / kCompiler / "MODULE_1+d7cde3b5",
                               root() / kCompiler / "MODULE_evil+d7cde3b5");
  fs::create_directory_symlink(outside / kCompiler, root() / "neuronxcc-9.9.9");
  fs::path bad = make_entry(root(), "MODULE_badlink+d7cde3b5", Kind::Success);
  fs::remove(bad / "compile_flags.json");
  fs::create_symlink(outside / "secret.neff", bad / "compile_flags.json");
  auto before = snapshot_tree(outside);

  CaptureCache cache(views(), "planted");
  fs::path staged = cache.dir() / kCompiler;
  EXPECT_FALSE(fs::exists(fs::symlink_status(staged / "MODULE_evil+d7cde3b5")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(staged / "MODULE_badlink+d7cde3b5")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(cache.dir() / "neuronxcc-9.9.9")));
  ASSERT_EQ(cache.not_seeded().size(), 1u);
  EXPECT_TRUE(contains(cache.not_seeded()[0], "MODULE_badlink+d7cde3b5"));
  ASSERT_EQ(stand_in_.run(Config{}, cache.dir()).exit_code, 0);
  CaptureResult result = cache.collect();
  EXPECT_TRUE(result.used.empty());
  EXPECT_EQ(cache.adopt(result), 2u);
  EXPECT_EQ(snapshot_tree(outside), before);
  EXPECT_TRUE(fs::is_symlink(root() / kCompiler / "MODULE_evil+d7cde3b5"));
}

TEST_F(Capture, ASymlinkedRegistryFolderIsRefusedForWriting) {
  fs::path outside = tmp_ / "outside";
  fs::create_directories(outside);
  fs::create_directories(root() / kCompiler / "0_REGISTRY" / "0.4.5");
  fs::create_directory_symlink(outside, root() / kCompiler / "0_REGISTRY" / "0.4.5" / "llama");
  CaptureCache cache(views(), "planted");
  ASSERT_EQ(stand_in_.run(Config{}, cache.dir()).exit_code, 0);
  CaptureResult result = cache.collect();
  EXPECT_THROW(cache.adopt(result), Error);
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_TRUE(is_success(real(ctx_module(Config{}))));  // entries go in before registry files
}

TEST_F(Capture, TrustedSymlinkedFilesAreSeededAsLinksToTheirTarget) {
  Config first;
  capture(first);
  // As after a Hub download: the NEFF is a symlink into the Hugging Face file cache. The entry
  // is made anew, as an install does (a view takes an entry changed in place for unchanged).
  fs::path hub = tmp_ / "hub";
  fs::path module = real(tkg_module(first));
  fs::path fresh = root() / kCompiler / "fresh";
  fs::copy(module, fresh);
  write_file(hub / "blob", read_file(fresh / "model.neff"));
  fs::remove(fresh / "model.neff");
  fs::create_symlink(hub / "blob", fresh / "model.neff");
  fs::remove_all(module);
  fs::rename(fresh, module);

  new_process();
  {
    CaptureCache untrusting(views(), "untrusting");
    EXPECT_FALSE(fs::exists(untrusting.dir() / kCompiler / tkg_module(first)));
  }
  // Another process that trusts the Hugging Face cache: the view it finds was seeded under
  // less trust, so it is rebuilt (and one seeded under more trust would be too).
  SeedViews trusting(root(), {hub});
  CaptureCache cache(trusting, "trusting");
  EXPECT_TRUE(cache.not_seeded().empty());
  fs::path staged = cache.dir() / kCompiler / tkg_module(first) / "model.neff";
  struct stat staged_info {
  }, blob_info{};
  ASSERT_EQ(stat(staged.c_str(), &staged_info), 0);
  ASSERT_EQ(stat((hub / "blob").c_str(), &blob_info), 0);
  EXPECT_TRUE(fs::is_symlink(staged));  // into the view's .links folder, hard-linked to the blob
  EXPECT_EQ(staged_info.st_ino, blob_info.st_ino);
  Config second = first;
  second.sequence = 2048;
  ASSERT_EQ(stand_in_.run(second, cache.dir()).exit_code, 0);
  EXPECT_EQ(cache.collect().used, Modules{captured(tkg_module(first))});
}

TEST_F(Capture, TheWorkFolderLivesInTheRootAndGoesWithTheObject) {
  fs::path work;
  {
    CaptureCache cache(root(), "my label/../x");
    work = cache.dir();
    EXPECT_TRUE(fs::is_directory(work));
    EXPECT_EQ(work.parent_path(), fs::absolute(root()) / ".cache/huggingface/neuron-cache-work");
    EXPECT_TRUE(work.filename().string().starts_with("my-label-..-x-")) << work;
    EXPECT_EQ(work.filename().string().size(), std::string("my-label-..-x-").size() + 8);
    struct stat info {};
    ASSERT_EQ(stat(work.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0755u);
    ASSERT_EQ(stand_in_.run(Config{}, cache.dir()).exit_code, 0);
  }
  EXPECT_FALSE(fs::exists(work));
}

TEST_F(Capture, AbandonedWorkFoldersAreRemovedButLiveOnesKept) {
  fs::path area = root() / ".cache/huggingface/neuron-cache-work";
  write_file(area / "old-deadbeef" / kCompiler / "MODULE_1+d7cde3b5" / "model.neff", "left over");
  // A process killed while it held a CaptureCache: its flock died with it.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    CaptureCache cache(root(), "killed");
    std::string path = cache.dir().string();
    if (write(fds[1], path.data(), path.size()) < 0) _exit(1);
    close(fds[1]);
    raise(SIGKILL);
  }
  close(fds[1]);
  char buffer[4096];
  ssize_t n = read(fds[0], buffer, sizeof buffer);
  close(fds[0]);
  ASSERT_GT(n, 0);
  fs::path killed(std::string(buffer, static_cast<size_t>(n)));
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(fs::is_directory(killed));

  CaptureCache live(root(), "live");
  EXPECT_FALSE(fs::exists(area / "old-deadbeef"));
  EXPECT_FALSE(fs::exists(killed));
  CaptureCache another(root(), "another");
  EXPECT_TRUE(fs::is_directory(live.dir()));
  EXPECT_EQ(remove_abandoned_work(root()), 0u);
  EXPECT_TRUE(fs::is_directory(another.dir()));
}

TEST_F(Capture, TheRootIsCreatedWhenMissing) {
  fs::path missing = tmp_ / "new" / "cache";
  SeedViews views(missing);
  EXPECT_TRUE(fs::is_directory(missing));
  CaptureCache cache(views, "new");
  CaptureResult result = cache.collect();
  EXPECT_TRUE(result.produced.empty() && result.used.empty() && result.failed.empty());
  EXPECT_EQ(cache.adopt(result), 0u);
}

// ---------------------------------------------------------------------------------------------
// Seeded views (seed_view.h): what a run reuses and records, what it costs, and how views stay
// right when runs are parallel, killed, or the cache changes under them.

// The entries seeded in a view or staging cache (their model.neff is a symlink into .links).
std::set<std::string> seeded_in(const fs::path& url) {
  std::set<std::string> names;
  if (!fs::is_directory(url / kCompiler)) return names;
  for (const auto& item : fs::directory_iterator(url / kCompiler)) {
    if (fs::is_symlink(item.path() / "model.neff")) names.insert(item.path().filename());
  }
  return names;
}

std::set<std::string> complete_in(const fs::path& root) {
  std::set<std::string> names;
  for (const auto& item : fs::directory_iterator(root / kCompiler)) {
    if (is_success(item.path())) names.insert(item.path().filename());
  }
  return names;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) names.insert(item.path().filename());
  return names;
}

SeedStats minus(SeedStats a, const SeedStats& b) {
  a.views_built -= b.views_built, a.full_listings -= b.full_listings;
  a.names_listed -= b.names_listed, a.entries_checked -= b.entries_checked;
  a.entries_seeded -= b.entries_seeded, a.entries_unseeded -= b.entries_unseeded;
  a.links_made -= b.links_made;
  return a;
}

TEST_F(Capture, AFineTuneReusesEveryGraphOfItsBaseModelAndRecordsThem) {
  Config base;
  capture(base);
  new_process();
  Config tuned = base;
  tuned.model = "org/tiny-chat";
  size_t installed = 99;
  CaptureResult result =
      capture(tuned, true, 0, {{"STAND_IN_GRAPH_MODEL", base.model}}, &installed);
  Modules both = {captured(ctx_module(base)), captured(tkg_module(base))};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(result.used, both);
  EXPECT_TRUE(result.produced.empty());
  EXPECT_EQ(installed, 0u);
  EXPECT_EQ(stand_in_.calls().back()["hits"].size(), 2u) << stand_in_.last_log();
  EXPECT_EQ(stand_in_.calls().back()["compiled"], nlohmann::json::array());
  EXPECT_EQ(result.registry_files.size(), 2u);  // its own registry entry and alias
}

TEST_F(Capture, WhatARunMakesIsCapturedExactlyAndTheViewKeepsNoneOfItsLeftovers) {
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  make_entry(root(), "MODULE_2+d7cde3b5", Kind::Failed);  // a cached failure is not seeded
  CaptureResult result;
  {
    CaptureCache cache(views(), "exact");
    fs::path url = cache.dir();
    EXPECT_EQ(seeded_in(url), std::set<std::string>{"MODULE_1+d7cde3b5"});
    EXPECT_FALSE(fs::exists(url / kCompiler / "MODULE_2+d7cde3b5"));
    // What libneuronxla does (a hit, a success, a failure), and what else a command may leave.
    EXPECT_EQ(read_file(url / kCompiler / "MODULE_1+d7cde3b5" / "model.neff"),
              "neff-bytes-MODULE_1+d7cde3b5");
    make_entry(url, "MODULE_3+d7cde3b5", Kind::Success);
    make_entry(url, "MODULE_4+d7cde3b5", Kind::Failed);
    fs::create_directories(url / kCompiler / "MODULE_5+d7cde3b5");
    fs::remove(url / kCompiler / "MODULE_5+d7cde3b5");
    write_file(url / "lock", "");
    write_file(url / kCompiler / "notes.txt", "x");
    write_file(url / kCompiler / "0_REGISTRY" / "0.4.5" / "digest" / "h.json", "{}");
    result = cache.collect();
    EXPECT_EQ(result.produced, Modules{captured("MODULE_3+d7cde3b5")});
    EXPECT_EQ(result.failed, Modules{captured("MODULE_4+d7cde3b5")});
    EXPECT_EQ(result.used, Modules{captured("MODULE_1+d7cde3b5")});
    EXPECT_EQ(result.registry_files,
              std::vector<std::string>{std::string(kCompiler) + "/0_REGISTRY/0.4.5/digest/h.json"});
    EXPECT_EQ(cache.adopt(result), 1u);
    EXPECT_TRUE(fs::exists(url / kCompiler / "MODULE_4+d7cde3b5" / "model.log"));
  }
  // Given back: the view holds the complete entries of the cache, the run's among them (seeded
  // like the others), and nothing else the run left.
  EXPECT_EQ(names_in(view()), (std::set<std::string>{".links", ".state", kCompiler}));
  EXPECT_EQ(names_in(view() / kCompiler),
            (std::set<std::string>{"MODULE_1+d7cde3b5", "MODULE_3+d7cde3b5"}));
  EXPECT_EQ(seeded_in(view()), names_in(view() / kCompiler));
  EXPECT_TRUE(is_success(real("MODULE_3+d7cde3b5")));
  EXPECT_FALSE(fs::exists(real("MODULE_4+d7cde3b5")));
  EXPECT_EQ(read_file(root() / kCompiler / "0_REGISTRY/0.4.5/digest/h.json"), "{}");
}

// Issue 24 (1): only the marks of a failed compile (or a failed command) make a new folder
// failed; a successful command's folder with no NEFF of its own and no link is "unlinked" (the
// hub proxy handed libneuronxla the NEFF from the HF file cache), one with links "proxied".
TEST_F(Capture, AFolderWithoutANeffOfASuccessfulCommandIsUnlinkedNotFailed) {
  auto lay_out = [](const fs::path& url) {
    make_entry(url, "MODULE_1+d7cde3b5", Kind::Empty);              // the graph only
    make_entry(url, "MODULE_2+d7cde3b5", Kind::Locked);             // the graph and its lock
    fs::create_directories(url / kCompiler / "MODULE_3+d7cde3b5");  // nothing
    make_entry(url, "MODULE_4+d7cde3b5", Kind::Failed);             // model.log
    fs::path neff_only = make_entry(url, "MODULE_5+d7cde3b5", Kind::Empty);
    write_file(neff_only / "model.neff", "a NEFF without model.done");
    fs::path other = make_entry(url, "MODULE_6+d7cde3b5", Kind::Empty);
    write_file(other / "notes.txt", "a file of its own");
    fs::path linked = make_entry(url, "MODULE_7+d7cde3b5", Kind::Empty);
    fs::create_symlink("/somewhere/hub/models--a--b/snapshots/c/model.neff", linked / "model.neff");
  };
  for (bool succeeded : {true, false}) {
    SCOPED_TRACE(succeeded ? "the command succeeded" : "the command failed");
    CaptureResult result;
    {
      CaptureCache cache(views(), "shapes");
      lay_out(cache.dir());
      result = cache.collect(succeeded);
      EXPECT_EQ(cache.adopt(result), 0u) << "nothing is complete here";
    }
    Modules without_neff = {captured("MODULE_1+d7cde3b5"), captured("MODULE_2+d7cde3b5"),
                            captured("MODULE_3+d7cde3b5")};
    Modules failed = {captured("MODULE_4+d7cde3b5"), captured("MODULE_5+d7cde3b5"),
                      captured("MODULE_6+d7cde3b5")};
    if (succeeded) {
      EXPECT_EQ(result.unlinked, without_neff);
    } else {
      EXPECT_TRUE(result.unlinked.empty());
      failed.insert(failed.begin(), without_neff.begin(), without_neff.end());
    }
    EXPECT_EQ(result.failed, failed);
    EXPECT_EQ(result.proxied, Modules{captured("MODULE_7+d7cde3b5")});
    EXPECT_TRUE(result.produced.empty());
    for (int i = 1; i <= 7; ++i) {
      EXPECT_FALSE(fs::exists(real("MODULE_" + std::to_string(i) + "+d7cde3b5"))) << i;
    }
  }
}

// Entries with the two files that make them complete, written fast.
void lay_out_entries(const fs::path& root, int count) {
  for (int i = 0; i < count; ++i) {
    fs::path dir = root / kCompiler / ("MODULE_" + std::to_string(1000000 + i) + "+d7cde3b5");
    fs::create_directories(dir);
    write_file(dir / "model.neff", "neff");
    write_file(dir / "model.done", "");
  }
}

TEST_F(Capture, WithTenThousandEntriesARunTouchesOnlyWhatItMadeOrOpened) {
  constexpr int kEntries = 10000;
  lay_out_entries(root(), kEntries);
  Config first;
  capture(first);  // the first run ever builds the view: every entry, once
  EXPECT_EQ(views().stats().views_built, 1u);
  EXPECT_GE(views().stats().entries_seeded, static_cast<size_t>(kEntries));
  new_process();  // later runs, in another process: the view is trusted from its state file
  Config config = first;
  for (int i = 0; i < 3; ++i) {
    config.sequence = 256 << i;
    SeedStats before = views().stats();
    CaptureResult result = capture(config);
    SeedStats cost = minus(views().stats(), before);
    EXPECT_EQ(result.produced, Modules{captured(ctx_module(config))});
    EXPECT_EQ(result.used, Modules{captured(tkg_module(first))});
    // Nothing compared name by name; only the entry made and the one opened are looked at and
    // seeded again (four files each: a hard link per file, and a symlink to the NEFF's).
    EXPECT_EQ(cost.full_listings, 0u) << "run " << i;
    EXPECT_EQ(cost.names_listed, 0u) << "run " << i;
    EXPECT_EQ(cost.entries_checked, 2u) << "run " << i;
    EXPECT_EQ(cost.links_made, 10u) << "run " << i;
    EXPECT_EQ(cost.views_built, 0u) << "run " << i;
  }
}

TEST_F(Capture, ParallelRunsInOneProcessEachHaveTheirOwnViewAndStayExact) {
  Config base;
  capture(base);
  std::vector<Config> configs(4, base);
  configs[0].sequence = 256;  // these two reuse the base's token graph
  configs[1].sequence = 512;
  configs[2].model = "org/a";  // these two share nothing
  configs[3].model = "org/b";
  CaptureResult results[4];
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      results[i] = capture(configs[i], true, 0, {{"STAND_IN_DELAY", "0.3"}});
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i].used, Modules{captured(tkg_module(base))}) << i;
    EXPECT_EQ(results[i].produced, Modules{captured(ctx_module(configs[i]))}) << i;
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_TRUE(results[i].used.empty()) << i;
    EXPECT_EQ(results[i].produced.size(), 2u) << i;
  }
  EXPECT_LE(views().stats().views_built, 4u);
  // Held at once, every view holds exactly the complete entries of the cache.
  std::set<std::string> complete = complete_in(root());
  EXPECT_EQ(complete.size(), 8u);
  std::vector<std::unique_ptr<CaptureCache>> held;
  for (int n = 0; n < 4; ++n) held.push_back(std::make_unique<CaptureCache>(views(), "check"));
  for (auto& cache : held) {
    EXPECT_EQ(seeded_in(cache->dir()), complete) << cache->dir();
    cache->collect();
  }
}

TEST_F(Capture, WithoutInotifyForTheRunItRunsUnseededAndSaysSo) {
  Config first;
  capture(first);
  SeedViews unwatched(root(), {}, SeedOptions{true, false});
  Config second = first;
  second.sequence = 512;
  CaptureCache cache(unwatched, "unwatched");
  ASSERT_EQ(cache.not_seeded().size(), 1u);
  EXPECT_TRUE(contains(cache.not_seeded()[0], "inotify cannot watch")) << cache.not_seeded()[0];
  EXPECT_FALSE(fs::exists(cache.dir() / kCompiler));
  ASSERT_EQ(stand_in_.run(second, cache.dir()).exit_code, 0);
  CaptureResult result = cache.collect();
  EXPECT_FALSE(result.usage_tracked);
  EXPECT_TRUE(result.used.empty());
  EXPECT_EQ(result.produced.size(), 2u);  // the shared graph compiled again: slower, but exact
  EXPECT_EQ(stand_in_.calls().back()["hits"], nlohmann::json::array());
}

TEST_F(Capture, WithoutWatchingTheCacheEachUseComparesNamesAndStaysExact) {
  SeedViews unwatched(root(), {}, SeedOptions{false, true});
  Config first;
  capture(first, true, 0, {}, nullptr, &unwatched);
  make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  Config second = first;
  second.sequence = 512;
  SeedStats before = unwatched.stats();
  CaptureResult result = capture(second, true, 0, {}, nullptr, &unwatched);
  EXPECT_EQ(result.used, Modules{captured(tkg_module(first))});
  EXPECT_EQ(result.produced, Modules{captured(ctx_module(second))});
  EXPECT_GE(minus(unwatched.stats(), before).full_listings, 1u);
  CaptureCache cache(unwatched, "check");
  EXPECT_EQ(seeded_in(cache.dir()), complete_in(root()));
  cache.collect();
}

TEST_F(Capture, ChangesToTheCacheReachTheViewWithoutComparingEveryName) {
  Config first;
  capture(first);
  // Meanwhile, others remove the token graph, install an entry and start one.
  fs::remove_all(real(tkg_module(first)));
  make_entry(root(), "MODULE_new+d7cde3b5", Kind::Success);
  fs::path late = make_entry(root(), "MODULE_late+d7cde3b5", Kind::Empty);
  SeedStats before = views().stats();
  {
    CaptureCache cache(views(), "changed");
    EXPECT_EQ(seeded_in(cache.dir()),
              (std::set<std::string>{ctx_module(first), "MODULE_new+d7cde3b5"}));
    cache.collect();
  }
  write_file(late / "model.neff", "neff");  // completed in place, as libneuronxla does
  write_file(late / "model.done", "");
  {
    CaptureCache cache(views(), "completed");
    EXPECT_TRUE(seeded_in(cache.dir()).count("MODULE_late+d7cde3b5"));
    cache.collect();
  }
  EXPECT_EQ(minus(views().stats(), before).full_listings, 0u);
  Config second = first;
  second.sequence = 512;
  CaptureResult result = capture(second);
  EXPECT_TRUE(result.used.empty());  // the token graph is gone: compiled again
  EXPECT_EQ(result.produced.size(), 2u);
}

TEST_F(Capture, AnEntryReplacedBetweenProcessesIsSeededAgain) {
  fs::path entry = make_entry(root(), "MODULE_1+d7cde3b5", Kind::Success);
  {
    CaptureCache cache(views(), "one");
    cache.collect();
  }
  new_process();
  fs::path fresh = make_entry(root(), "MODULE_fresh+d7cde3b5", Kind::Success);
  write_file(fresh / "model.neff", "replaced");
  fs::remove_all(entry);
  fs::rename(fresh, entry);
  CaptureCache cache(views(), "two");
  EXPECT_EQ(read_file(cache.dir() / kCompiler / "MODULE_1+d7cde3b5" / "model.neff"), "replaced");
  EXPECT_EQ(seeded_in(cache.dir()), std::set<std::string>{"MODULE_1+d7cde3b5"});
  cache.collect();
}

TEST_F(Capture, ProcessesTakingTurnsWithAViewCompareNoNames) {
  Config config;
  capture(config);          // this process builds the view
  SeedViews other(root());  // another process, started now
  for (int i = 0; i < 2; ++i) {
    SeedStats ours = views().stats(), theirs = other.stats();
    config.sequence = 256 << i;
    CaptureResult result = capture(config, true, 0, {}, nullptr, &other);
    EXPECT_EQ(result.used, Modules{captured(tkg_module(Config{}))});
    config.sequence = 1024 << i;
    result = capture(config);
    EXPECT_EQ(result.used, Modules{captured(tkg_module(Config{}))});
    EXPECT_EQ(result.produced, Modules{captured(ctx_module(config))});
    // Each finds the view as the other left it, stamped: nothing compared by name.
    EXPECT_EQ(minus(views().stats(), ours).full_listings, 0u) << i;
    EXPECT_EQ(minus(other.stats(), theirs).full_listings, 0u) << i;
  }
  CaptureCache cache(views(), "check");
  EXPECT_EQ(seeded_in(cache.dir()), complete_in(root()));
  cache.collect();
}

TEST_F(Capture, AViewLeftByAKilledRunIsRebuiltBeforeItIsUsed) {
  Config first;
  capture(first);
  new_process();
  pid_t pid = fork();
  if (pid == 0) {
    SeedViews views(root());
    CaptureCache cache(views, "killed");
    // Half a compile, and a seeded entry damaged, then the process dies.
    write_file(cache.dir() / kCompiler / "MODULE_half+d7cde3b5" / "model.hlo_module.pb", "hlo");
    fs::remove(cache.dir() / kCompiler / tkg_module(first) / "model.done");
    raise(SIGKILL);
  }
  ASSERT_GT(pid, 0);
  waitpid(pid, nullptr, 0);
  Config second = first;
  second.sequence = 512;
  CaptureResult result = capture(second);
  EXPECT_EQ(views().stats().views_built, 1u);
  EXPECT_EQ(result.used, Modules{captured(tkg_module(first))});
  EXPECT_EQ(result.produced, Modules{captured(ctx_module(second))});
  EXPECT_TRUE(result.failed.empty());
}

TEST_F(Capture, ViewsStayBetweenRunsAndGoAfterAWeekUnused) {
  capture(Config{});
  new_process();
  ASSERT_TRUE(fs::exists(view() / ".state"));
  EXPECT_EQ(remove_abandoned_work(root()), 0u);
  EXPECT_TRUE(fs::is_directory(view()));
  timespec old = {time(nullptr) - 8 * 24 * 3600, 0};
  timespec times[2] = {old, old};
  ASSERT_EQ(utimensat(AT_FDCWD, (view() / ".state").c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  {
    CaptureCache held(views(), "held");  // a view in use is never removed
    EXPECT_EQ(remove_abandoned_work(root()), 0u);
    held.collect();
  }
  ASSERT_EQ(utimensat(AT_FDCWD, (view() / ".state").c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(remove_abandoned_work(root()), 1u);
  EXPECT_FALSE(fs::exists(view()));
  EXPECT_TRUE(is_success(real(ctx_module(Config{}))));
}

TEST_F(Capture, AViewFromBeforeARebootIsRebuiltAndItsOldContentDeletedWithoutWaiting) {
  Config first;
  capture(first);
  new_process();
  // The state file names another boot, as after a reboot.
  std::string state = read_file(view() / ".state");
  size_t boot = state.find("\nboot ");
  ASSERT_NE(boot, std::string::npos);
  state[boot + 6] = state[boot + 6] == 'X' ? 'Y' : 'X';
  write_file(view() / ".state", state);
  Config second = first;
  second.sequence = 512;
  CaptureResult result = capture(second);
  EXPECT_EQ(views().stats().views_built, 1u);
  EXPECT_EQ(result.used, Modules{captured(tkg_module(first))});
  new_process();  // waits for the deletion of the old content
  fs::path area = root() / ".cache/huggingface/neuron-cache-work";
  EXPECT_EQ(names_in(area), std::set<std::string>{"view-0"});
  EXPECT_EQ(seeded_in(view()), complete_in(root()));
}

TEST_F(Capture, AnEntryThatIsNotAllFilesAndFoldersIsNotSeeded) {
  fs::path odd = make_entry(root(), "MODULE_fifo+d7cde3b5", Kind::Success);
  ASSERT_EQ(mkfifo((odd / "wrapped_neff.hlo").c_str(), 0644), 0);
  make_entry(root(), "MODULE_plain+d7cde3b5", Kind::Success);
  CaptureCache cache(views(), "odd");
  EXPECT_EQ(seeded_in(cache.dir()), std::set<std::string>{"MODULE_plain+d7cde3b5"});
  ASSERT_EQ(cache.not_seeded().size(), 1u);
  EXPECT_TRUE(contains(cache.not_seeded()[0], "MODULE_fifo+d7cde3b5")) << cache.not_seeded()[0];
  cache.collect();
}

// ---------------------------------------------------------------------------------------------
// cleanup and the views (prune_views).

// Bytes of the files of an entry.
uint64_t entry_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  for (const auto& item : fs::directory_iterator(dir)) bytes += fs::file_size(item.path());
  return bytes;
}

size_t links_in(const fs::path& view_dir) {
  size_t count = 0;
  for (const auto& item : fs::directory_iterator(view_dir / ".links" / kCompiler)) {
    count += item.is_regular_file() ? 1 : 0;
  }
  return count;
}

TEST_F(Capture, CleanupTakesDeletedEntriesOutOfIdleViewsAndTheirSpaceComesBack) {
  Config first;
  capture(first);
  new_process();
  std::string gone = tkg_module(first);
  uint64_t bytes = entry_bytes(real(gone));
  size_t links = links_in(view());
  fs::remove_all(real(gone));  // deleted by hand: the view still holds its files

  ViewsPruned dry = prune_views(root(), {}, true);
  EXPECT_EQ(dry.entries_unseeded, 1u);
  EXPECT_EQ(dry.bytes_freed, bytes);
  EXPECT_TRUE(seeded_in(view()).count(gone));
  ViewsPruned pruned = prune_views(root(), {}, false);
  EXPECT_EQ(pruned.entries_unseeded, 1u);
  EXPECT_EQ(pruned.bytes_freed, bytes);
  EXPECT_EQ(pruned.views_in_use, 0u);
  EXPECT_EQ(seeded_in(view()), complete_in(root()));
  EXPECT_EQ(links_in(view()), links - 1);  // its NEFF's
  EXPECT_EQ(prune_views(root(), {}, false).entries_unseeded, 0u);

  // The view stays trusted: its next user does not rebuild it.
  Config second = first;
  second.sequence = 512;
  CaptureResult result = capture(second);
  EXPECT_EQ(views().stats().views_built, 0u);
  EXPECT_TRUE(result.used.empty());
  EXPECT_EQ(result.produced.size(), 2u);  // the token graph is gone: compiled again
  CaptureCache cache(views(), "check");
  EXPECT_EQ(seeded_in(cache.dir()), complete_in(root()));
  cache.collect();
}

TEST_F(Capture, CleanupLeavesViewsInUseAndSaysWhatTheyHold) {
  Config first;
  capture(first);
  std::string gone = tkg_module(first);
  uint64_t bytes = entry_bytes(real(gone));
  CaptureCache held(views(), "held");
  // A dry run counts what cleanup is about to delete as gone; the real cache still has it.
  ViewsPruned dry = prune_views(root(), {std::string(kCompiler) + "/" + gone}, true);
  EXPECT_EQ(dry.views_in_use, 1u);
  EXPECT_EQ(dry.bytes_held, bytes);
  EXPECT_EQ(dry.bytes_freed, 0u);  // cleanup counts its own entries' bytes
  fs::remove_all(real(gone));
  ViewsPruned pruned = prune_views(root(), {}, false);
  EXPECT_EQ(pruned.views_in_use, 1u);
  EXPECT_EQ(pruned.entries_unseeded, 0u);
  EXPECT_EQ(pruned.bytes_held, bytes);
  EXPECT_TRUE(seeded_in(held.dir()).count(gone));
  held.collect();
}

TEST_F(Capture, CleanupEmptiesAViewThatIsRebuiltAnyway) {
  capture(Config{});
  new_process();
  fs::remove(view() / ".state");  // as a killed run leaves it
  ViewsPruned pruned = prune_views(root(), {}, false);
  EXPECT_EQ(pruned.entries_unseeded, 2u);
  EXPECT_EQ(pruned.bytes_freed, 0u);  // the cache still has every entry
  EXPECT_TRUE(seeded_in(view()).empty());
  EXPECT_EQ(links_in(view()), 0u);
  CaptureCache cache(views(), "check");
  EXPECT_EQ(seeded_in(cache.dir()), complete_in(root()));
  cache.collect();
}

}  // namespace
}  // namespace neuron_cache::compile
