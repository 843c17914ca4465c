// Who vouches for an index entry: an Ed25519 signature over the entry's canonical statement, by a
// key the reader trusts (Nix's binary cache signatures, for neuron-cache's index).
//
// The statement is the UTF-8 of Python's
//   json.dumps({"statement": "neuron-cache entry v1", "key": <entry key>,
//               "compiler_version": <inputs' compiler version>, "inputs": <the entry's inputs,
//               as the index writes them>, "files": [{"path": ..., "size": ..., "sha256": ...}]},
//              sort_keys=True)
// (separators ", " and ": ", ASCII escapes: the cache key's form), where "files" lists every
// module file as "<MODULE_ folder>/<name>" and every registry file by its name, all relative to
// the neuronxcc-<version> folder, sorted by path. What is signed is what decides what a machine
// installs: the configuration's inputs and the exact bytes (size, sha256) at each path. The
// configuration name, compile time, tool and creation time are informative and not signed.
// docs/formats.md ("Signed entries") has the worked vector tests/data/signing/vector.json.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/trust/keys.h"

namespace neuron_cache::trust {

using Signature = artifact_index::EntrySignature;
inline constexpr const char* kStatementKind = "neuron-cache entry v1";

std::string canonical_statement(const artifact_index::Entry& entry);

Signature sign_entry(const artifact_index::Entry& entry, const SecretKey& key);
// Adds `signature` beside the entry's others (a co-signer), replacing one of the same key name;
// throws an input Error when the entry already holds artifact_index::kMaxSignatures others.
void add_signature(artifact_index::Entry& entry, Signature signature);

// What an entry's signatures say to a reader with `trusted` keys. Every signature of a trusted
// key is checked; a signature of another key is only named.
struct Verdict {
  enum class Outcome {
    Trusted,       // a trusted key's signature verifies, and none fails
    Unsigned,      // no signature at all
    UnknownKeys,   // signatures, none of them by a trusted key
    BadSignature,  // a trusted key's signature does not verify (even if another one does)
  };
  std::vector<std::string> valid;    // trusted keys whose signature verifies
  std::vector<std::string> bad;      // trusted keys whose signature does not verify
  std::vector<std::string> unknown;  // keys not trusted

  // A bad signature by a trusted key outweighs a valid one: that key vouched for other bytes (a
  // file, the inputs or the key changed after it signed, or its name was forged), and a reader
  // that requires no signature still refuses such an entry. Callers that decide otherwise have
  // `valid` and `bad`.
  Outcome outcome() const;
  bool trusted() const { return outcome() == Outcome::Trusted; }
  // One line: "signed by trusted key acme-ci-1", "unsigned", ...
  std::string reason() const;
};

Verdict verify_entry(const artifact_index::Entry& entry, const TrustedKeys& trusted);

}  // namespace neuron_cache::trust
