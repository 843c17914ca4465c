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

  // Whether another machine must wait for it at `now`.
  bool live(int64_t now) const { return state == State::Compiling && now < expires; }
};

// "neuron-cache-leases/neuronxcc-<version>/<key>.json"
std::string remote_path(std::string_view compiler_version, std::string_view key);
// The compiler version of a file below kRemoteDir, or nothing for other paths.
std::optional<std::string> compiler_version_of_lease(std::string_view path_in_store);

std::string serialize(const Record& record);
// Nothing for text that is not a lease of this format (damaged, truncated, a newer format, a
// name with control characters): such a file protects nothing and may be replaced.
std::optional<Record> parse(std::string_view text);

}  // namespace neuron_cache::lease
