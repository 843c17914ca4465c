#include "traffic.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace neuron_cache::hub_server {

using nlohmann::json;

void AccessLog::add(uint64_t sequence, json entry) {
  std::lock_guard lock(mutex_);
  entries_[sequence] = std::move(entry);
}

json AccessLog::entries() const {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (const auto& [sequence, entry] : entries_) out.push_back(entry);
  return out;
}

void AccessLog::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

std::string Fault::name() const {
  switch (action) {
    case FaultAction::Status:
      return "status";
    case FaultAction::DropAfter:
      return "drop_after";
    case FaultAction::Corrupt:
      return "corrupt";
    case FaultAction::CorruptUpload:
      return "corrupt_upload";
    case FaultAction::Trickle:
      return "trickle";
    case FaultAction::IgnoreRange:
      return "ignore_range";
    case FaultAction::Redirect:
      return "redirect";
    case FaultAction::Delay:
      return "delay";
    case FaultAction::Hang:
      return "hang";
  }
  return "";
}

namespace {

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

uint64_t non_negative(const json& rule, const char* key, const std::string& where) {
  if (!rule.contains(key) || !rule[key].is_number_integer() || rule[key].get<int64_t>() < 0) {
    throw std::invalid_argument(where + ": \"" + key + "\" must be a non-negative integer");
  }
  return rule[key].get<uint64_t>();
}

std::optional<std::string> optional_string(const json& object, const char* key,
                                           const std::string& where) {
  if (!object.contains(key)) return std::nullopt;
  if (!object[key].is_string()) {
    throw std::invalid_argument(where + ": \"" + key + "\" must be a string");
  }
  return object[key].get<std::string>();
}

}  // namespace

FaultTable::Rule FaultTable::parse(const json& rule, size_t index) {
  std::string where = "rule " + std::to_string(index);
  if (!rule.is_object()) throw std::invalid_argument(where + " must be an object");
  Rule parsed;
  parsed.source = rule;
  if (rule.contains("match")) {
    const json& match = rule["match"];
    if (!match.is_object()) throw std::invalid_argument(where + ": \"match\" must be an object");
    parsed.method = optional_string(match, "method", where + ".match");
    if (parsed.method) parsed.method = upper(*parsed.method);
    parsed.path_contains = optional_string(match, "path_contains", where + ".match");
    parsed.listener = optional_string(match, "listener", where + ".match");
    if (parsed.listener && *parsed.listener != "hub" && *parsed.listener != "cdn") {
      throw std::invalid_argument(where + ".match: \"listener\" must be \"hub\" or \"cdn\"");
    }
  }
  if (rule.contains("count")) {
    if (!rule["count"].is_number_integer()) {
      throw std::invalid_argument(where + ": \"count\" must be an integer (negative: unlimited)");
    }
    parsed.remaining = rule["count"].get<int64_t>();
  }
  std::string action = optional_string(rule, "action", where).value_or("");
  Fault& fault = parsed.fault;
  if (action == "status") {
    fault.action = FaultAction::Status;
    fault.status = static_cast<int>(non_negative(rule, "status", where));
    if (fault.status < 100 || fault.status > 599) {
      throw std::invalid_argument(where + ": \"status\" must be an HTTP status (100-599)");
    }
    if (rule.contains("retry_after")) {
      fault.retry_after = static_cast<int>(non_negative(rule, "retry_after", where));
    }
    fault.error_code = optional_string(rule, "x_error_code", where).value_or("");
    fault.message = optional_string(rule, "message", where)
                        .value_or("Fault injected by the test Hub server (status " +
                                  std::to_string(fault.status) + ")");
    if (rule.contains("headers")) {
      if (!rule["headers"].is_object()) {
        throw std::invalid_argument(where + ": \"headers\" must be an object of strings");
      }
      fault.headers = rule["headers"];
    }
    if (rule.contains("body")) fault.body = rule["body"];
  } else if (action == "redirect") {
    fault.action = FaultAction::Redirect;
    fault.status =
        rule.contains("status") ? static_cast<int>(non_negative(rule, "status", where)) : 302;
    if (fault.status < 300 || fault.status > 399) {
      throw std::invalid_argument(where + ": \"status\" of a redirect must be 3xx");
    }
    fault.message = "Redirect injected by the test Hub server";
    fault.redirect_to = optional_string(rule, "to", where).value_or("");
    if (fault.redirect_to != "hub" && fault.redirect_to != "cdn") {
      throw std::invalid_argument(where + ": \"to\" must be \"hub\" or \"cdn\"");
    }
  } else if (action == "drop_after") {
    fault.action = FaultAction::DropAfter;
    fault.bytes = non_negative(rule, "bytes", where);
  } else if (action == "corrupt") {
    fault.action = FaultAction::Corrupt;
    fault.offset = rule.contains("offset") ? non_negative(rule, "offset", where) : 0;
  } else if (action == "corrupt_upload") {
    fault.action = FaultAction::CorruptUpload;
    fault.offset = rule.contains("offset") ? non_negative(rule, "offset", where) : 0;
  } else if (action == "trickle") {
    fault.action = FaultAction::Trickle;
    fault.bytes_per_second = non_negative(rule, "bytes_per_second", where);
    if (fault.bytes_per_second == 0) {
      throw std::invalid_argument(where + ": \"bytes_per_second\" must be at least 1");
    }
  } else if (action == "ignore_range") {
    fault.action = FaultAction::IgnoreRange;
  } else if (action == "delay") {
    fault.action = FaultAction::Delay;
    fault.ms = non_negative(rule, "ms", where);
    if (rule.contains("apply_first")) {
      if (!rule["apply_first"].is_boolean()) {
        throw std::invalid_argument(where + ": \"apply_first\" must be true or false");
      }
      fault.apply_first = rule["apply_first"].get<bool>();
    }
  } else if (action == "hang") {
    fault.action = FaultAction::Hang;
  } else {
    throw std::invalid_argument(where +
                                ": \"action\" must be \"status\", \"redirect\", \"drop_after\", "
                                "\"corrupt\", \"trickle\", \"ignore_range\", \"delay\" or "
                                "\"hang\"");
  }
  return parsed;
}

