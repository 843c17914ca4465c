// The lockfile, `neuron-cache.lock` beside the manifest: the exact bytes a build uses. For each
// configuration of the manifest, the store's index entry (cache key, the inputs it is computed
// from, the resolved model revision, every MODULE_ file and registry file with its size and
// sha256), plus the manifest's own sha256 and the store and revision it was read from. A
// prefetch from the lock reads neither the index nor the plan: it downloads these files,
// verified against these sha256, from any store that holds them (the Hub, a mirror, a bundle).
//
//   {"configurations": [{"entry": <index entry, artifact_index.h>, "name": "llama-bs1",
//                        "signed_by": ["acme-ci-1"] (only when a trusted key signed it)}, ...],
//    "format_version": 1, "manifest": "neuron-cache.yaml", "manifest_sha256": "<64 hex>",
//    "revision": "<Hub commit, or empty>", "store": "hf://acme/neuron-cache"}
//
// Written as json.dumps(sort_keys=True, indent=2) writes it, configurations by name: the same
// lock gives the same bytes, and a change shows as a small diff.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/format/artifact_index.h"

namespace neuron_cache::lockfile {

inline constexpr int kFormat = 1;
inline constexpr std::string_view kFileName = "neuron-cache.lock";
// A lock of 10,000 configurations is about 20 MB; a larger file is not a lock.
inline constexpr size_t kMaxLockBytes = 64u << 20;

struct Locked {
  std::string name;  // the manifest's configuration name
  artifact_index::Entry entry;
  // The trusted keys whose signature of the entry verified when it was locked (written as
  // "signed_by" only when there is one): who vouched for these bytes. A locked prefetch verifies
  // the entry's signatures again under the trust it runs with.
  std::vector<std::string> signed_by;
};

struct Lock {
  std::string manifest;         // the manifest's file name, for messages
  std::string manifest_sha256;  // of the manifest's bytes
  std::string store;            // the store's location it was read from ("hf://org/name")
  std::string revision;         // the store's revision then (a Hub commit), or ""
  std::vector<Locked> configurations;

  // The configuration named `name`, or null.
  const Locked* find(std::string_view name) const;
};

// A file a lock's entry names, relative to the cache root ("neuronxcc-<v>/MODULE_.../model.neff",
// "neuronxcc-<v>/0_REGISTRY/...").
struct LockedFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;
};
// Every file the lock's entries name, in their order (a file two configurations share: twice).
std::vector<LockedFile> locked_files(const Lock& lock);

std::string serialize(Lock lock);
// Throws an input Error naming `origin` for anything that is not a lock of this format: bad
// JSON, a newer format, a duplicate name, an entry whose key does not match its inputs or whose
// file names are unsafe (artifact_index::entry_from_json's rules).
Lock parse(std::string_view text, const std::string& origin);

}  // namespace neuron_cache::lockfile
