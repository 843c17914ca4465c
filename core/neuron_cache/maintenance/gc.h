// `neuron-cache gc`: what a cache store holds that nothing needs, and its removal. Every rule of
// what gc may remove lives here.
//
// Referenced (never removed): every MODULE_ folder an index entry names (profiles included), and
// MODULE_<h> for every optimum-neuron registry file <h>.json of the compiler folder (a traced
// export's folder is named after its registry entry).
//
// Removed, after a dry run (plan_gc) and only by apply_gc:
// - index entries older than GcOptions::older_than whose key no given manifest declares (their
//   shards are rewritten through the same conflict-checked publication as push); the folders
//   only they referenced go with them;
// - MODULE_ folders nothing references ("unreferenced"), as GcOptions::unreferenced says.
//   optimum-neuron's synchronize, libneuronxla (NEURON_COMPILE_CACHE_URL) and `neuron-cache push`
//   without --config or --profile write folders no index names, which compilers find by graph
//   hash: in `auto` mode they are kept in a compiler folder that has no neuron-cache index, an
//   index file gc cannot read, or registry files no index entry lists (another writer's sign);
// - lease files of compiles that ended (done, released, or expired) longer than the grace ago,
//   and at once those no live holder could have written (lease::damaged: hostile or far off).
// - what killed writers left, which no publication sweeps (Store::leftovers, each backend its
//   own): a shared folder's temporary copies and probes older than an hour and its empty
//   MODULE_ folders older than the grace that nothing references; S3 multipart uploads whose
//   in-store record is older than a day (aborted, then the record deleted). The Hub has none.
// Never removed: anything written within GcOptions::grace (a push in flight writes its folders
// before its index entry on S3 and folders), an unreferenced folder written since a live
// compile lease of its compiler version began (a damaged lease is not live, so this reaches back
// at most lease::kMaxLifeSeconds + kMaxCompileSeconds), and a folder or unreadable lease file whose
// age the store cannot give. The Hub's tree lists no times: the folders that may go and the
// unreadable lease files are asked for theirs (the last commit touching each, Store::stat_times),
// so a `neuron-cache run` push a minute old is not removed there either. gc's own commit on the Hub
// is conditional on the head it read.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/maintenance/store_usage.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::maintenance {

// What happens to MODULE_ folders no index entry or registry file references.
enum class Unreferenced { Auto, Keep, Remove };
// "auto", "keep", "remove", or nothing.
std::optional<Unreferenced> unreferenced_named(std::string_view name);

inline constexpr int64_t kDefaultGraceSeconds = 86'400;

struct GcOptions {
  int64_t now = 0;  // seconds since 1970; 0: the clock's now
  int64_t grace = kDefaultGraceSeconds;
  // Entries whose created_at is older than this many seconds are dropped...
  std::optional<int64_t> older_than;
  // ...unless their key is one of these (the configurations of the given manifests).
  std::set<std::string> declared;
  Unreferenced unreferenced = Unreferenced::Auto;
  uint64_t max_files = kMaxUsageFiles;
};

// A MODULE_ folder gc removes.
struct GcFolder {
  std::string path;      // "neuronxcc-<v>/MODULE_<name>", raw (printable() it to show it)
  Tally files;           // its files and their bytes
  int64_t modified = 0;  // its newest file's modification time, 0 when the store lists none
  std::string why;       // "unreferenced" or "its entries were dropped"
  std::vector<std::string> file_paths;
};

// An index entry gc drops.
struct GcEntry {
  std::string compiler_version;
  std::string key;
  std::string owner;  // the model id, or "profile NAME" (printable)
  std::string configuration;
  std::string created_at;
  std::vector<std::string> index_files;  // the files that hold it (a shard, a format 1 file)
};

// Folders kept although nothing references them, by why.
struct KeptGroup {
  std::string why;
  Tally folders;  // count: folders
};

struct GcLeaseFile {
  std::string path;
  uint64_t size = 0;
  std::string why;
};

struct GcPlan {
  std::string store;
  std::string kind;
  std::string revision;  // the head read (Hub), or ""
  std::vector<GcEntry> dropped;
  std::vector<GcFolder> removed;
  std::vector<KeptGroup> kept;
  std::vector<GcLeaseFile> leases;
  // What killed writers left (Store::leftovers): removed by apply_gc, each checked again first.
  std::vector<storage::Leftover> leftovers;
  Tally folders;                // every MODULE_ folder
  Tally referenced;             // folders an entry or registry file still references
  Tally freed;                  // the files removed folders and lease files hold
  uint64_t configurations = 0;  // index entries read
  uint64_t lease_files = 0;
  std::vector<std::string> problems;  // index or lease files that could not be read
  uint64_t requests = 0;
  bool saturated = false;

  // Set by apply_gc.
  bool applied = false;
  size_t index_files_rewritten = 0;
  size_t files_deleted = 0;
  size_t leftovers_removed = 0;
  int attempts = 0;
  // Folders a push referenced again between the plan and the deletion: not deleted.
  std::vector<std::string> spared;
  // Set by squash_after_gc: the Hub revision that is now the repo's whole history.
  std::string squashed_revision;
};

// What gc would remove from `store` at its head; reads listings, index files and lease files
// only. Throws the store's Error when its root or a compiler folder cannot be listed (nothing is
// decided on a partial view), an operational Error past options.max_files.
GcPlan plan_gc(storage::Store& store, const GcOptions& options);

// Removes what `plan` says: first the dropped entries from their index files (each file read at
// the head again and published only if unchanged since; an entry pushed again meanwhile stays),
// then, reading the index again, every planned folder that still nothing references, and the
// lease files, in one publication conditional on that head (on the Hub one commit).
void apply_gc(storage::Store& store, GcPlan& plan, const GcOptions& options,
              const net::RetryPolicy& conflicts);

// On the Hub, deletions are a commit: the LFS storage the repo is billed for still holds the
// deleted files until the history is squashed into one commit (the Hub's super-squash). Asked for
// explicitly (`gc --apply --squash`): older revisions stop resolving, so a lockfile or an
// optimum-neuron run pinned to one fails. Other stores throw an input Error (a deletion frees
// their bytes at once).
void squash_after_gc(storage::Store& store, GcPlan& plan);

// What a gc run does after its plan.
struct GcRun {
  bool apply = false;
  bool squash = false;  // with apply, on the Hub only
};
// plan_gc, then apply_gc and squash_after_gc as `run` asks: `neuron-cache gc` and the Action's
// gc mode. Input Errors before any request: squash without apply or on a store without history,
// apply on a store that cannot be written (why_not_writable: a read-only token or policy).
// Failures of the store say "gc of <store> failed".
GcPlan collect_garbage(storage::Store& store, const GcOptions& options, GcRun run,
                       const net::RetryPolicy& conflicts);

}  // namespace neuron_cache::maintenance
