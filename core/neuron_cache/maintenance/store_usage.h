// What a cache store holds and what it costs (`neuron-cache du`): bytes and files by compiler
// version, by model and by age, from listings and the index shards only; no artifact is ever
// downloaded. Requests: the head, one listing of the root's top level, one recursive listing of
// each top folder (paginated by the store) and one download per index file, so the cost follows
// the compiler versions and the shards, not the number of files.
//
// Everything the store says is taken as hostile: names are kept printable (format/printable.h),
// sums of listed sizes saturate at UINT64_MAX (and say so), a store listing more than
// UsageOptions::max_files files is refused, and an index file that cannot be read is a problem
// counted, never a failure of the whole measure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::maintenance {

// Files a measured store may list: a cache holds a few files per compiled graph, so more is not
// a cache (or one too large to measure from listings held in memory).
inline constexpr uint64_t kMaxUsageFiles = 10'000'000;

// A number of things and their bytes. add() saturates: a hostile listing of huge sizes gives
// UINT64_MAX, never a wrapped small number.
struct Tally {
  uint64_t count = 0;
  uint64_t bytes = 0;
  // Whether a sum reached UINT64_MAX and stopped there.
  bool saturated = false;
  void add(uint64_t n, uint64_t size);
};

// a + b, or UINT64_MAX (and `saturated` set) when it does not fit.
uint64_t saturating_add(uint64_t a, uint64_t b, bool& saturated);

struct VersionUsage {
  std::string compiler_version;  // printable
  Tally files;                   // every file of neuronxcc-<version>/
  Tally modules;                 // MODULE_ folders (count) and the bytes of their files
  Tally registry;                // files under 0_REGISTRY/
  Tally other;                   // any other file of the compiler folder
  Tally unindexed;               // MODULE_ folders no index entry of this version references
  Tally index;                   // index files of this version (shards and the format 1 file)
  uint64_t configurations = 0;   // index entries of this version
};

// Configurations of one model (or profile) and the MODULE_ folders they reference.
struct ModelUsage {
  std::string name;  // the model id, or the profile name (printable)
  bool profile = false;
  uint64_t configurations = 0;
  // Distinct MODULE_ folders its entries reference that the store holds, and their bytes as
  // listed: a folder two models reference counts for each of them.
  Tally referenced;
  // Folders its entries reference that the store does not hold.
  uint64_t missing_modules = 0;
};

// Index entries by the age of their created_at.
struct AgeBucket {
  std::string name;  // "< 1 day", "< 7 days", "< 30 days", "< 90 days", "older", "unknown"
  std::string key;   // "1d", "7d", "30d", "90d", "older", "unknown" (JSON)
  uint64_t configurations = 0;
  // Distinct MODULE_ folders the bucket's entries reference (held by the store), and bytes.
  Tally referenced;
};

struct StoreUsage {
  std::string store;                   // the store's name (Store::name)
  std::string kind;                    // "hub", "s3", "folder"
  Tally total;                         // every file listed
  std::vector<VersionUsage> versions;  // by version name
  std::vector<ModelUsage> models;      // most referenced bytes first, then by name
  std::vector<AgeBucket> ages;         // the six buckets, youngest first
  Tally modules;                       // every MODULE_ folder
  Tally unindexed;                     // every MODULE_ folder no entry references
  Tally index;                         // every file under neuron-cache-index/
  Tally other;                         // top-level content that is neither (leases, stray files)
  uint64_t configurations = 0;         // index entries read
  uint64_t index_files_read = 0;       // index files read and parsed (even partly)
  // Index files or entries that could not be read, listings that failed: the numbers above then
  // leave them out.
  std::vector<std::string> problems;
  uint64_t requests = 0;   // requests this measure sent to the store
  bool saturated = false;  // some sum reached UINT64_MAX
};

struct UsageOptions {
  // Seconds since 1970 the ages are measured from; 0: the clock's now.
  int64_t now = 0;
  uint64_t max_files = kMaxUsageFiles;
};

// Measures `store` at its head. Throws the store's Error when a listing fails (unreachable, no
// access, not found; a store whose policy absorbs failures gives a problem instead, except for
// its root), and an operational Error past options.max_files.
StoreUsage store_usage(storage::Store& store, const UsageOptions& options = {});

}  // namespace neuron_cache::maintenance
