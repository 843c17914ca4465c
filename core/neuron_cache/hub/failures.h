// What a failed Hub answer means for the user: an error message that says what failed, why (the
// Hub's own error code and message) and what to do. Retrying is net/retry.h's.
#pragma once

#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/net/http.h"

namespace neuron_cache::hub {

// An Error describing a failed Hub answer: what failed (`what`, e.g. "listing files of org/repo"),
// why (status, X-Error-Code, X-Error-Message or the body's "error"), and what to do.
Error hub_error(const net::HttpResponse& response, const std::string& what,
                const std::string& repo);

// The server's own explanation: X-Error-Message, else "error"/"message" of a JSON body, escaped
// with printable() for our messages.
std::string server_message(const net::HttpResponse& response);

}  // namespace neuron_cache::hub
