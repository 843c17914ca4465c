#include "neuron_cache/hub/failures.h"

#include <nlohmann/json.hpp>

#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::hub {
namespace {

std::string advice(long status, const std::string& code, const std::string& repo) {
  // Without a repo the request went to LFS storage (S3 part URLs, a multipart completion): its
  // 404 is about an upload, not a repo.
  if (repo.empty() && status == 404) {
    return "the upload is gone from LFS storage (it may have completed, or expired): push again";
  }
  if (code == "RepoNotFound" || (status == 401 && !repo.empty()) ||
      (status == 404 && code.empty())) {
    return "repo " + repo +
           " does not exist or you have no access: check the name and run "
           "`neuron-cache whoami`";
  }
  if (code == "RevisionNotFound") return "the revision does not exist in " + repo;
  if (code == "EntryNotFound") return "the file or folder does not exist in " + repo;
  if (code == "GatedRepo") return "accept the terms of " + repo + " on the Hub first";
  if (status == 401)
    return "the token is missing or invalid: set HF_TOKEN and run `neuron-cache whoami`";
  if (status == 403) {
    return "the token is read-only or lacks write access to " + repo +
           ": use a token with write access (HF_TOKEN)";
  }
  if (status == 409) return "it already exists";
  if (status == 412) return "the repo changed meanwhile: run the command again";
  if (status == 413) return "the request is too large for the Hub";
  if (status == 429) return "the Hub rate-limited this client: wait a few minutes and retry";
  if (status >= 500) return "the Hub is failing: retry later";
  if (status == 0) return "check the network and HF_ENDPOINT";
  if (status >= 300 && status < 400) {
    return "check that HF_ENDPOINT is the Hub itself, not a proxy or mirror that redirects";
  }
  return "";
}

}  // namespace

std::string server_message(const net::HttpResponse& response) {
  // Escaped here, where the server's words enter our messages: a newline in them could forge a
  // line of ours, an ESC drive the terminal.
  if (auto message = response.headers.get("X-Error-Message"))
    return printable(*message, kPrintableMessage);
  auto body = pyjson::parse_or_nothing(response.body, pyjson::kApiAnswer).value_or(nullptr);
  if (body.is_object()) {
    for (const char* key : {"error", "message"}) {
      if (body.contains(key) && body[key].is_string())
        return printable(body[key].get<std::string>(), kPrintableMessage);
    }
  }
  return "";
}

Error hub_error(const net::HttpResponse& response, const std::string& what,
                const std::string& repo) {
  std::string code = response.headers.get("X-Error-Code").value_or("");
  std::string why = response.status == 0 ? "no answer (" + response.error + ")"
                                         : "HTTP " + std::to_string(response.status);
  if (!code.empty()) why += " " + printable(code);
  std::string message = server_message(response);
  if (!message.empty()) why += ": " + message;
  if (response.status >= 300 && response.status < 400 && !response.error.empty()) {
    why += " " + response.error;
  }
  std::string text = what + " failed: " + why;
  std::string todo = advice(response.status, code, repo);
  if (!todo.empty()) text += "; " + todo;
  return operational_error(text);
}

}  // namespace neuron_cache::hub
