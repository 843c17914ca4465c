#include "runner_protocol.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::action {
namespace {

using nlohmann::json;

// Events whose payload has a `pull_request` object with the head and base repositories.
const std::set<std::string> kPullRequestEvents = {
    "pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment"};

// The value at object[k1][k2]..., or null when any step is missing or not an object: event
// payloads are read defensively.
json member(const json& object, std::initializer_list<const char*> keys) {
  const json* at = &object;
  for (const char* key : keys) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return *at;
}

std::string string_at(const json& object, const char* key) {
  json value = member(object, {key});
  return value.is_string() ? value.get<std::string>() : "";
}

ForkCheck fork_from_payload(const json& pull_request) {
  json head_repo = member(pull_request, {"head", "repo"});
  json base_repo = member(pull_request, {"base", "repo"});
  // A fork deleted after the pull request was opened leaves head.repo null.
  if (head_repo.is_null())
    return {true, "the head repository of this pull request no longer exists"};
  std::string head_name = string_at(head_repo, "full_name");
  std::string base_name = string_at(base_repo, "full_name");
  // Names first: a base repository that is itself a fork has head.repo.fork true for its own
  // branches, which are not a fork's pull requests.
  if (!head_name.empty() && !base_name.empty()) {
    if (head_name == base_name) return {false, "this pull request's branch is in " + base_name};
    return {true, "this pull request comes from the fork " + head_name};
  }
  if (member(head_repo, {"fork"}) == true)
    return {true, "the head repository of this pull request is a fork"};
  return {false, "the head repository of this pull request is not a fork"};
}

// Whether the runner could take part of `text` for a command: "::" begins one at the start of a
// line (after spaces), and the legacy "##[" anywhere in a line.
bool could_be_command(const std::string& text) {
  return text.find("::") != std::string::npos || text.find("##[") != std::string::npos;
}

}  // namespace

std::string escape_data(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    if (ch == '%') {
      out += "%25";
    } else if (ch == '\r') {
      out += "%0D";
    } else if (ch == '\n') {
      out += "%0A";
    } else {
      out += ch;
    }
  }
  return out;
}

void WorkflowCommands::mask(const std::string& secret) {
  write("::add-mask::" + escape_data(secret) + "\n");
}

void WorkflowCommands::annotation(const std::string& kind, const std::string& text) {
  write("::" + kind + " title=neuron-cache::" + escape_data(config::redact(text)) + "\n");
}

void WorkflowCommands::group(const std::string& title) {
  write("::group::" + escape_data(config::redact(title)) + "\n");
}

void WorkflowCommands::endgroup() {
  write("::endgroup::\n");
}

void WorkflowCommands::untrusted(const std::string& text) {
  std::string shown = config::redact(text);
  std::string stop = random_delimiter(shown);
  if (!shown.empty() && !shown.ends_with("\n")) shown += "\n";
  write("::stop-commands::" + stop + "\n" + shown + "::" + stop + "::\n");
}

void WorkflowCommands::line(const std::string& text) {
  if (could_be_command(text)) return untrusted(text);
  write(config::redact(text) + "\n");
}

void WorkflowCommands::write(const std::string& text) {
  out_ << text << std::flush;
}

std::string random_delimiter(const std::string& avoid) {
  for (;;) {
    // 128 bits from the kernel: a value cannot guess the delimiter that ends it.
    char token[64];
    std::snprintf(token, sizeof token, "neuron_cache_%016llx%016llx",
                  static_cast<unsigned long long>(sys::random_seed()),
                  static_cast<unsigned long long>(sys::random_seed()));
    if (avoid.find(token) == std::string::npos) return token;
  }
}

std::string output_entry(const std::string& name, const std::string& value, bool multi_line) {
  if (!multi_line && value.find_first_of("\r\n") == std::string::npos) {
    return name + "=" + value + "\n";
  }
  std::string delimiter = random_delimiter(value);
  return name + "<<" + delimiter + "\n" + value + "\n" + delimiter + "\n";
}

void append_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << config::redact(text);
  out.flush();
  if (!out) throw operational_error("cannot append to " + path + " (a file the runner gave)");
}

std::optional<ForkCheck> pull_request_fork(const std::string& event_name,
                                           const std::string& event_path) {
  if (!kPullRequestEvents.contains(event_name)) return std::nullopt;
  // Unknown means unsafe: a pull request whose origin cannot be told is treated as a fork's.
  ForkCheck unknown{true,
                    "the pull request event's payload (GITHUB_EVENT_PATH) could not be read, so it "
                    "counts as a fork's"};
  if (event_path.empty()) return unknown;
  std::ifstream in(event_path, std::ios::binary);
  if (!in) return unknown;
  json payload = json::parse(in, nullptr, false);
  if (payload.is_discarded() || !member(payload, {"pull_request"}).is_object()) return unknown;
  return fork_from_payload(payload["pull_request"]);
}

}  // namespace neuron_cache::action
