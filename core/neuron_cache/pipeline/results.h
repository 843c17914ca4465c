// What each step of the pipeline did (pipeline/pipeline.h): one struct per step, each with the
// one `+=` that adds a later part of the same run (a retry, a fetch after waiting for another
// machine, a push made before waiting).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/transfer/prefetch.h"
#include "neuron_cache/transfer/push.h"

namespace neuron_cache::pipeline {

struct PrefetchStep {
  transfer::PrefetchResult result;
  size_t hits = 0;  // configurations fetched from the Hub
  double seconds = 0;
};
// Adds a later prefetch of the same run (transfer::PrefetchResult's += for the results).
PrefetchStep& operator+=(PrefetchStep& into, const PrefetchStep& later);

struct CompileOutcome {
  std::string configuration;
  std::string key;
  bool ok = false;
  bool recorded = false;  // an index entry was written: the configuration is complete locally
  double seconds = 0;
  int exit_code = -1;
  std::string error;     // one line
  std::string log_file;  // the command's output
  std::string log_tail;  // last lines, for failures
  size_t modules_produced = 0;
  size_t modules_used = 0;
  // Folders optimum-neuron's hub proxy left without a NEFF of their own (linked or not), to
  // complete from the store.
  size_t modules_from_hub = 0;
  // Not empty when the command compiled nothing itself: "reused from the Hub through
  // optimum-neuron".
  std::string reused;
  // With `ok`: why no index entry was written although the command succeeded (the store lacks
  // what the hub proxy used, or which graphs it used is unknown), or "".
  std::string not_recorded;
  uint64_t bytes_downloaded = 0;   // from the store, to complete what the hub proxy left
  uint64_t bytes_linked = 0;       // ... taken from the HF file cache instead (verified)
  uint64_t bytes_reused = 0;       // of the folders recorded for a configuration reused
  std::vector<std::string> notes;  // cached entries the run could not reuse, and why
  // The configurations the command exported when it exported more than one in its process (manifest
  // names where they match, else model and shape): their keys are not reproducible.
  std::vector<std::string> exported_configurations;
};

// What completing the folders optimum-neuron's hub proxy left from the store did.
struct Adoption {
  std::string problem;        // why they are not all complete now, or ""
  bool store_failed = false;  // the store failed (not: it lacks them), a cache problem
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_linked = 0;  // taken from the HF file cache instead of downloaded
};

// How the lease of one missed configuration went.
struct LeaseOutcome {
  enum class Kind {
    Held,          // this machine took the lease and compiled
    TookOver,      // ... from a machine that stopped without a result (expired or released)
    Fetched,       // another machine compiled it: waited, then fetched its push
    WaitTimedOut,  // waited past the bound, then compiled without the lease
    NotWaited,     // --no-wait: compiled although another machine compiles it too
    NoLease,       // the store could not give one (see `note`): compiled without
  };
  std::string configuration;
  std::string key;
  Kind kind = Kind::Held;
  std::string other_host;  // the machine that held it (Fetched, TookOver, WaitTimedOut, NotWaited)
  double waited_seconds = 0;
  std::string note;
};
// "held", "took_over", "waited_then_fetched", "wait_timed_out", "not_waited", "no_lease"
std::string_view lease_kind_name(LeaseOutcome::Kind kind);

struct CompileStep {
  std::vector<CompileOutcome> outcomes;
  std::vector<LeaseOutcome> leases;  // one per miss when leases are enabled
  // The store cannot refuse a conditional write itself (an S3-compatible server that ignores
  // If-None-Match): two machines may both hold a lease, rarely.
  bool leases_advisory = false;
  // What was fetched after waiting for other machines' compiles (LeaseOutcome::Kind::Fetched).
  PrefetchStep fetched;
  double seconds = 0;
  size_t failed() const;
};

// `neuron-cache run -- CMD`: a command run with the cache, and what it compiled.
struct WrappedRun {
  int exit_code = -1;
  std::string error;  // when it could not start or was killed
  double seconds = 0;
  std::vector<std::string> produced;  // "neuronxcc-<v>/MODULE_..." moved into the cache
  size_t used = 0;
  bool recorded = false;     // an index entry was written for the target
  std::string not_recorded;  // with a target and a zero exit status: why no entry was written
  // With a target and a zero exit status: the command neither produced nor used a graph, and
  // every folder of the target's entry was complete before it ran: nothing new to record.
  bool all_cached_before = false;
  size_t modules_recorded = 0;  // MODULE_ folders the written entry lists
  size_t modules_added = 0;     // ... that the target's previous local entry did not list
};

struct PushStep {
  bool attempted = false;
  transfer::PushResult result;
  std::string skipped_reason;  // read-only, offline, no repo, nothing to push, error
  double seconds = 0;
};
// Adds a later push of the same run: attempted when either was; a skip's reason stays only
// while nothing was attempted (a later "nothing new to push" is no news after a push), an
// error's reason is kept.
PushStep& operator+=(PushStep& into, const PushStep& later);

// `neuron-cache lock`: the store's entries of the plan's configurations.
struct LockStep {
  lockfile::Lock lock;               // every configuration the store holds
  std::vector<std::string> missing;  // "name: why" for each one it cannot cover
};

}  // namespace neuron_cache::pipeline
