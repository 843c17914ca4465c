// Finding a model's digest folders in optimum-neuron's registry without its digest: when its
// model type is not in neuron-cache's transformers tables, the entries' stored configs (the dicts
// optimum-neuron hashed) are compared with its config.json, one entry per folder.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::remote {

// The most digest folders one scan compares (one download each): beyond it the rest are not
// compared, and the scan says so.
inline constexpr size_t kMaxComparedFolders = 2000;

// For each model and task with a config.json to compare (TaskArchitecture::config_json): the
// digest folders of `compiler_dir`'s registry listing whose first entry stores a config made
// from it (same task) are added to the task's digests, and to scan.matched_by_config.
void match_stored_configs(storage::Store& store, const std::string& revision,
                          const std::vector<storage::RemoteEntry>& listing,
                          const std::string& compiler_dir, ScanModels& models, RegistryScan& scan);

// Small files (registry entries) downloaded into memory, a bounded number at a time, each
// verified against its listing entry; nothing for a file that failed (`errors` says why).
std::vector<std::optional<std::string>> download_texts(
    storage::Store& store, const std::string& revision,
    const std::vector<storage::RemoteEntry>& files, std::vector<std::string>& errors);

}  // namespace neuron_cache::remote
