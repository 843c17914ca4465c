// The publication loop every writer of a cache store shares (push, synchronize): read the head,
// prepare the commit against it, and start again when another writer got in between.
#pragma once

#include <functional>
#include <string>

#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::remote {

// Calls `attempt` with the current head of `store` until it returns without a
// CommitConflict, waiting between tries as optimum-neuron does (net::backoff). `attempts`
// counts the tries. After `conflicts.max_attempts` conflicts it throws an operational Error:
// "<what> failed after N attempts due to concurrent commits to <repo>: run it again ...".
void commit_on_head(storage::Store& store, const net::RetryPolicy& conflicts,
                    const std::string& what, int& attempts,
                    const std::function<void(const std::string& head)>& attempt);

}  // namespace neuron_cache::remote
