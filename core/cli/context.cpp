#include "cli/context.h"

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

hub::HubClient& Context::client() {
  if (!client_) {
    hub::ClientOptions options = hub::HubClient::options_from(settings());
    options.retry = retry_policy(6);
    client_ = std::make_unique<hub::HubClient>(options);
  }
  return *client_;
}

}  // namespace neuron_cache::cli
