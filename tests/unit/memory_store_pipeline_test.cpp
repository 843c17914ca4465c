// The pipeline in-process against a MemoryStore (no server, no CLI): plan, prefetch, compile
// with the stand-in compiler, and push, under each policy; then reads that fail, a slow store and
// a store that lists wrong sizes. The point of the fault tests: a failed read is a miss for the
// run it happened in, and never remembered as "not in the store".
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "memory_store.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/local/use_record.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/process/identity.h"
#include "neuron_cache/report/report.h"
#include "neuron_cache/storage/models.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache::testing {
namespace {

namespace ai = artifact_index;

enum class Policy { MissOnFailure, Strict, ReadOnly };

// Every model at one commit, each a llama.
class FakeModels : public storage::ModelSource {
 public:
  std::string commit_of(const std::string&, const std::string&, bool) override {
    return "0123456789abcdef0123456789abcdef01234567";
  }
  std::optional<std::string> read_file(const std::string&, const std::string& path,
                                       const std::string&) override {
    if (path != "config.json") return std::nullopt;
    if (damaged_configs > 0) {
      --damaged_configs;
      return R"({"model_type": "lla)";  // cut short on the way
    }
    return R"({"model_type": "llama", "hidden_size": 2048})";
  }
  int damaged_configs = 0;  // the next reads of config.json that come back cut short
  bool offline() const override { return false; }
  std::string unreachable() const override { return ""; }
};

const pipeline::RunSteps kPlanOnly{};
const pipeline::RunSteps kPrefetch{true, false, false, {}};
const pipeline::RunSteps kCi{true, true, true, {}};

class MemoryStorePipeline : public ::testing::Test {
 protected:
  MemoryStorePipeline() {
    write_file(work / "neuron-cache.yaml", stand_in_manifest({{"acme/tiny", {{"tiny-bs1", 1}}}}));
    setenv("STAND_IN_DELAY", "0", 1);  // the stand-in inherits the test's environment
    store.on_event([this] { poke(); });
  }

  config::Settings settings(const fs::path& cache) const {
    std::map<std::string, std::string> env = {{"HOME", work.path().string()},
                                              {"PATH", "/usr/bin:/bin"}};
    if (lease_seconds > 0) {
      env["NEURON_CACHE_LEASE_SECONDS"] = std::to_string(lease_seconds);
      env["NEURON_CACHE_LEASE_POLL_MS"] = "100";
    }
    if (heartbeat_seconds > 0)
      env["NEURON_CACHE_HEARTBEAT_SECONDS"] = std::to_string(heartbeat_seconds);
    config::SettingOverrides overrides;
    overrides.cache_dir = cache.string();
    return config::Settings::resolve(config::Environment(env), overrides);
  }

  // One run of the steps into the cache `cache_name`; its notices are kept in `notices`.
  pipeline::RunResult run(const std::string& cache_name, const pipeline::RunSteps& steps,
                          Policy policy = Policy::MissOnFailure) {
    return run_machine(cache_name, steps, notices, policy);
  }

  // run() for one machine of several running at once: its notices go to `notes`.
  pipeline::RunResult run_machine(const std::string& cache_name, const pipeline::RunSteps& steps,
                                  std::string& notes, Policy policy = Policy::MissOnFailure) {
    pipeline::Options options;
    options.manifest = work / "neuron-cache.yaml";
    options.output_dir = work / ("out-" + cache_name);
    options.strict = policy == Policy::Strict;
    options.read_only = policy == Policy::ReadOnly;
    options.jobs = jobs;
    options.leases.enabled = lease_seconds > 0;
    options.leases.wait_timeout = wait_timeout;
    // The machine is named after its cache: what it sends to the store is counted by that name.
    pipeline::Remotes remotes{
        [this, cache_name](const config::Settings&) { return store.handle(cache_name); }, &models};
    pipeline::Pipeline p(settings(work / cache_name), remotes, options);
    // No lock of the run's own: the pipeline must hand over one line at a time, whichever thread
    // says it (ThreadSanitizer would see two at once). Runs of two machines at once add theirs
    // to `progress` after; each line is also heard at once, with when (heard).
    std::vector<std::string> lines;
    p.on_progress([this, &lines, cache_name](const std::string& line) {
      lines.push_back(line);
      {
        std::lock_guard lock(events_mutex);
        heard.push_back({cache_name, line, std::chrono::steady_clock::now()});
      }
      events.notify_all();
    });
    pipeline::RunResult result = pipeline::run(p, steps);
    {
      std::lock_guard lock(progress_mutex);
      progress.insert(progress.end(), lines.begin(), lines.end());
    }
    notes.clear();
    for (const auto& notice : p.context().notices) notes += notice.text + "\n";
    return result;
  }

  // Compiles the configuration into cache "fill" and pushes it: the store then holds it.
  void fill() {
    pipeline::RunResult ci = run("fill", kCi);
    ASSERT_TRUE(ci.compile);
    ASSERT_EQ(ci.compile->outcomes.size(), 1u);
    ASSERT_TRUE(ci.compile->outcomes[0].ok) << ci.compile->outcomes[0].error << notices;
    ASSERT_TRUE(ci.push && ci.push->attempted) << notices;
    ASSERT_EQ(ci.push->result.pushed.size(), 1u) << notices;
    ASSERT_GE(store.commits(), 1);
  }

  static plan::Status status(const pipeline::RunResult& result) {
    return result.initial.rows.at(0).status;
  }

  fs::path hub_memos(const std::string& cache_name) const {
    return work / cache_name / std::string(ai::kLocalDir) / "hub";
  }

  // The MODULE_ folders of the compiler folder in `cache_name`.
  size_t modules_in(const std::string& cache_name) const {
    fs::path dir = work / cache_name / kCompilerDir;
    if (!fs::exists(dir)) return 0;
    size_t n = 0;
    for (const auto& item : fs::directory_iterator(dir)) {
      if (item.path().filename().string().starts_with("MODULE_")) ++n;
    }
    return n;
  }

  // Waits until `done` holds: asked (under events_mutex) after each progress line of a run and
  // each request and commit of the store; false when `timeout` passed first.
  bool await(const std::function<bool()>& done,
             std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(events_mutex);
    return events.wait_for(lock, timeout, done);
  }
  void poke() {
    { std::lock_guard lock(events_mutex); }
    events.notify_all();
  }

