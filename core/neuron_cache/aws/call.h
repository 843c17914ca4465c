// The one way the credential sources talk HTTP: a fresh engine per call (a source is asked once
// an hour at most), no Hub token, no redirect to another origin, answers of at most 64 KiB.
#pragma once

#include <chrono>
#include <string>

#include "neuron_cache/net/http.h"

namespace neuron_cache::aws {

// Credential answers are about 1.5 KiB (IMDS, the portal) to 3 KiB (STS).
inline constexpr uint64_t kMaxCredentialAnswer = 64u << 10;

// `request` sent with `timeout` for the connection and the first byte, retried `attempts` times
// in all on transient failures. The answer is returned whatever its status.
net::HttpResponse call(net::HttpRequest request, std::chrono::milliseconds timeout, int attempts);

// "HTTP 403" or "no answer (Connection refused)": what an answer was, for messages.
std::string outcome(const net::HttpResponse& response);

}  // namespace neuron_cache::aws
