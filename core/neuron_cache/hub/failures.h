// What a failed Hub answer means for the user: an error message that says what failed, why (the
// Hub's own error code and message) and what to do. Retrying is net/retry.h's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/net/http.h"

namespace neuron_cache::hub {

// Who reads the advice, and so which remedies it may name: a command-line user has
// `neuron-cache whoami` and `create`; a CMake configure and a Bazel repository rule get a token
// through their own environment (NEURON_CACHE_FRONT_END, set by the CMake module and the Bazel
// rule, says which); a GitHub Action user has the action's inputs and the workflow's secrets,
// and no neuron-cache command.
enum class Audience { CommandLine, CMake, Bazel, Action };
// The audience NEURON_CACHE_FRONT_END names ("cmake", "bazel"); anything else: CommandLine.
Audience audience_named(const std::string& front_end);
// How `audience` gives the tool `token` ("a token with write access"): the remedy of every
// message about a missing, refused or read-only token.
std::string give_token(Audience audience, const std::string& token);

// What the advice about a failed answer depends on besides the answer (HubClient::advice()).
struct AdviceContext {
  bool token_sent = true;
  Audience audience = Audience::CommandLine;
  // The namespaces the token's user can write (its name and orgs), once whoami was asked.
  std::optional<std::vector<std::string>> namespaces;
};

// An Error describing a failed Hub answer: what failed (`what`, e.g. "listing files of org/repo"),
// why (status, X-Error-Code, X-Error-Message or the body's "error"), and what to do.
Error hub_error(const net::HttpResponse& response, const std::string& what, const std::string& repo,
                const AdviceContext& context = {});

// Whether storage or the Hub refused an upload's bytes as not those it was announced with (S3's
// BadDigest, IncompleteBody and checksum codes; the Hub's "Content does not match oid/size"). The
// tool hashed those bytes itself, so they changed or were lost on their way.
bool content_refused(const net::HttpResponse& response);

// Why nothing private can be read and nothing pushed when no token is set, in `audience`'s words.
std::string no_token(Audience audience);

// The server's own explanation: X-Error-Message, else "error"/"message" of a JSON body, escaped
// with printable() for our messages.
std::string server_message(const net::HttpResponse& response);

}  // namespace neuron_cache::hub
