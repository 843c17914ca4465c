#include "faults.h"

#include <algorithm>
#include <stdexcept>

namespace neuron_cache::s3_proxy {
namespace {

using nlohmann::json;

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::toupper);
  return text;
}

std::optional<std::string> optional_string(const json& object, const char* key,
                                           const std::string& where) {
  if (!object.contains(key)) return std::nullopt;
  if (!object[key].is_string()) throw std::invalid_argument(where + "." + key + ": not a string");
  return object[key].get<std::string>();
}

uint64_t optional_count(const json& object, const char* key, uint64_t fallback,
                        const std::string& where) {
  if (!object.contains(key)) return fallback;
  if (!object[key].is_number_unsigned()) {
    throw std::invalid_argument(where + "." + key + ": not a number >= 0");
  }
  return object[key].get<uint64_t>();
}

std::regex compile(const std::string& pattern, const std::string& where) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    throw std::invalid_argument(where + ": bad regex \"" + pattern + "\": " + error.what());
  }
}

FaultAction parse_action(const std::string& name, const std::string& where) {
  if (name == "status") return FaultAction::Status;
  if (name == "drop") return FaultAction::Drop;
  if (name == "lose") return FaultAction::Lose;
  if (name == "short") return FaultAction::Short;
  if (name == "cut") return FaultAction::Cut;
  if (name == "corrupt") return FaultAction::Corrupt;
  if (name == "corrupt_upload") return FaultAction::CorruptUpload;
  if (name == "delay") return FaultAction::Delay;
  if (name == "hang") return FaultAction::Hang;
  throw std::invalid_argument(
      where + ".action: \"" + name +
      "\" is not one of status, drop, lose, short, cut, corrupt, corrupt_upload, delay, "
      "hang");
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string Fault::name() const {
  switch (action) {
    case FaultAction::Status:
      return "status";
    case FaultAction::Drop:
      return "drop";
    case FaultAction::Lose:
      return "lose";
    case FaultAction::Short:
      return "short";
    case FaultAction::Cut:
      return "cut";
    case FaultAction::Corrupt:
      return "corrupt";
    case FaultAction::CorruptUpload:
      return "corrupt_upload";
    case FaultAction::Delay:
      return "delay";
    case FaultAction::Hang:
      return "hang";
  }
  return "unknown";
}

std::string default_code(int status) {
  switch (status) {
    case 400:
      return "InvalidRequest";
    case 403:
      return "AccessDenied";
    case 404:
      return "NoSuchKey";
    case 409:
      return "OperationAborted";
    case 412:
      return "PreconditionFailed";
    case 500:
      return "InternalError";
    case 503:
      return "SlowDown";
    default:
      return "InternalError";
  }
}

std::string s3_error_xml(const std::string& code, const std::string& message,
                         const std::string& resource) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + xml_escape(code) +
         "</Code><Message>" + xml_escape(message) + "</Message><Resource>" + xml_escape(resource) +
         "</Resource><RequestId>s3-proxy</RequestId></Error>";
}

FaultTable::Rule FaultTable::parse(const json& rule, size_t index) {
  std::string where = "rule[" + std::to_string(index) + "]";
  if (!rule.is_object()) throw std::invalid_argument(where + ": not an object");
  Rule parsed;
  parsed.source = rule;
  if (rule.contains("match")) {
    const json& match = rule["match"];
    if (!match.is_object()) throw std::invalid_argument(where + ".match: not an object");
    parsed.method = optional_string(match, "method", where + ".match");
    if (parsed.method) parsed.method = upper(*parsed.method);
    if (auto path = optional_string(match, "path", where + ".match")) {
      parsed.path = compile(*path, where + ".match.path");
    }
    if (auto query = optional_string(match, "query", where + ".match")) {
      parsed.query = compile(*query, where + ".match.query");
    }
  }
  parsed.skip = static_cast<int64_t>(optional_count(rule, "skip", 0, where));
  if (rule.contains("apply_first")) {
    if (!rule["apply_first"].is_number_integer()) {
      throw std::invalid_argument(where + ".apply_first: not an integer");
    }
    parsed.apply_first = rule["apply_first"].get<int64_t>();
  }
  auto action = optional_string(rule, "action", where);
  if (!action) throw std::invalid_argument(where + ".action: missing");
  Fault& fault = parsed.fault;
  fault.action = parse_action(*action, where);
  fault.status = static_cast<int>(optional_count(rule, "status", 500, where));
  fault.code = optional_string(rule, "code", where).value_or(default_code(fault.status));
  fault.message = optional_string(rule, "message", where).value_or("fault injected by s3-proxy");
  fault.body = optional_string(rule, "body", where);
  if (rule.contains("headers")) {
    if (!rule["headers"].is_object())
      throw std::invalid_argument(where + ".headers: not an object");
    fault.headers = rule["headers"];
  }
  if (rule.contains("bytes")) fault.bytes = optional_count(rule, "bytes", 0, where);
  fault.offset = optional_count(rule, "offset", 0, where);
  fault.length = optional_count(rule, "length", 1, where);
  fault.ms = optional_count(rule, "ms", 0, where);
  return parsed;
}

void FaultTable::set(const json& rules) {
  std::vector<Rule> parsed;
  if (rules.is_object()) {
    parsed.push_back(parse(rules, 0));
  } else if (rules.is_array()) {
    for (size_t i = 0; i < rules.size(); ++i) parsed.push_back(parse(rules[i], i));
  } else {
    throw std::invalid_argument("the fault rules are a JSON list or one rule object");
  }
  std::lock_guard lock(mutex_);
  rules_ = std::move(parsed);
}

void FaultTable::clear() {
  std::lock_guard lock(mutex_);
  rules_.clear();
}

json FaultTable::describe() const {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (const Rule& rule : rules_) {
    json item = rule.source;
    item["matched"] = rule.matched;
    item["applied"] = rule.applied;
    out.push_back(item);
  }
  return out;
}

std::optional<Fault> FaultTable::take(const std::string& method, const std::string& path,
                                      const std::string& query) {
  std::lock_guard lock(mutex_);
  for (Rule& rule : rules_) {
    if (rule.method && *rule.method != upper(method)) continue;
    if (rule.path && !std::regex_search(path, *rule.path)) continue;
    if (rule.query && !std::regex_search(query, *rule.query)) continue;
    int64_t occurrence = rule.matched++;
    if (occurrence < rule.skip) continue;
    if (rule.apply_first >= 0 && rule.applied >= rule.apply_first) continue;
    ++rule.applied;
    return rule.fault;
  }
  return std::nullopt;
}

}  // namespace neuron_cache::s3_proxy
