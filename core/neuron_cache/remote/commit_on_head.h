// The commit loop every writer of a cache repo shares (push, synchronize): read the branch head,
// prepare the commit against it, and start again when another commit landed in between.
#pragma once

#include <functional>
#include <string>

#include "neuron_cache/hub/client.h"

namespace neuron_cache::remote {

// Calls `attempt` with the current head of `repo` until it returns without a
// hub::CommitConflict, waiting between tries as optimum-neuron does (hub::backoff). `attempts`
// counts the tries. After `conflicts.max_attempts` conflicts it throws an operational Error:
// "<what> failed after N attempts due to concurrent commits to <repo>: run it again ...".
void commit_on_head(hub::HubClient& client, const std::string& repo,
                    const hub::RetryPolicy& conflicts, const std::string& what, int& attempts,
                    const std::function<void(const std::string& head)>& attempt);

}  // namespace neuron_cache::remote
