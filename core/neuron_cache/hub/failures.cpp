#include "neuron_cache/hub/failures.h"

#include <nlohmann/json.hpp>
#include <random>

namespace neuron_cache::hub {

RetryPolicy retry_policy(const Settings& settings, int max_attempts) {
  RetryPolicy policy;
  policy.max_attempts = max_attempts;
  if (auto base = settings.retry_base()) {
    policy.base = *base;
    policy.cap = policy.base * 30;
  }
  return policy;
}
namespace {

double jitter() {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.5, 1.5)(generator);
}

// The seconds in `RateLimit: "api";r=0;t=42` when no request is left in the window.
std::optional<long> rate_limit_reset(const HttpResponse& response) {
  auto header = response.headers.get("RateLimit");
  if (!header || header->find("r=0") == std::string::npos) return std::nullopt;
  size_t t = header->find("t=");
  if (t == std::string::npos) return std::nullopt;
  try {
    return std::stol(header->substr(t + 2));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<long> retry_after(const HttpResponse& response) {
  auto header = response.headers.get("Retry-After");
  if (!header || header->empty() || header->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;  // the HTTP-date form is not used by the Hub
  }
  // More than a day is no answer to wait for (and more digits than a long holds is none at all).
  if (header->size() > 5) return std::nullopt;
  return std::stol(*header);
}

std::string advice(long status, const std::string& code, const std::string& repo) {
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

bool is_transient(const HttpResponse& response) {
  // A Hub that could not be reached at all is not asked again in this run (HttpEngine::hub_down).
  if (response.unreachable) return false;
  long s = response.status;
  return s == 0 || s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

std::chrono::milliseconds backoff(int attempt, const RetryPolicy& policy) {
  double wait = static_cast<double>(policy.base.count());
  for (int i = 1; i < attempt && wait < policy.cap.count(); ++i) wait *= 2;
  wait = std::min(wait, static_cast<double>(policy.cap.count())) * jitter();
  return std::chrono::milliseconds(
      static_cast<long>(std::min(wait, static_cast<double>(policy.cap.count()))));
}

std::optional<std::chrono::milliseconds> retry_delay(const HttpResponse& response, int attempt,
                                                     const RetryPolicy& policy) {
  if (!is_transient(response) || attempt >= policy.max_attempts) return std::nullopt;
  if (auto reset = rate_limit_reset(response)) return std::chrono::seconds(*reset + 1);
  if (auto seconds = retry_after(response)) return std::chrono::seconds(*seconds);
  return backoff(attempt, policy);
}

std::string server_message(const HttpResponse& response) {
  if (auto message = response.headers.get("X-Error-Message")) return *message;
  auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (body.is_object()) {
    for (const char* key : {"error", "message"}) {
      if (body.contains(key) && body[key].is_string()) return body[key].get<std::string>();
    }
  }
  return "";
}

Error hub_error(const HttpResponse& response, const std::string& what, const std::string& repo) {
  std::string code = response.headers.get("X-Error-Code").value_or("");
  std::string why = response.status == 0 ? "no answer (" + response.error + ")"
                                         : "HTTP " + std::to_string(response.status);
  if (!code.empty()) why += " " + code;
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
