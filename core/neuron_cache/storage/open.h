// The one place a store's name becomes a store (sccache's get_storage_from_config): the cache
// repo setting (--repo, the manifest's cache_repo, CUSTOM_CACHE_REPO, the saved repo) names it.
//   org/name, hf://org/name    the Hub (HubStore)
//   s3://bucket[/prefix]       S3 or an S3-compatible store (S3Store; AWS_* settings, config/aws.h)
//   file:///absolute/path      a shared folder (FolderStore)
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/format/store_name.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::hub {
class HubClient;
}

namespace neuron_cache::storage {

// Opens the store `name` names with the settings' credentials and knobs. `hub` serves Hub stores
// and outlives the store. `what` says where the name came from, for errors.
std::unique_ptr<Store> open_store(const std::string& name, const std::string& what,
                                  const config::Settings& settings, hub::HubClient& hub);

// What pipeline::Remotes::open_store wants: opens the settings' cache repo through `hub`.
std::function<std::unique_ptr<Store>(const config::Settings&)> store_opener(hub::HubClient& hub);

}  // namespace neuron_cache::storage
