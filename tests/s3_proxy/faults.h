// The fault rules of s3-proxy (format in tests/s3_proxy/README.md): which request (method, path
// regex, query regex, which occurrences) gets which fault.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace neuron_cache::s3_proxy {

enum class FaultAction { Status, Drop, Lose, Short, Cut, Corrupt, CorruptUpload, Delay, Hang };

struct Fault {
  FaultAction action = FaultAction::Status;
  // Status: the answer; `body` replaces S3's <Error> XML built from `code` and `message`.
  int status = 500;
  std::string code;
  std::string message;
  std::optional<std::string> body;
  nlohmann::json headers = nlohmann::json::object();
  // Short: body bytes sent before the connection is closed (the full Content-Length is
  // announced); Cut: body bytes announced and sent (a well-framed answer cut short); nothing:
  // half of the body.
  std::optional<uint64_t> bytes;
  // Corrupt (the answer's body), CorruptUpload (the request's, before it is forwarded): the
  // first body byte XOR-ed with 0xFF, and how many from there.
  uint64_t offset = 0;
  uint64_t length = 1;
  // Delay: how long the request waits before it is forwarded.
  uint64_t ms = 0;

  std::string name() const;
};

class FaultTable {
 public:
  // Replaces the rules (a JSON list or one rule); throws std::invalid_argument naming the bad
  // field.
  void set(const nlohmann::json& rules);
  void clear();
  nlohmann::json describe() const;
  // The fault of the first rule this request matches and that applies to this occurrence.
  std::optional<Fault> take(const std::string& method, const std::string& path,
                            const std::string& query);

 private:
  struct Rule {
    std::optional<std::string> method;
    std::optional<std::regex> path;
    std::optional<std::regex> query;
    int64_t skip = 0;         // matching requests let through before the rule applies
    int64_t apply_first = 1;  // matching requests it applies to after that; < 0: every one
    int64_t matched = 0;
    int64_t applied = 0;
    Fault fault;
    nlohmann::json source;
  };
  static Rule parse(const nlohmann::json& rule, size_t index);

  mutable std::mutex mutex_;
  std::vector<Rule> rules_;
};

// S3's error document: <Error><Code>..</Code><Message>..</Message><Resource>..</Resource>...
std::string s3_error_xml(const std::string& code, const std::string& message,
                         const std::string& resource);
// S3's code for a status the rule gave no code for (503: SlowDown, 500: InternalError, ...).
std::string default_code(int status);

}  // namespace neuron_cache::s3_proxy
