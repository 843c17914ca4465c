// When each complete MODULE_ entry was last used, for `cleanup --max-size` (least recently used
// first). A folder's atime cannot tell (relatime updates it at most daily, noatime never) and its
// mtime only moves when it is written, so the tool records use itself: one empty file per entry
// under <root>/.cache/huggingface/neuron-cache-used/<compiler dir>/<MODULE_ name>
// (layout::kUseRecordDir), whose mtime is set to now when a prefetch installs the entry or finds
// it complete, and when a compile command produced or reused it (CaptureResult). Entries no
// neuron-cache run touched have no record: cleanup falls back to their files' newest mtime.
// Outside the entries, so they stay byte for byte what libneuronxla wrote, and under
// .cache/huggingface, which optimum-cli synchronize (upload_folder) never publishes.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace neuron_cache::local {

using EntryName = std::pair<std::string, std::string>;  // compiler folder, MODULE_ name

// Sets the use time of `entries` to now: one utimensat per entry already recorded, a create for
// the others. Best effort and never throws: a cache folder that cannot be written (a shared
// read-only cache) only loses the record, and cleanup falls back to the entry's mtime.
void record_use(const std::filesystem::path& cache_root, const std::vector<EntryName>& entries);

// Every recorded use time (seconds since the epoch): one listing per compiler folder recorded.
std::map<EntryName, double> read_use_records(const std::filesystem::path& cache_root);

// Drops the records of `entries` (cleanup deleted them). Missing records are fine.
void forget_use(const std::filesystem::path& cache_root, const std::vector<EntryName>& entries);

}  // namespace neuron_cache::local
