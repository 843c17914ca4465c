#include "neuron_cache/remote/commit_on_head.h"

#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::remote {

void commit_on_head(storage::Store& store, const net::RetryPolicy& conflicts,
                    const std::string& what, int& attempts,
                    const std::function<void(const std::string& head)>& attempt) {
  while (true) {
    ++attempts;
    try {
      attempt(store.head());
      return;
    } catch (const CommitConflict&) {
      if (attempts >= conflicts.max_attempts) {
        throw operational_error(what + " failed after " + std::to_string(attempts) +
                                " attempts due to concurrent commits to " + store.name() +
                                ": run it again when the other uploads are done");
      }
      std::this_thread::sleep_for(net::backoff(attempts, conflicts));
    }
  }
}

}  // namespace neuron_cache::remote
