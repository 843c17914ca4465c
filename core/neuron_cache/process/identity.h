// Which process on which machine: enough to tell, later and from another process, that a process
// has ended. A compile lease carries its holder's identity so that a rerun on the same machine
// takes back at once a lease whose holder was killed, instead of waiting for it to expire.
#pragma once

#include <string>
#include <string_view>

namespace neuron_cache::process {

// This boot's id (/proc/sys/kernel/random/boot_id), or "unknown".
const std::string& boot_id();

// "<boot id> <pid namespace> <pid> <start time in clock ticks>" of process `pid` of this pid
// namespace; empty when /proc does not tell (then no other process can judge it ended).
std::string identity_of(long pid);
// identity_of() this process, read once.
const std::string& this_process();

// Whether the process `identity` (this_process() of some process, read back from a store, so
// hostile) has ended: true only when it names this boot and this pid namespace and its pid is
// gone or now belongs to a process started at another time. Another machine's, another
// container's or a malformed identity is never judged ended.
bool ended(std::string_view identity);

}  // namespace neuron_cache::process