  // A progress line of a run, as it was said.
  struct Heard {
    std::string machine;
    std::string line;
    std::chrono::steady_clock::time_point when;
  };
  // The lines of `machine` containing `part`, in order (events_mutex held or the runs over).
  std::vector<Heard> heard_of(const std::string& machine, const std::string& part) const {
    std::vector<Heard> out;
    for (const Heard& h : heard)
      if (h.machine == machine && contains(h.line, part)) out.push_back(h);
    return out;
  }

  TempDir work;
  MemoryStore store;
  FakeModels models;
  std::string notices;
  int lease_seconds = 0;      // compile leases, living this long unrenewed, when not 0
  int heartbeat_seconds = 0;  // NEURON_CACHE_HEARTBEAT_SECONDS, when not 0
  std::optional<std::chrono::seconds> wait_timeout;  // the bound of a wait for another machine
  int jobs = 1;
  std::vector<std::string> progress;  // the progress lines of every run
  std::mutex progress_mutex;
  std::mutex events_mutex;  // heard
  std::condition_variable events;
  std::vector<Heard> heard;  // every run's progress lines as they come
};

TEST_F(MemoryStorePipeline, AnEmptyStoreCompilesAndPushes) {
  fill();
  EXPECT_FALSE(store.paths().empty());
  // Pushed again: nothing new.
  pipeline::RunResult again = run("fill", kCi);
  EXPECT_EQ(status(again), plan::Status::Local);
  EXPECT_TRUE(again.compile->outcomes.empty());
  EXPECT_EQ(store.commits(), 1);
}

// An index shard damaged in the store (bytes changed on their way to a server that checks
// nothing) is no dead end for later pushes: the next push rewrites it with its configurations
// and says so; a newer tool's shard is never rewritten.
TEST_F(MemoryStorePipeline, ADamagedIndexShardIsRewrittenByTheNextPushNotADeadEnd) {
  fill();
  std::string shard;
  for (const std::string& path : store.paths())
    if (path.starts_with(std::string(ai::kRemoteDir) + "/") && path.ends_with(".json"))
      shard = path;
  ASSERT_FALSE(shard.empty());
  std::string good = store.content(shard);
  std::string damaged = good;
  damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 0x5A);
  damaged.insert(10, "\x01{");  // not JSON any more
  store.put(shard, damaged);
  pipeline::RunResult again = run("second", kCi);  // misses, compiles, pushes
  ASSERT_TRUE(again.push && again.push->attempted) << notices;
  EXPECT_EQ(again.push->result.pushed.size(), 1u) << notices;
  EXPECT_TRUE(contains(notices, "could not be read")) << notices;
  EXPECT_TRUE(contains(notices, "rewritten")) << notices;
  EXPECT_NO_THROW(ai::parse_index(store.content(shard), shard));
  EXPECT_EQ(status(run("third", kPrefetch)), plan::Status::Store) << notices;

  std::string newer = "{\"format\": 99, \"entries\": {}}";
  store.put(shard, newer);
  run("fourth", kCi);
  EXPECT_EQ(store.content(shard), newer) << "a newer tool's index file is never rewritten";
  EXPECT_TRUE(contains(notices, "upgrade neuron-cache")) << notices;
}

// cleanup --max-size evicts the least recently used entries: a compile records what it produced,
// a prefetch what it fetched, and a later prefetch what it found complete.
TEST_F(MemoryStorePipeline, CompileAndPrefetchRecordTheUseOfTheirEntries) {
  fill();
  size_t compiled = modules_in("fill");
  ASSERT_GT(compiled, 0u);
  EXPECT_EQ(local::read_use_records(work / "fill").size(), compiled);
  ASSERT_EQ(status(run("warm", kPrefetch)), plan::Status::Store) << notices;
  auto records = local::read_use_records(work / "warm");
  ASSERT_EQ(records.size(), modules_in("warm"));
  // Made old, then found complete by the next prefetch: used again now.
  for (const auto& [entry, when] : records) {
    fs::path file =
        work / "warm" / ".cache/huggingface/neuron-cache-used" / entry.first / entry.second;
    fs::last_write_time(file, fs::last_write_time(file) - std::chrono::hours(24 * 30));
  }
  auto old = local::read_use_records(work / "warm");
  ASSERT_EQ(status(run("warm", kPrefetch)), plan::Status::Local) << notices;
  for (const auto& [entry, when] : local::read_use_records(work / "warm")) {
    EXPECT_GT(when, old.at(entry) + 86400.0) << entry.second;
  }
}

// A commit that landed but lost its answer, retried onto the head it moved itself: the retry
// finds its configuration stored. That is this push's work, reported as pushed with a note,
// never as "pushed 0 configurations".
TEST_F(MemoryStorePipeline, ACommitThatLandedButLostItsAnswerIsReportedAsPushed) {
  store.lose_commit_answers(1);
  pipeline::RunResult ci = run("fill", kCi);
  ASSERT_TRUE(ci.push && ci.push->attempted) << notices;
  EXPECT_EQ(ci.push->skipped_reason, "") << notices;
  EXPECT_EQ(ci.push->result.pushed.size(), 1u) << notices;
  EXPECT_TRUE(ci.push->result.already_stored.empty());
  EXPECT_EQ(ci.push->result.attempts, 2);
  EXPECT_TRUE(ci.push->result.commit.committed);
  EXPECT_TRUE(contains(notices, "that commit landed though its answer was lost")) << notices;
  EXPECT_EQ(store.commits(), 1);
  std::string line = report::push_line(ci);
  EXPECT_TRUE(contains(line, "pushed 1 configuration")) << line;
}

TEST_F(MemoryStorePipeline, ReadOnlyCompilesButPushesNothing) {
  pipeline::RunResult ci = run("ro", kCi, Policy::ReadOnly);
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_TRUE(ci.compile->outcomes[0].ok);
  EXPECT_EQ(store.commits(), 0);
  ASSERT_TRUE(ci.push);
  EXPECT_FALSE(ci.push->attempted);
  EXPECT_TRUE(contains(ci.push->skipped_reason, "read-only")) << ci.push->skipped_reason;
}

