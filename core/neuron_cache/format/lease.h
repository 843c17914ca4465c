// A compile lease: the small file in a cache store that says "this configuration is being
// compiled by that machine until then", so the machines of a fleet compile each configuration
// once and the others wait for its push (remote/leases.h holds the protocol). One file per cache
// key, rewritten in place, only ever through a write conditional on the version read:
//
//   neuron-cache-leases/neuronxcc-<compiler version>/<key>.json
//   {"configuration": "llama-bs1", "expected_seconds": 1834.2, "expires": "2026-12-03T12:13:00Z",
//    "format": 1, "heartbeat": "2026-12-03T12:03:00Z", "holder": "<32 hex>",
//    "host": "runner-7", "key": "<32 hex>", "note": "", "started": "2026-12-03T12:03:00Z",
//    "state": "compiling"}
//
// state: "compiling" (live until `expires`, which the holder pushes forward while it compiles),
// "done" (the holder pushed the result), "released" (it stopped without a result; `note` says
// why). The top-level name does not start with "neuronxcc-", so optimum-neuron's registry lookup
// never reads it, and its files are not MODULE_ folders, so prefetch never installs them.
//
// Anyone who can write the store writes lease files: their fields are hostile input. A lease no
// live holder could have written (damaged(): a heartbeat in the future, an expiry further away
// than any holder claims, times before the store existed, an absurd expected time) protects
// nothing, and gc removes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache::lease {

inline constexpr std::string_view kRemoteDir = "neuron-cache-leases";
inline constexpr int kFormat = 1;
// A lease file is a few hundred bytes; a larger one is damaged (or hostile) and reads as free.
inline constexpr uint64_t kMaxLeaseBytes = 64 * 1024;

// The bounds of what a live holder writes; past them a lease is damaged (damaged()).
// The longest NEURON_CACHE_LEASE_SECONDS allowed (config/settings.cpp refuses more).
inline constexpr int64_t kMaxTtlSeconds = 3600;
// The longest a lease may run past its heartbeat: a renewal adds at most kMaxTtlSeconds, and a
// claim for the holder's expected compile time plus a margin is capped at this.
inline constexpr int64_t kMaxLifeSeconds = 6 * 3600;
// The longest compile a holder may expect, or hold one lease for.
inline constexpr int64_t kMaxCompileSeconds = 48 * 3600;
// How far any machine's clock may be from the store's, either way. Expiry never reads a clock
// against another (fleet/lease_watch.h); only damaged() does, with twice this tolerance.
inline constexpr int64_t kMaxClockSkewSeconds = 600;
// How far a heartbeat may be ahead of the time it is judged against (the store's clock when it
// wrote the lease, else the reader's) before no live holder could have written it: a holder 10
// minutes ahead read by a machine 10 minutes behind is not damaged.
inline constexpr int64_t kMaxAheadSeconds = 2 * kMaxClockSkewSeconds;
// 2020-01-01T00:00:00Z: no store of this tool holds anything older.
inline constexpr int64_t kEarliestSeconds = 1'577'836'800;

enum class State { Compiling, Done, Released };
std::string_view state_name(State state);  // "compiling", "done", "released"

struct Record {
  State state = State::Compiling;
  std::string holder;  // the holding process's random id
  std::string host;    // its machine, for messages
  std::string configuration;
  std::string key;
  int64_t started = 0;  // seconds since 1970, UTC
  int64_t heartbeat = 0;
  int64_t expires = 0;
  double expected_seconds = 0;  // the holder's estimate of the compile time, or 0
  std::string note;             // with Released: why
  // The holding process (process::this_process(): boot, pid namespace, pid, start time), so a
  // rerun on the same machine knows a dead holder at once; empty in leases of older versions.
  std::string process;

  // Whether it is compiling and not expired at `now` on the holder's own clock, nor damaged:
  // for a reader of the holder's clock (gc). Waiters judge expiry without any wall clock
  // (fleet::LeaseWatch).
  bool live(int64_t now) const;
  // The life its holder promised at its last heartbeat (expires - heartbeat, a difference on
  // the holder's own clock), within [0, kMaxLifeSeconds].
  int64_t promised_life() const;
};

// Why no live holder could have written `record` (its fields as a person may read them, no text
// of the record in it), or nothing when it could have. A damaged lease protects nothing.
// `now`: the store's clock when it wrote the lease where the store says, else the reader's
// clock; `whose` names it in the reason ("the store's clock", "this machine's clock").
std::optional<std::string> damaged(const Record& record, int64_t now,
                                   std::string_view whose = "this machine's clock");

// a + b in seconds, at INT64_MIN or INT64_MAX instead of overflowing.
int64_t add_seconds(int64_t a, int64_t b);
// An expected compile time as a lease may carry it: within [0, kMaxCompileSeconds], 0 for NaN.
double bounded_expected(double seconds);
// The same in whole seconds, rounded up.
int64_t expected_whole_seconds(double seconds);
// utc_text() of a time a lease may carry, or "<n> s since 1970" past year 9999 or before 1970.
std::string time_text(int64_t seconds);

// "neuron-cache-leases/neuronxcc-<version>/<key>.json"
std::string remote_path(std::string_view compiler_version, std::string_view key);
// The compiler version of a file below kRemoteDir, or nothing for other paths.
std::optional<std::string> compiler_version_of_lease(std::string_view path_in_store);

std::string serialize(const Record& record);
// Nothing for text that is not a lease of this format (damaged, truncated, a newer format, a
// name with control characters): such a file protects nothing and may be replaced.
std::optional<Record> parse(std::string_view text);

}  // namespace neuron_cache::lease
