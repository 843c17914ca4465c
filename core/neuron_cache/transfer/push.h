// `neuron-cache push`: uploads the artifacts of locally compiled configurations, their registry
// files and the updated artifact index in ONE commit on top of the head it read. Entries the store
// index already has with every MODULE_ folder and registry file (artifact_index::covers) are not
// sent; an entry that grew since (a profile, or `run --config`, that compiled more graphs) is
// written again as the union of both, and only the folders the store's entry lacked are uploaded.
// Files the store already holds are skipped by the commit itself.
// Local files are checked against their index entry first, so a changed or half-written file is
// never published under a configuration's key.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/trust/keys.h"

namespace neuron_cache::transfer {

// More writes for the push's own commit, made on the head it commits on: the compile leases of
// the configurations it publishes end in the commit that adds their artifacts (fleet/leases.h),
// one commit fewer per run on a store that counts commits. `keys` are the configurations the
// commit publishes; the writes land after the index's (a waiter that reads "done" finds the
// entry).
using AlsoCommit = std::function<std::vector<storage::CommitOperation>(
    const std::string& head, const std::vector<std::string>& keys)>;

struct PushOptions {
  net::RetryPolicy conflicts{6, std::chrono::milliseconds(1000), std::chrono::milliseconds(30000)};
  // Signs every entry the push writes (trust/signing.h). A signing push vouches only for bytes
  // it hashed itself or its own key signed before: the store's entry of the same key is kept
  // when this key signed it (and grown when the push adds folders), co-signed when its files are
  // exactly the local ones, and otherwise replaced by the local entry and its files (a writer
  // without the key may have put other bytes there; what it listed besides is dropped).
  const trust::SecretKey* signer = nullptr;
};

struct PushResult {
  std::vector<std::string> pushed;             // keys added to (or grown in) the store's index
  std::vector<std::string> already_stored;     // keys the store's index had with all their contents
  size_t modules_added = 0;                    // MODULE_ folders the pushed entries added
  std::map<std::string, std::string> skipped;  // key -> why it was not pushed
  // Index files that could not be read (damaged) and were rewritten with what this push adds:
  // what they listed besides is pushed again by the machines that have it, or compiled.
  std::vector<std::string> repaired;
  // Keys of `pushed` whose store entry already had these exact files: the push added only its
  // signature. And keys whose store entry it replaced, with why (PushOptions::signer).
  std::vector<std::string> cosigned;
  std::map<std::string, std::string> replaced;
  storage::CommitResult commit;
  int attempts = 0;
};
// Adds a later push of the same run to `into` (CommitResult's += for the commits).
PushResult& operator+=(PushResult& into, const PushResult& later);

std::string push_commit_message(size_t configurations);

// Whether a push of `local` would leave the store's entry `on_hub` as it is: it lists every
// folder and file of `local`, and, for a signing push, `signer` signed it.
bool already_stored(const artifact_index::Entry& on_hub, const artifact_index::Entry& local,
                    const trust::SecretKey* signer);

PushResult push(storage::Store& store, const local::LocalIndex& local,
                const std::vector<artifact_index::Entry>& entries, const PushOptions& options = {},
                const AlsoCommit& also = {});

// Uploads complete MODULE_ folders ("neuronxcc-<v>/MODULE_...") in one commit, without index
// entries: what a run without a declared configuration compiled.
PushResult push_modules(storage::Store& store, const local::LocalIndex& local,
                        const std::vector<std::string>& modules, const PushOptions& options = {});

}  // namespace neuron_cache::transfer