class MemoryStorePipelinePolicies : public MemoryStorePipeline,
                                    public ::testing::WithParamInterface<Policy> {};

TEST_P(MemoryStorePipelinePolicies, WhatTheStoreHoldsIsFetchedNotCompiled) {
  fill();
  pipeline::RunResult ci = run("other", kCi, GetParam());
  EXPECT_EQ(status(ci), plan::Status::Store) << notices;
  ASSERT_TRUE(ci.prefetch);
  EXPECT_EQ(ci.prefetch->hits, 1u) << notices;
  EXPECT_TRUE(ci.compile->outcomes.empty());
  EXPECT_EQ(ci.final.rows.at(0).status, plan::Status::Local);
  EXPECT_EQ(store.commits(), 1) << "nothing new to push";
  EXPECT_GE(modules_in("other"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Policies, MemoryStorePipelinePolicies,
                         ::testing::Values(Policy::MissOnFailure, Policy::Strict,
                                           Policy::ReadOnly));

// The bug this guards against: one failed stat of the index shards was kept in paths-info.json
// as "no such file" for the head, so every later run against the same head planned a compile
// without asking the store or warning.
TEST_F(MemoryStorePipeline, AFailedReadIsAMissForThatRunOnly) {
  fill();
  store.fail_reads(std::string(ai::kRemoteDir) + "/", 1);
  pipeline::RunResult first = run("other", kPlanOnly);
  EXPECT_EQ(store.failed_reads(), 1);
  // Not fetched from the store (the registry optimum-neuron keeps there may still list it).
  EXPECT_NE(status(first), plan::Status::Store);
  EXPECT_TRUE(contains(notices, "stat failed")) << notices;
  EXPECT_TRUE(contains(notices, "counted as not cached")) << notices;

  // Fault cleared, same head, same cache root.
  pipeline::RunResult second = run("other", kCi);
  EXPECT_EQ(status(second), plan::Status::Store) << notices;
  EXPECT_EQ(second.prefetch->hits, 1u) << notices;
  EXPECT_TRUE(second.compile->outcomes.empty()) << "compiled what the store holds";
  EXPECT_FALSE(contains(notices, "counted as not cached")) << notices;
}

TEST_F(MemoryStorePipeline, StrictFailsOnAFailedRead) {
  fill();
  store.fail_reads(std::string(ai::kRemoteDir) + "/", 1);
  EXPECT_THROW(run("other", kPlanOnly, Policy::Strict), Error);
  pipeline::RunResult second = run("other", kPlanOnly, Policy::Strict);
  EXPECT_EQ(status(second), plan::Status::Store) << notices;
}

TEST_F(MemoryStorePipeline, ARegistryScanWithAFailedListingIsNotRemembered) {
  store.fail_reads("neuronxcc-", 1);  // the listing of the store's root
  run("other", kPlanOnly);
  EXPECT_EQ(store.failed_reads(), 1);
  EXPECT_TRUE(contains(notices, "counted as not cached")) << notices;
  EXPECT_FALSE(fs::exists(hub_memos("other") / "registry.json"))
      << read_file(hub_memos("other") / "registry.json");
  run("other", kPlanOnly);
  EXPECT_TRUE(fs::exists(hub_memos("other") / "registry.json")) << "a complete scan is kept";
}

TEST_F(MemoryStorePipeline, ASlowStoreIsStillRead) {
  fill();
  store.answer_slowly(std::chrono::milliseconds(50));
  auto start = std::chrono::steady_clock::now();
  pipeline::RunResult ci = run("other", kCi);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(status(ci), plan::Status::Store) << notices;
  EXPECT_EQ(ci.prefetch->hits, 1u);
  EXPECT_TRUE(ci.compile->outcomes.empty());
}

// An index file listed with a wrong size fails verification: counted as not cached, no copy of
// it kept, nothing installed from it.
TEST_F(MemoryStorePipeline, AStoreThatListsWrongSizesInstallsNothing) {
  fill();
  store.lie_about_sizes(std::string(ai::kRemoteDir) + "/", 7);
  pipeline::RunResult plan = run("other", kPrefetch);
  EXPECT_NE(status(plan), plan::Status::Store) << notices;
  EXPECT_TRUE(contains(notices, "could not be fetched intact")) << notices;
  EXPECT_EQ(modules_in("other"), 0u);
  if (fs::exists(hub_memos("other"))) {
    for (const auto& item : fs::recursive_directory_iterator(hub_memos("other"))) {
      std::string kept = fs::relative(item.path(), hub_memos("other")).string();
      EXPECT_FALSE(contains(kept, std::string(ai::kRemoteDir)))
          << item.path() << " was kept from a download that failed verification";
    }
  }
}

// What the tool keeps for itself in the cache root (index copies, kept answers, memos) goes
// through one rule: a symlink planted there is never followed to write or delete outside the
// root, and a FIFO or a link to /dev/zero in place of a memo is read as no memo, never waited on.
TEST_F(MemoryStorePipeline, TheToolsOwnBookkeepingNeverLeavesTheCacheRoot) {
  fill();
  const fs::path outside = work / "outside";
  write_file(outside / "keep.txt", "not the tool's");
  const fs::path memos = work / "other" / std::string(ai::kLocalDir);
  fs::create_directories(memos);
  fs::create_directory_symlink(outside, memos / "hub");
  ASSERT_EQ(mkfifo((memos / "models.json").c_str(), 0644), 0);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    pipeline::RunResult ci = run("other", kCi);
    ASSERT_TRUE(ci.prefetch) << notices;
    EXPECT_EQ(modules_in("other"), modules_in("fill")) << notices;
    std::vector<std::string> found;
    for (const auto& item : fs::recursive_directory_iterator(outside))
      found.push_back(fs::relative(item.path(), outside).string());
    EXPECT_EQ(found, std::vector<std::string>{"keep.txt"});
    EXPECT_EQ(read_file(outside / "keep.txt"), "not the tool's");
    EXPECT_TRUE(fs::is_symlink(memos / "hub"));
  }
  // The folders exist but their files are a FIFO and a link to /dev/zero.
  fs::remove(memos / "hub");
  fs::create_directories(memos / "hub");
  ASSERT_EQ(mkfifo((memos / "hub" / "paths-info.json").c_str(), 0644), 0);
  fs::create_symlink("/dev/zero", memos / "hub" / "on-hub.json");
  fs::create_symlink("/dev/zero", memos / "hub" / "registry.json");
  fs::create_directory_symlink(outside, memos / "hub" / "acme~neuron-cache");
  pipeline::RunResult again = run("other", kCi);
  ASSERT_TRUE(again.prefetch) << notices;
  // A memo that was a link is replaced by a file of its own (rename replaces the link itself).
  EXPECT_FALSE(fs::is_symlink(memos / "hub" / "on-hub.json") &&
               fs::is_regular_file(memos / "hub" / "on-hub.json"));
  std::vector<std::string> found;
  for (const auto& item : fs::recursive_directory_iterator(outside))
    found.push_back(fs::relative(item.path(), outside).string());
  EXPECT_EQ(found, std::vector<std::string>{"keep.txt"});
}

// A config.json damaged on the way is asked for again; damaged every time, it is a fault of the
// transfer (the configuration is compiled unkeyed, with a note naming the file), never an input
// error that stops the build, and nothing of it is remembered: the next run keys it again.
TEST_F(MemoryStorePipeline, ADamagedModelConfigIsRetriedThenAFaultNotAnInputError) {
  fill();
  models.damaged_configs = 1;
  pipeline::RunResult once = run("other", kPlanOnly);
  EXPECT_EQ(status(once), plan::Status::Store) << notices;
  EXPECT_EQ(models.damaged_configs, 0);

  models.damaged_configs = 100;
  pipeline::RunResult always = run("other-2", kCi);
  EXPECT_FALSE(always.initial.rows.at(0).target.unkeyed.empty()) << notices;
  EXPECT_TRUE(contains(notices, "config.json")) << notices;
  EXPECT_TRUE(contains(notices, "not JSON")) << notices;

  models.damaged_configs = 0;
  pipeline::RunResult after = run("other-2", kPlanOnly);
  EXPECT_TRUE(after.initial.rows.at(0).target.unkeyed.empty()) << notices;
  EXPECT_NE(status(after), plan::Status::Compile) << "the store's entry is found again\n"
                                                  << notices;
}

// The keys known to be in the store (on-hub.json) are remembered only from reads that worked: a
// push step whose index reads fail remembers nothing, and the next run asks again and finds it.
TEST_F(MemoryStorePipeline, KeysKnownInTheStoreAreNeverRememberedFromAFailedRead) {
  fill();
  const std::string key = run("fill", kPlanOnly).initial.rows.at(0).target.key;
  const fs::path on_hub = hub_memos("fill") / "on-hub.json";
  fs::remove(on_hub);
  store.fail_reads(std::string(ai::kRemoteDir) + "/", 100);
  run("fill", kCi);
  EXPECT_GT(store.failed_reads(), 0);
  EXPECT_FALSE(fs::exists(on_hub) && contains(read_file(on_hub), key)) << read_file(on_hub);

  store.fail_reads("", 0);
  run("fill", kCi);
  ASSERT_TRUE(fs::exists(on_hub)) << notices;
  EXPECT_TRUE(contains(read_file(on_hub), key)) << read_file(on_hub);
}

// The pipeline's lease step in-process: each miss's lease is claimed before its compile, renewed
// by the renewal thread while two compile threads run (the store shared by all three), and done
// after the push; meanwhile each compile thread says every second that its compile still runs.
// ThreadSanitizer runs it (tests/run-tsan.sh).
TEST_F(MemoryStorePipeline, LeasesAreRenewedWhileTheirCompilesRunAndDoneAfterThePush) {
  write_file(work / "neuron-cache.yaml",
             stand_in_manifest({{"acme/tiny", {{"tiny-bs1", 1}, {"tiny-bs2", 2}}}}));
  lease_seconds = 3;  // renewed every second
  heartbeat_seconds = 1;
  jobs = 2;
  setenv("STAND_IN_DELAY", "2.5", 1);
  pipeline::RunResult ci = run("fill", kCi);
  ASSERT_TRUE(ci.compile && ci.push) << notices;
  ASSERT_EQ(ci.compile->outcomes.size(), 2u) << notices;
  for (const auto& outcome : ci.compile->outcomes) EXPECT_TRUE(outcome.ok) << outcome.error;
  EXPECT_EQ(ci.push->result.pushed.size(), 2u) << notices;
  ASSERT_EQ(ci.compile->leases.size(), 2u) << notices;
  for (const auto& outcome : ci.compile->leases) {
    EXPECT_EQ(outcome.kind, pipeline::LeaseOutcome::Kind::Held) << outcome.note;
    std::optional<lease::Record> record =
        lease::parse(store.content(lease::remote_path(ci.compiler_version, outcome.key)));
    ASSERT_TRUE(record) << outcome.configuration;
    EXPECT_EQ(record->state, lease::State::Done) << outcome.configuration;
  }
  // The claim, at least one renewal during the compiles, the push that ends the leases.
  EXPECT_GE(store.commits(), 3) << notices;
  for (const std::string name : {"tiny-bs1", "tiny-bs2"}) {
    const std::string beat = "still compiling " + name + ": ";
    const std::string log = "; log: " + (work / "out-fill" / (name + ".log")).string();
    EXPECT_TRUE(std::any_of(progress.begin(), progress.end(),
                            [&](const std::string& line) {
                              return line.starts_with(beat) &&
                                     line.find(" s so far, expected time unknown") !=
                                         std::string::npos &&
                                     line.ends_with(log);
                            }))
        << name << " had no heartbeat in:\n"
        << list_of(progress, progress.size());
  }
}

// The lease coordinator (pipeline/lease_step.h) in-process: two machines are two pipelines with
// their own local caches sharing the MemoryStore; another machine's lease is a record planted in
// the store. No CLI process runs; the stand-in compiler does.
class LeaseCoordinatorTest : public MemoryStorePipeline {
 protected:
  LeaseCoordinatorTest() {
    lease_seconds = 3;
    setenv("STAND_IN_DELAY", "1", 1);
  }

  // The key and compiler version of the manifest's one configuration.
  std::pair<std::string, std::string> key_and_version() {
    pipeline::RunResult plan = run("probe", kPlanOnly);
    return {plan.initial.rows.at(0).target.key, plan.compiler_version};
  }

  // Another machine's live lease on the configuration, expiring `life` seconds from now, never
  // renewed; `process`: its holder's process identity (process/identity.h); `change` makes it
  // hostile.
  lease::Record plant_lease(int64_t life, const std::string& process = "",
                            const std::function<void(lease::Record&)>& change = nullptr) {
    auto [key, version] = key_and_version();
    int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    lease::Record other;
    other.holder = "0123456789abcdef";
    other.host = "runner-elsewhere";
    other.configuration = "tiny-bs1";
    other.key = key;
    other.started = now;
    other.heartbeat = now;
    other.expires = now + life;
    other.expected_seconds = 5;
    other.process = process;
    if (change) change(other);
    store.put(lease::remote_path(version, key), lease::serialize(other));
    return other;
  }

  static const pipeline::LeaseOutcome& only_lease(const pipeline::RunResult& result) {
    EXPECT_TRUE(result.compile);
    EXPECT_EQ(result.compile->leases.size(), 1u);
    return result.compile->leases.at(0);
  }

  using Clock = std::chrono::steady_clock;

  // Two machines, "machine-1" and "machine-2", run `ci` at once on the one configuration. Once
  // one of them waits for the other's lease, `meanwhile(holder, waiter)` runs on the test's
  // thread (it takes the store down and brings it back); then both runs are awaited.
  struct TwoMachines {
    std::string holder, waiter;  // "" when neither waited
    std::map<std::string, pipeline::RunResult> result;
    std::map<std::string, std::string> notes;

    // Only once a machine waited (holder and waiter named).
    const pipeline::RunResult& holder_run() const { return result.at(holder); }
    const pipeline::RunResult& waiter_run() const { return result.at(waiter); }
    // Both machines' notes, for a failure's message.
    std::string all_notes() const { return notes.at("machine-1") + notes.at("machine-2"); }
  };
  TwoMachines two_machines(
      const std::function<void(const std::string& holder, const std::string& waiter)>& meanwhile) {
    TwoMachines m;
    pipeline::RunResult first, second;
    std::string first_notes, second_notes;
    std::thread one([&] { first = run_machine("machine-1", kCi, first_notes); });
    std::thread two([&] { second = run_machine("machine-2", kCi, second_notes); });
    const std::string waits = " is being compiled by ";
    if (await([&] {
          return !heard_of("machine-1", waits).empty() || !heard_of("machine-2", waits).empty();
        })) {
      {
        std::lock_guard lock(events_mutex);
        m.waiter = heard_of("machine-1", waits).empty() ? "machine-2" : "machine-1";
      }
      m.holder = m.waiter == "machine-1" ? "machine-2" : "machine-1";
      meanwhile(m.holder, m.waiter);
    }
    store.come_back();  // whatever `meanwhile` did
    one.join();
    two.join();
    m.result["machine-1"] = std::move(first);
    m.result["machine-2"] = std::move(second);
    m.notes["machine-1"] = first_notes;
    m.notes["machine-2"] = second_notes;
    return m;
  }

  // The configuration's lease as the store holds it now (these tests have one configuration).
  std::optional<lease::Record> lease_now() const {
    for (const std::string& path : store.paths()) {
      if (path.starts_with(std::string(lease::kRemoteDir) + "/"))
        return lease::parse(store.content(path));
    }
    return std::nullopt;
  }

  // When the first commit since `since` that wrote a path below `folder` landed.
  std::optional<Clock::time_point> landed_below(std::string_view folder, Clock::time_point since) {
    for (const MemoryStore::Landed& commit : store.landed()) {
      if (commit.when < since) continue;
      for (const std::string& path : commit.paths)
        if (path.starts_with(std::string(folder) + "/")) return commit.when;
    }
    return std::nullopt;
  }

  // An outage of the store while the holder compiles: from when the other machine waits until
  // both machines met it (the holder in a renewal of its lease, unless it renewed before) and
  // for at least a second; it ends before the holder's push. An outage changes nothing about
  // waiting: the configuration is compiled once; the waiter keeps looking (backing off while it
  // cannot read the store), fetches the holder's push within a few polls after it lands, and
  // does not announce its wait again.
  void outage_while_the_holder_compiles() {
    Clock::time_point down_at, up_at;
    bool met_renewal = false;
    TwoMachines m = two_machines([&](const std::string& holder, const std::string& waiter) {
      std::optional<lease::Record> before = lease_now();
      const bool renewed = before && before->heartbeat > before->started;
      store.go_down();
      down_at = Clock::now();
      EXPECT_TRUE(await([&] {
        return store.met_outage(waiter) >= 1 && (renewed || store.met_outage(holder) >= 1);
      })) << "the holder did not renew its lease during the outage";
      met_renewal = store.met_outage(holder) >= 1;
      // The outage's length (the waiter backs off through it), not a synchronisation.
      std::this_thread::sleep_until(down_at + std::chrono::seconds(1));
      store.come_back();
      up_at = Clock::now();
    });
    ASSERT_FALSE(m.waiter.empty()) << "neither machine waited:\n" << m.all_notes();
    const pipeline::RunResult& holder = m.holder_run();
    const pipeline::RunResult& waiter = m.waiter_run();
    const std::string notes = m.all_notes();
    SCOPED_TRACE(met_renewal ? "the outage met a renewal of the holder's lease"
                             : "the holder renewed its lease before the outage");

    // Compiled once, pushed after the outage, and fetched by the waiter.
    EXPECT_EQ(only_lease(holder).kind, pipeline::LeaseOutcome::Kind::Held) << notes;
    EXPECT_EQ(only_lease(waiter).kind, pipeline::LeaseOutcome::Kind::Fetched)
        << only_lease(waiter).note << "\n"
        << notes;
    ASSERT_TRUE(holder.compile && waiter.compile && holder.push);
    EXPECT_EQ(holder.compile->outcomes.size() + waiter.compile->outcomes.size(), 1u)
        << "compiled more than once\n"
        << notes;
    EXPECT_EQ(holder.push->result.pushed.size(), 1u) << report::push_line(holder) << "\n" << notes;
    EXPECT_EQ(waiter.compile->fetched.result.completed.size(), 1u) << notes;
    EXPECT_GE(modules_in(m.waiter), 1u);
    EXPECT_EQ(modules_in(m.waiter), modules_in(m.holder));

    // The push landed after the outage (the commit that wrote the index); the waiter fetched it
    // within a few polls: its pause doubles for each round that failed (100 ms, 200 ms, ... up
    // to a minute, +-20% jitter), so its first poll after the outage comes within 1.5 times the
    // outage's length, and the next ones every 100 ms.
    std::optional<Clock::time_point> pushed = landed_below(ai::kRemoteDir, Clock::time_point{});
    ASSERT_TRUE(pushed) << notes;
    EXPECT_GT(*pushed, up_at) << "the holder pushed during the outage";
    EXPECT_GE(store.sent(m.waiter, up_at), 1) << "the waiter stopped looking after the outage";
    std::vector<Heard> fetched = heard_of(m.waiter, "fetched tiny-bs1 compiled by ");
    ASSERT_EQ(fetched.size(), 1u) << list_of(progress, progress.size());
    const auto outage = up_at - down_at;
    const auto late = fetched[0].when - *pushed;
    EXPECT_LE(late, outage * 3 / 2 + std::chrono::seconds(1))
        << "fetched " << std::chrono::duration<double>(late).count() << " s after the push; the "
        << "outage lasted " << std::chrono::duration<double>(outage).count() << " s";
    // Its wait was announced once, when it began: the outage did not make it announce another.
    std::vector<Heard> announced = heard_of(m.waiter, " is being compiled by ");
    ASSERT_EQ(announced.size(), 1u) << list_of(progress, progress.size());
    EXPECT_LT(announced[0].when, down_at);
  }
};

// The issue's first case, scaled down (the stand-in sleeps STAND_IN_DELAY twice: a compile of
// 3 s). The outage meets the holder's renewal of its lease (due 2 s after the claim) and ends
// before its push, which comes before the next renewal: that push is made, not skipped because
// the renewal found the store unreachable earlier in the run.
TEST_F(LeaseCoordinatorTest, AnOutageWhileTheHolderCompilesEndsInOneCompileAndTheWaiterFetches) {
  lease_seconds = 6;
  setenv("STAND_IN_DELAY", "1.5", 1);
  outage_while_the_holder_compiles();
}

// The same with a compile (6 s) that outlasts the lease's life unrenewed (3 s; renewals are
// tried every second): the holder renews it once the store is back, so the waiter does not take
// it over and compile it a second time.
TEST_F(LeaseCoordinatorTest, AnOutageThatMeetsTheHoldersRenewalDoesNotLetItsLeaseExpire) {
  lease_seconds = 3;
  setenv("STAND_IN_DELAY", "3", 1);
  outage_while_the_holder_compiles();
}

// The issue's second case: the outage covers the holder's push. The push fails, said as a
// failure; the holder's lease (renewed before the outage: on the Hub that lasts 30 minutes) does
// not stay `compiling`: the holder releases it once the store is back, and the waiter takes the
// configuration over within a few polls, compiles it and pushes it.
TEST_F(LeaseCoordinatorTest, AHolderWhosePushMetAnOutageReleasesItsLeaseOnceTheStoreIsBack) {
  setenv("STAND_IN_DELAY", "1", 1);  // a compile of 2 s
  // A lease left `compiling` is waited for 20 s, then compiled here (WaitTimedOut), not an hour.
  wait_timeout = std::chrono::seconds(20);
  Clock::time_point down_at, up_at;
  TwoMachines m = two_machines([&](const std::string& holder, const std::string&) {
    EXPECT_TRUE(await([&] {
      std::optional<lease::Record> now = lease_now();
      return now && now->expires - now->heartbeat > 1000;  // renewed, for 30 min
    })) << "the holder did not renew its lease";
    store.go_down();
    down_at = Clock::now();
    // Until the holder's push failed and its first try to release the lease failed too.
    EXPECT_TRUE(await([&] { return store.met_outage(holder) >= 2; }));
    store.come_back();
    up_at = Clock::now();
  });
  ASSERT_FALSE(m.waiter.empty()) << "neither machine waited:\n" << m.all_notes();
  const pipeline::RunResult& holder = m.holder_run();
  const pipeline::RunResult& waiter = m.waiter_run();
  const std::string notes = m.all_notes();

  // The holder compiled; its push failed, and its run says so as a failure.
  EXPECT_EQ(only_lease(holder).kind, pipeline::LeaseOutcome::Kind::Held) << notes;
  ASSERT_TRUE(holder.compile && holder.push && waiter.compile && waiter.push);
  ASSERT_EQ(holder.compile->outcomes.size(), 1u);
  EXPECT_TRUE(holder.compile->outcomes[0].ok) << holder.compile->outcomes[0].error;
  EXPECT_TRUE(holder.push->result.pushed.empty());
  EXPECT_TRUE(report::push_line(holder).starts_with("push failed: ")) << report::push_line(holder);
  EXPECT_TRUE(contains(m.notes[m.holder], "could not be reached")) << m.notes[m.holder];
  EXPECT_TRUE(contains(m.notes[m.holder],
                       "asked again in this run only for the compile leases and the push"))
      << "the outage's warning says what the run still asks of the store\n"
      << m.notes[m.holder];
  EXPECT_FALSE(contains(m.notes[m.holder], "could not be ended")) << m.notes[m.holder];

  // It released its lease once the store was back; the waiter took it over within a few polls
  // (1.5 times the outage's length: its backoff), compiled it and pushed it.
  std::optional<Clock::time_point> released = landed_below(lease::kRemoteDir, up_at);
  ASSERT_TRUE(released) << notes;
  const pipeline::LeaseOutcome& took = only_lease(waiter);
  EXPECT_EQ(took.kind, pipeline::LeaseOutcome::Kind::TookOver) << took.note << "\n" << notes;
  EXPECT_TRUE(contains(took.note, "released it without a result")) << took.note;
  EXPECT_TRUE(contains(took.note, "its push failed")) << took.note;
  std::vector<Heard> compiling = heard_of(m.waiter, "; compiling it here");
  ASSERT_EQ(compiling.size(), 1u) << list_of(progress, progress.size());
  const auto outage = up_at - down_at;
  const auto late = compiling[0].when - *released;
  EXPECT_LE(late, outage * 3 / 2 + std::chrono::seconds(1))
      << "took over " << std::chrono::duration<double>(late).count() << " s after the release; "
      << "the outage lasted " << std::chrono::duration<double>(outage).count() << " s";
  ASSERT_EQ(waiter.compile->outcomes.size(), 1u);
  EXPECT_TRUE(waiter.compile->outcomes[0].ok) << waiter.compile->outcomes[0].error;
  EXPECT_EQ(waiter.push->result.pushed.size(), 1u) << report::push_line(waiter) << "\n" << notes;
  std::optional<lease::Record> now = lease_now();
  ASSERT_TRUE(now);
  EXPECT_EQ(now->state, lease::State::Done);

  // The configuration ended up in the store: a third machine fetches it.
  pipeline::RunResult later = run("later", kPrefetch);
  EXPECT_EQ(status(later), plan::Status::Store) << notices;
  EXPECT_EQ(later.prefetch->hits, 1u) << notices;
}

TEST_F(LeaseCoordinatorTest, TwoMachinesCompileOnceAndTheOtherFetchesThePush) {
  pipeline::RunResult first, second;
  std::string first_notes, second_notes;
  std::thread other([&] { first = run_machine("machine-1", kCi, first_notes); });
  second = run_machine("machine-2", kCi, second_notes);
  other.join();

  std::vector<pipeline::LeaseOutcome::Kind> kinds{only_lease(first).kind, only_lease(second).kind};
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds, (std::vector<pipeline::LeaseOutcome::Kind>{
                       pipeline::LeaseOutcome::Kind::Held, pipeline::LeaseOutcome::Kind::Fetched}))
      << first_notes << second_notes;
  const pipeline::RunResult& waiter =
      only_lease(first).kind == pipeline::LeaseOutcome::Kind::Fetched ? first : second;
  EXPECT_FALSE(only_lease(waiter).other_host.empty());
  EXPECT_EQ(waiter.compile->fetched.result.completed.size(), 1u) << "what it fetched is counted";
  EXPECT_EQ(modules_in("machine-1"), modules_in("machine-2"));
  EXPECT_GE(modules_in("machine-2"), 1u);
}

