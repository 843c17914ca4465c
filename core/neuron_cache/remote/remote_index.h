// Reading the artifact index of a cache store (format/artifact_index.h) with a number of
// requests that grows with the models asked about, not with the store: the head commit, ONE
// stat request for the shards of those models (and the format 1 file of each compiler
// version; S3 and folders: one request per file), then those files downloaded in parallel, each
// verified against its listed ids.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::remote {

// An index file larger than this is refused before it is read (pyjson's default Limits, the
// bound of every index text): a shard holds about 2 KB per configuration, so this is some 30,000
// configurations of ONE model; a format 1 file (all models, neuron-cache 0.1) beyond it, some
// 6,000 configurations, is not read.
inline constexpr uint64_t kMaxIndexFileBytes = pyjson::Limits{}.max_bytes;
// How many times an index file replaced during its download is listed and fetched again (stores
// without revisions).
inline constexpr int kRewriteRetries = 2;

class RemoteIndex {
 public:
  // Everything reads the head commit, read on first need (load, revision()), so a plan whose every
  // configuration is complete locally can ask the store nothing. With `copies`, index files are
  // kept there by their content id (RemoteEntry::content_id) (verified when read back), so an index
  // file that did not change since the last run is not downloaded again.
  static RemoteIndex open(storage::Store& store, sys::RootedFile copies = {});
  // An index of exactly `entries` (a lockfile's), read from no index file: load() asks nothing,
  // compiler_versions() lists theirs. `revision` pins the reads when not empty (the lock's commit
  // on the lock's store); else the head is read on first need.
  static RemoteIndex locked(storage::Store& store, const std::string& revision,
                            const std::vector<artifact_index::Entry>& entries);

  const std::string& repo() const { return repo_; }
  // The head commit, read now when not yet: throws what the store's head() throws.
  const std::string& revision() const;
  bool revision_read() const { return revision_.has_value(); }
  // Fetches the index files that can hold these entries: (compiler version, shard path) pairs
  // (artifact_index::remote_shard_path), and the format 1 file of each version, once each: what
  // find() and entries_of() answer from.
  void load(const std::set<std::pair<std::string, std::string>>& versions_and_shards);
  const artifact_index::Entry* find(const std::string& compiler_version,
                                    const std::string& key) const;
  // The compiler versions the repo has index files for (one listing, asked once): what a miss
  // looks through for a nearest configuration.
  const std::vector<std::string>& compiler_versions();
  // Every loaded entry of the model (or profile) of `inputs`, for explaining misses.
  std::vector<const artifact_index::Entry*> entries_of(const cache_key::KeyInputs& inputs) const;
  // Entries (or whole files) set aside so far because they could not be read.
  const std::vector<std::string>& problems() const { return problems_; }
  // False when an index file could not be fetched intact: what it holds is unknown, which is
  // not the same as absent.
  bool complete() const { return incomplete_.empty(); }
  const std::string& why_incomplete() const { return incomplete_; }

 private:
  explicit RemoteIndex(storage::Store& store) : store_(&store), repo_(store.name()) {}
  std::vector<storage::RemoteEntry> listed(const std::vector<std::string>& paths);
  std::vector<std::string> fetch(const std::vector<storage::RemoteEntry>& files,
                                 std::map<std::string, std::string>& texts, bool last);
  std::optional<std::string> read_copy(const storage::RemoteEntry& file) const;
  void keep_copy(const storage::RemoteEntry& file, const std::string& text) const;
  void add(const artifact_index::IndexFile& file);

  storage::Store* store_;
  std::string repo_;
  mutable std::optional<std::string> revision_;
  sys::RootedFile copies_;
  std::set<std::string> asked_;  // paths already looked for
  std::optional<std::vector<std::string>> versions_;
  std::map<std::string, std::map<std::string, artifact_index::Entry>> entries_;  // version, key
  std::vector<std::string> problems_;
  bool locked_ = false;
  std::string incomplete_;  // why, when not complete
};

}  // namespace neuron_cache::remote
