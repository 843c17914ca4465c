// A bundle: one POSIX tar (ustar) file holding a lockfile and the files it locks, for machines
// with no network at all. `neuron-cache bundle` writes it from the local cache; `prefetch
// --from-bundle` unpacks it into a scratch folder that then serves as the store of a locked
// prefetch (each file checked against the lock's sha256 there). What a bundle holds is hostile
// until checked: only regular files with safe relative paths, sizes bounded while reading, never
// a link, nothing written outside the scratch folder.
//
//   neuron-cache.lock
//   neuronxcc-<version>/MODULE_<...>/<file>      every file of the locked entries' modules
//   neuronxcc-<version>/0_REGISTRY/<...>.json    and their registry files
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace neuron_cache::bundle {

// A member larger than this is refused: no NEFF comes close.
inline constexpr uint64_t kMaxMemberBytes = uint64_t{256} << 30;
inline constexpr size_t kMaxMembers = 1'000'000;

// One file of a bundle: its path in the bundle, and where its bytes are read, both relative to
// the cache root (they differ for a registry alias, a link in the cache to a file of the same
// content).
struct Member {
  std::string path;
  std::string source;
};

// Writes `lock_text` as neuron-cache.lock, then each member (in order, each path once) read from
// `root`, to `output` through a temporary file renamed at the end. Refuses a path a ustar header
// cannot hold (over 255 bytes) and a source that is not a regular file (never follows a link).
void write(const std::filesystem::path& output, const std::string& lock_text,
           const std::filesystem::path& root, const std::vector<Member>& members);

// Unpacks `bundle` into the empty folder `into`; returns the lockfile's text. The lockfile comes
// first; after it, only the files it names, each at the size it locks and once, after checking
// that `into`'s disk has room for them all. Throws an input Error naming the member for a
// damaged or hostile bundle (bad checksum, a link or a device, an absolute path or "..", a
// member the lock does not name, a duplicate, a second lockfile, a truncated member, no
// neuron-cache.lock first); the caller removes `into`.
std::string extract(const std::filesystem::path& bundle, const std::filesystem::path& into);

}  // namespace neuron_cache::bundle