TEST_F(LeaseCoordinatorTest, AHolderThatStopsRenewingIsTakenOverWhenItsLeaseExpires) {
  lease::Record other = plant_lease(2);
  auto start = std::chrono::steady_clock::now();
  pipeline::RunResult ci = run("fill", kCi);
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::TookOver) << notices;
  EXPECT_EQ(lease.other_host, other.host);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1))
      << "a live lease is waited for";
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_TRUE(ci.compile->outcomes[0].ok) << ci.compile->outcomes[0].error;
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, other.key)));
  ASSERT_TRUE(now);
  EXPECT_EQ(now->state, lease::State::Done);
  EXPECT_NE(now->holder, other.holder);
}

TEST_F(LeaseCoordinatorTest, AWaitPastItsBoundCompilesWithoutTheLease) {
  lease::Record other = plant_lease(600);
  wait_timeout = std::chrono::seconds(1);
  pipeline::RunResult ci = run("fill", kCi);
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::WaitTimedOut) << notices;
  EXPECT_EQ(lease.other_host, other.host);
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_TRUE(ci.compile->outcomes[0].ok) << ci.compile->outcomes[0].error;
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, other.key)));
  ASSERT_TRUE(now);
  EXPECT_EQ(now->holder, other.holder) << "the other machine's lease is left to it";
}

