#include "neuron_cache/storage/open.h"

#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/folder_store.h"
#include "neuron_cache/storage/hub_store.h"
#include "neuron_cache/storage/s3_store.h"

namespace neuron_cache::storage {
std::unique_ptr<Store> open_store(const std::string& name, const std::string& what,
                                  const config::Settings& settings, hub::HubClient& hub) {
  store_name::StoreName parsed = store_name::parse_store_name(name, what);
  switch (parsed.kind) {
    case store_name::StoreKind::Hub:
      return std::make_unique<HubStore>(hub, parsed.hub_repo);
    case store_name::StoreKind::S3:
      return S3Store::open(name, settings);
    case store_name::StoreKind::Folder:
      return std::make_unique<FolderStore>(parsed.folder, FolderStore::options_from(settings));
  }
  throw input_error(what + " \"" + name + "\" names no store kind this tool knows");
}

std::function<std::unique_ptr<Store>(const config::Settings&)> store_opener(hub::HubClient& hub) {
  return [&hub](const config::Settings& settings) {
    return open_store(settings.cache_repo.value,
                      "the cache repo from " + settings.cache_repo.origin, settings, hub);
  };
}

}  // namespace neuron_cache::storage