void FaultTable::set(const json& rules) {
  std::vector<Rule> parsed;
  if (rules.is_object()) {
    parsed.push_back(parse(rules, 0));
  } else if (rules.is_array()) {
    for (size_t i = 0; i < rules.size(); ++i) parsed.push_back(parse(rules[i], i));
  } else {
    throw std::invalid_argument("the body must be a JSON list of fault rules (or one rule)");
  }
  std::lock_guard lock(mutex_);
  for (auto& rule : parsed) rule.fault.rule_id = next_rule_id_++;
  rules_ = std::move(parsed);
}

void FaultTable::give_back(const Fault& fault) {
  std::lock_guard lock(mutex_);
  for (auto& rule : rules_) {
    if (rule.fault.rule_id == fault.rule_id && rule.remaining >= 0) ++rule.remaining;
  }
}

bool Fault::acts_on_body() const {
  return action == FaultAction::DropAfter || action == FaultAction::Corrupt ||
         action == FaultAction::Trickle || action == FaultAction::IgnoreRange;
}

void FaultTable::clear() {
  std::lock_guard lock(mutex_);
  rules_.clear();
}

json FaultTable::describe() const {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (const auto& rule : rules_) {
    json item = rule.source;
    item["remaining"] = rule.remaining;
    out.push_back(item);
  }
  return out;
}

std::optional<Fault> FaultTable::take(const std::string& method, const std::string& raw_path,
                                      const std::string& decoded_path,
                                      const std::string& listener) {
  std::lock_guard lock(mutex_);
  for (auto& rule : rules_) {
    if (rule.remaining == 0) continue;
    if (rule.method && *rule.method != method) continue;
    if (rule.listener && *rule.listener != listener) continue;
    if (rule.path_contains && raw_path.find(*rule.path_contains) == std::string::npos &&
        decoded_path.find(*rule.path_contains) == std::string::npos) {
      continue;
    }
    if (rule.remaining > 0) --rule.remaining;
    return rule.fault;
  }
  return std::nullopt;
}

}  // namespace neuron_cache::hub_server