TEST_F(LeaseCoordinatorTest, AFailedCompileReleasesItsLeaseAtOnce) {
  setenv("STAND_IN_FAIL", "batch_size=1", 1);
  pipeline::RunResult ci = run("fill", kCi);
  unsetenv("STAND_IN_FAIL");
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::Held) << notices;
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_FALSE(ci.compile->outcomes[0].ok);
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, lease.key)));
  ASSERT_TRUE(now);
  EXPECT_EQ(now->state, lease::State::Released);
  EXPECT_FALSE(now->note.empty()) << "the release says why";
}

// Without contention a run makes one claim commit per batch of --jobs compiles and one push whose
// commit also ends the leases: at most 1 + ceil(N/J) commits (the Hub counts commits per repo).
TEST_F(MemoryStorePipeline, WithoutContentionLeasesCostOneClaimPerBatchAndNoCommitOfTheirOwnEnd) {
  write_file(work / "neuron-cache.yaml", stand_in_manifest({{"acme/tiny",
                                                             {{"tiny-bs1", 1},
                                                              {"tiny-bs2", 2},
                                                              {"tiny-bs3", 3},
                                                              {"tiny-bs4", 4},
                                                              {"tiny-bs5", 5}}}}));
  lease_seconds = 600;  // no renewal during the run
  jobs = 2;
  pipeline::RunResult ci = run("fill", kCi);
  ASSERT_TRUE(ci.compile && ci.push) << notices;
  ASSERT_EQ(ci.compile->leases.size(), 5u) << notices;
  EXPECT_EQ(ci.push->result.pushed.size(), 5u) << notices;
  EXPECT_EQ(store.commits(), 1 + 3) << "1 push + ceil(5/2) claims\n" << notices;
  for (const auto& outcome : ci.compile->leases) {
    EXPECT_EQ(outcome.kind, pipeline::LeaseOutcome::Kind::Held) << outcome.note;
    std::optional<lease::Record> record =
        lease::parse(store.content(lease::remote_path(ci.compiler_version, outcome.key)));
    ASSERT_TRUE(record) << outcome.configuration;
    EXPECT_EQ(record->state, lease::State::Done) << outcome.configuration << ": ended in the push";
  }
}

