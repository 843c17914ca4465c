#include "cli/context.h"

#include "format/hub_names.h"

namespace neuron_cache::cli {

std::string Context::hub_repo(const std::optional<std::string>& given) {
  const Settings& s = settings();
  std::string repo = given.value_or(s.cache_repo.value);
  if (repo.empty()) throw input_error("no cache repo: pass --repo or run `neuron-cache set REPO`");
  hub_names::require_repo_id(repo, given ? "--repo" : "the cache repo from " + s.cache_repo.origin,
                             "check the name");
  return repo;
}

hub::HubClient& Context::client() {
  if (!client_) {
    client_ = std::make_unique<hub::HubClient>(hub::HubClient::options_from(settings()));
  }
  return *client_;
}

}  // namespace neuron_cache::cli
