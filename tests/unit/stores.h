// Stores for tests that drive the remote layer directly.
#pragma once

#include <memory>
#include <string>

#include "neuron_cache/storage/hub_store.h"

namespace neuron_cache::testing {

// A Hub store of `repo` through `client`, for one call: transfer::push(*hub_store(c, r), ...).
inline std::unique_ptr<storage::HubStore> hub_store(hub::HubClient& client,
                                                    const std::string& repo) {
  return std::make_unique<storage::HubStore>(client, repo);
}

}  // namespace neuron_cache::testing