// A rerun of a killed `ci` on the same machine: the lease its dead process holds is taken back at
// once, not waited for until it expires.
TEST_F(LeaseCoordinatorTest, ALeaseOfADeadProcessOfThisMachineIsTakenBackAtOnce) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const std::string identity = process::identity_of(child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(identity.empty());
  lease::Record other = plant_lease(600, identity);

  auto start = std::chrono::steady_clock::now();
  pipeline::RunResult ci = run("fill", kCi);
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::TookOver) << notices;
  EXPECT_TRUE(contains(lease.note, "has ended")) << lease.note;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "not waited for";
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_TRUE(ci.compile->outcomes[0].ok) << ci.compile->outcomes[0].error;
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, other.key)));
  ASSERT_TRUE(now);
  EXPECT_EQ(now->state, lease::State::Done);
  EXPECT_EQ(now->process, process::this_process());
}

// A live process of this machine (another run beside this one) is waited for like any holder.
TEST_F(LeaseCoordinatorTest, ALeaseOfALiveProcessOfThisMachineIsWaitedFor) {
  lease::Record other = plant_lease(600, process::this_process());
  wait_timeout = std::chrono::seconds(1);
  pipeline::RunResult ci = run("fill", kCi);
  EXPECT_EQ(only_lease(ci).kind, pipeline::LeaseOutcome::Kind::WaitTimedOut) << notices;
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, other.key)));
  ASSERT_TRUE(now);
  EXPECT_EQ(now->holder, other.holder);
}

