#include "cli/context.h"

#include "format/hub_names.h"

namespace neuron_cache::cli {

hub::RetryPolicy Context::retry_policy(int max_attempts) const {
  hub::RetryPolicy policy;
  policy.max_attempts = max_attempts;
  if (auto base = env_.get("NEURON_CACHE_RETRY_BASE_MS")) {
    try {
      policy.base = std::chrono::milliseconds(std::stol(*base));
      policy.cap = policy.base * 30;
    } catch (const std::exception&) {
      throw input_error("NEURON_CACHE_RETRY_BASE_MS must be a number of milliseconds");
    }
  }
  return policy;
}

std::chrono::milliseconds Context::hub_timeout() const {
  auto value = env_.get("NEURON_CACHE_HUB_TIMEOUT_MS");
  if (!value) return hub::ClientOptions::kDefaultHubTimeout;
  try {
    size_t used = 0;
    long ms = std::stol(*value, &used);
    if (used == value->size() && ms > 0) return std::chrono::milliseconds(ms);
  } catch (const std::exception&) {
    // reported below
  }
  throw input_error(
      "NEURON_CACHE_HUB_TIMEOUT_MS must be a positive number of milliseconds (got \"" + *value +
      "\")");
}

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
    hub::ClientOptions options = hub::HubClient::options_from(settings());
    options.retry = retry_policy(6);
    options.hub_timeout = hub_timeout();
    client_ = std::make_unique<hub::HubClient>(options);
  }
  return *client_;
}

}  // namespace neuron_cache::cli
