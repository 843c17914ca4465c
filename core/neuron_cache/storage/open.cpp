#include "neuron_cache/storage/open.h"

#include "neuron_cache/storage/hub_store.h"

namespace neuron_cache::storage {
std::unique_ptr<Store> open_store(const std::string& name, const std::string& what,
                                  const Settings& settings, hub::HubClient& hub) {
  (void)settings;
  store_name::StoreName parsed = store_name::parse_store_name(name, what);
  switch (parsed.kind) {
    case store_name::StoreKind::Hub:
      return std::make_unique<HubStore>(hub, parsed.hub_repo);
    case store_name::StoreKind::S3:
    case store_name::StoreKind::Folder:
      break;
  }
  throw input_error("\"" + name + "\": this store kind is not built into this neuron-cache");
}

std::function<std::unique_ptr<Store>(const Settings&)> store_opener(hub::HubClient& hub) {
  return [&hub](const Settings& settings) {
    return open_store(settings.cache_repo.value,
                      "the cache repo from " + settings.cache_repo.origin, settings, hub);
  };
}

}  // namespace neuron_cache::storage