// Text a hostile writer may put in a lease: a right-to-left override and C1 controls (CSI, NEL).
const std::string kHostile =
    "evil\xE2\x80\xAEgnp.exe\xC2\x9B"
    "2J\xC2\x85";

// No byte of kHostile's controls reached `text`.
bool unescaped(const std::string& text) {
  return contains(text, "\xE2\x80\xAE") || contains(text, "\xC2\x9B") || contains(text, "\xC2\x85");
}

// A lease no live holder wrote stops nobody: the configuration is compiled here at once, once,
// and the notice names the lease's host and why, escaped. Without the rule each of these made
// every machine wait its whole bound (an hour) for a compile that never came.
class HostileLeaseTest : public LeaseCoordinatorTest,
                         public ::testing::WithParamInterface<const char*> {};

TEST_P(HostileLeaseTest, IsSetAsideAtOnceAndTheConfigurationCompiledOnce) {
  const std::string hostile = GetParam();
  setenv("STAND_IN_DELAY", "0", 1);
  wait_timeout = std::chrono::seconds(60);  // a regression waits a minute, not an hour
  lease::Record other = plant_lease(600, "", [&](lease::Record& r) {
    r.host = "runner-" + kHostile;
    r.configuration = kHostile;
    r.note = kHostile;
    if (hostile == "expires 9999") r.expires = *parse_utc_timestamp("9999-12-31T23:59:59Z");
    if (hostile == "expected 1e300") r.expected_seconds = 1e300;
    if (hostile == "heartbeat 2099") {
      r.started = r.heartbeat = *parse_utc_timestamp("2099-01-01T00:00:00Z");
      r.expires = r.heartbeat + 600;
    }
    if (hostile == "1970 to 9999") {
      r.started = r.heartbeat = 0;
      r.expires = *parse_utc_timestamp("9999-12-31T23:59:59Z");
    }
  });
  auto start = std::chrono::steady_clock::now();
  pipeline::RunResult ci = run("fill", kCi);
  auto took = std::chrono::steady_clock::now() - start;
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::TookOver) << notices;
  EXPECT_LT(took, std::chrono::seconds(10)) << "a few poll intervals at most, then the compile";
  ASSERT_EQ(ci.compile->outcomes.size(), 1u);
  EXPECT_TRUE(ci.compile->outcomes[0].ok) << ci.compile->outcomes[0].error;
  std::optional<lease::Record> now =
      lease::parse(store.content(lease::remote_path(ci.compiler_version, other.key)));
  ASSERT_TRUE(now);
  EXPECT_NE(now->holder, other.holder);
  EXPECT_EQ(now->state, lease::State::Done);
  // Said once, naming the host (escaped) and why.
  const std::string said = "the lease of " + printable(other.host) + " is damaged or hostile (";
  EXPECT_TRUE(contains(notices, said)) << notices;
  EXPECT_EQ(notices.find(said), notices.rfind(said)) << notices;
  const char* why = hostile == "expected 1e300"   ? "expected compile time is beyond 48 hours"
                    : hostile == "heartbeat 2099" ? "is in the future"
                    : hostile == "1970 to 9999"   ? "is before 2020"
                                                  : "no holder claims that long";
  EXPECT_TRUE(contains(notices, why)) << notices;
  EXPECT_FALSE(unescaped(notices)) << notices;
  EXPECT_FALSE(unescaped(lease.other_host + lease.note)) << lease.other_host << lease.note;
}

