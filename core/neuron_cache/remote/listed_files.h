// Reading small files a listing named (index shards, lease files) the way every store-wide pass
// does (du, gc): in parallel batches through Store::download, each verified against its listed
// size and ids, failures as values. The number of memory files open at once stays bounded.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::remote {

// Files downloaded at once: each holds a memory file open.
inline constexpr size_t kListedFilesBatch = 32;

// The content of each of `files` (as listed at `revision`, in that order), or why it could not
// be read. Throws only when no memory file can be made.
std::vector<storage::Read<std::string>> read_listed_files(
    storage::Store& store, const std::string& revision,
    const std::vector<storage::RemoteEntry>& files);

}  // namespace neuron_cache::remote
