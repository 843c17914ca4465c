// Bytes changed on their way to a store. Every writer hashes what it sends; when the store's
// answer shows it kept other bytes (the Hub's LFS storage refuses them with BadDigest, S3 answers
// another checksum or ETag), the rule is the same for every store: those bytes are sent once
// more, and kept otherwise again, the push fails with changed_in_transit_twice(). Twice rules out
// a one-off flipped bit; the advice is about the network path, since the bytes were read and
// hashed on this machine both times.
#pragma once

#include <string>

namespace neuron_cache::net {

// `what` says what the store did ("storage refused the content of x.neff (BadDigest)");
// `unchecked`, when not empty, why the store let it happen ("the server does not check the
// x-amz-checksum-sha256 it is sent"), and `server_fix` what would make it check.
inline std::string changed_in_transit_twice(const std::string& what,
                                            const std::string& unchecked = "",
                                            const std::string& server_fix = "") {
  std::string text = what +
                     " twice, though this machine read and hashed the bytes both times: "
                     "something on the network path changes them (a proxy, a faulty network "
                     "card)";
  if (!unchecked.empty()) text += ", and " + unchecked;
  text += ". Push again; if it persists, push from another network";
  if (!server_fix.empty()) text += " or " + server_fix;
  return text;
}

}  // namespace neuron_cache::net