INSTANTIATE_TEST_SUITE_P(Leases, HostileLeaseTest,
                         ::testing::Values("expires 9999", "expected 1e300", "heartbeat 2099",
                                           "1970 to 9999"));

// A sound lease with hostile text is waited for, and its text reaches no line raw.
TEST_F(LeaseCoordinatorTest, ALeasesTextIsEscapedInEveryLine) {
  lease::Record other = plant_lease(2, "", [](lease::Record& r) {
    r.host = "runner-" + kHostile;
    r.configuration = kHostile;
  });
  pipeline::RunResult ci = run("fill", kCi);
  const pipeline::LeaseOutcome& lease = only_lease(ci);
  EXPECT_EQ(lease.kind, pipeline::LeaseOutcome::Kind::TookOver) << notices;
  const std::string waiting =
      printable(kHostile) + " is being compiled by " + printable(other.host) + " since ";
  EXPECT_TRUE(std::any_of(progress.begin(), progress.end(), [&](const std::string& line) {
    return contains(line, waiting);
  })) << list_of(progress, progress.size());
  for (const auto& line : progress) EXPECT_FALSE(unescaped(line)) << line;
  EXPECT_FALSE(unescaped(notices)) << notices;
  EXPECT_FALSE(unescaped(lease.other_host + lease.note)) << lease.other_host << lease.note;
}

}  // namespace
}  // namespace neuron_cache::testing
