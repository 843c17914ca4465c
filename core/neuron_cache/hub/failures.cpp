#include "neuron_cache/hub/failures.h"

#include <nlohmann/json.hpp>

#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::hub {
namespace {

bool is_repo_missing(long status, const std::string& code) {
  return code == "RepoNotFound" || (status == 404 && code.empty());
}

// A token the Hub refused (401 without RepoNotFound): invalid, expired or revoked.
std::string refused_token(Audience audience) {
  std::string text = "the Hub refused the token (invalid, expired or revoked): " +
                     give_token(audience, "a valid token");
  if (audience == Audience::CommandLine) text += ", and check it with `neuron-cache whoami`";
  return text;
}

// The repo's namespace (`org` of org/name) is not one the token's user can write to.
std::optional<std::string> foreign_namespace(const std::string& repo,
                                             const AdviceContext& context) {
  if (!context.namespaces || context.namespaces->empty()) return std::nullopt;
  std::string owner = repo.substr(0, repo.find('/'));
  for (const auto& name : *context.namespaces) {
    if (name == owner) return std::nullopt;
  }
  std::string list;
  // The names are the Hub's answer to whoami: quoted through printable().
  for (const auto& name : *context.namespaces) list += (list.empty() ? "" : ", ") + printable(name);
  return "\"" + owner + "\" is not one of the token's namespaces (" + list + ")";
}

// A 404 (or RepoNotFound) that came with a token: the repo is missing, or the token's user
// cannot see it.
std::string missing_repo(const std::string& repo, const AdviceContext& context) {
  std::string text = "repo " + repo + " does not exist or the token cannot read it: check the name";
  if (auto foreign = foreign_namespace(repo, context)) text += "; " + *foreign;
  if (context.audience == Audience::Action) {
    return text +
           "; a new cache repo is created once, on the Hub (private), before the first push, "
           "or give the action's `token` input a token that can read it";
  }
  return text + "; create it with `neuron-cache create -n " + repo +
         "` (`neuron-cache whoami` lists the token's namespaces)";
}

std::string advice(long status, const std::string& code, const std::string& repo,
                   const AdviceContext& context) {
  // Without a repo the request went to LFS storage (S3 part URLs, a multipart completion): its
  // 404 is about an upload, not a repo.
  if (repo.empty() && status == 404) {
    return "the upload is gone from LFS storage (it may have completed, or expired): push again";
  }
  // Without a token the Hub answers 401 for a private repo and a missing one alike.
  if (!context.token_sent && (status == 401 || is_repo_missing(status, code)))
    return no_token(context.audience);
  if (status == 401 && code != "RepoNotFound") return refused_token(context.audience);
  if (is_repo_missing(status, code) || status == 401) return missing_repo(repo, context);
  if (code == "RevisionNotFound") return "the revision does not exist in " + repo;
  if (code == "EntryNotFound") return "the file or folder does not exist in " + repo;
  if (code == "GatedRepo") return "accept the terms of " + repo + " on the Hub first";
  if (status == 403) {
    return "the token is read-only or lacks write access to " + repo + ": " +
           give_token(context.audience, "a token with write access");
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

Audience audience_named(const std::string& front_end) {
  if (front_end == "cmake") return Audience::CMake;
  if (front_end == "bazel") return Audience::Bazel;
  return Audience::CommandLine;
}

std::string give_token(Audience audience, const std::string& token) {
  switch (audience) {
    case Audience::Action:
      return "give the action's `token` input " + token + " (`token: ${{ secrets.HF_TOKEN }}`)";
    case Audience::CMake:
      return "set HF_TOKEN (or HF_TOKEN_PATH, a token file) to " + token +
             " in the environment that runs the CMake configure";
    case Audience::Bazel:
      return "give Bazel " + token +
             " as a token file: --repo_env=HF_TOKEN_PATH=/path/to/token (HF_TOKEN in Bazel's "
             "environment works too, but Bazel logs its environment)";
    case Audience::CommandLine:
      break;
  }
  return "set HF_TOKEN (or HF_TOKEN_PATH, a token file) to " + token;
}

std::string no_token(Audience audience) {
  return "no Hugging Face token: a private repo cannot be read and a push needs a write token; " +
         give_token(audience, "a token") + " (a public repo needs none to be read)";
}

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

namespace {

// An element of an S3 error document (what LFS storage answers a PUT with): "Code", "Message";
// "" when there is none.
std::string s3_error_field(std::string_view body, const std::string& name) {
  body = body.substr(0, 4096);
  std::string open = "<" + name + ">", close = "</" + name + ">";
  size_t start = body.find(open);
  if (start == std::string_view::npos) return "";
  start += open.size();
  size_t end = body.find(close, start);
  return end == std::string_view::npos || end - start > 512
             ? ""
             : printable(std::string(body.substr(start, end - start)), kPrintableMessage);
}

// The code of a failed answer: the Hub's X-Error-Code, else storage's S3 <Code>.
std::string error_code(const net::HttpResponse& response) {
  if (auto code = response.headers.get("X-Error-Code")) return *code;
  return s3_error_field(response.body, "Code");
}

}  // namespace

bool content_refused(const net::HttpResponse& response) {
  if (response.status != 400 && response.status != 422) return false;
  std::string code = error_code(response);
  for (const char* known : {"BadDigest", "IncompleteBody", "InvalidDigest",
                            "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch"}) {
    if (code == known) return true;
  }
  std::string message = server_message(response);
  for (char& ch : message) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return message.find("does not match oid") != std::string::npos;
}

Error hub_error(const net::HttpResponse& response, const std::string& what, const std::string& repo,
                const AdviceContext& context) {
  std::string code = error_code(response);
  std::string why = response.status == 0 ? "no answer (" + response.error + ")"
                                         : "HTTP " + std::to_string(response.status);
  if (!code.empty()) why += " " + printable(code);
  std::string message = server_message(response);
  if (message.empty()) message = s3_error_field(response.body, "Message");
  if (!message.empty()) why += ": " + message;
  if (response.status >= 300 && response.status < 400 && !response.error.empty()) {
    why += " " + response.error;
  }
  std::string text = what + " failed: " + why;
  std::string todo = advice(response.status, code, repo, context);
  if (!todo.empty()) text += "; " + todo;
  return operational_error(text);
}

}  // namespace neuron_cache::hub
