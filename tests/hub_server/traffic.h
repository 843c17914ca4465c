// Test hooks of the Hub server: the access log tests read through GET /_admin/log, and the fault
// rules they set through POST /_admin/faults (format in tests/README.md).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::hub_server {

// Entries are ordered by request arrival (`sequence`), not by when they were completed.
class AccessLog {
 public:
  void add(uint64_t sequence, nlohmann::json entry);
  nlohmann::json entries() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, nlohmann::json> entries_;
};

enum class FaultAction {
  Status,
  DropAfter,
  Corrupt,
  CorruptUpload,
  Trickle,
  IgnoreRange,
  Redirect,
  Delay,
  Hang
};

struct Fault {
  FaultAction action = FaultAction::Status;
  // Status
  int status = 500;
  std::optional<int> retry_after;
  std::string error_code;
  std::string message;
  nlohmann::json headers = nlohmann::json::object();
  nlohmann::json body;  // Status: sent instead of {"error": message} when given
  // Redirect (with `status`, a 3xx): the listener ("hub" or "cdn") the Location points at, with
  // the same path and query: the other listener plays a foreign host.
  std::string redirect_to;
  // DropAfter: body bytes sent before the connection is closed; Corrupt: which body byte flips;
  // CorruptUpload: which byte of the request body flips on its way in.
  uint64_t bytes = 0;
  uint64_t offset = 0;
  // Trickle
  uint64_t bytes_per_second = 0;
  // Delay: how long the answer waits; with apply_first the request is handled (a commit lands)
  // before the wait, so the change is made even when the client gives up meanwhile.
  uint64_t ms = 0;
  bool apply_first = false;
  uint64_t rule_id = 0;  // which rule gave it (FaultTable::give_back)

  std::string name() const;
  // drop_after, corrupt, trickle, ignore_range: what only an answer with a body can show.
  bool acts_on_body() const;
};

class FaultTable {
 public:
  // Replaces the rules; throws std::invalid_argument with the offending field on bad input.
  void set(const nlohmann::json& rules);
  void clear();
  nlohmann::json describe() const;
  // The first rule matching this request, counted as used. `path_contains` is looked for in
  // both the raw and the percent-decoded path.
  std::optional<Fault> take(const std::string& method, const std::string& raw_path,
                            const std::string& decoded_path, const std::string& listener);
  // Counts the use of `fault` back to its rule (when the rules were not replaced since): an
  // answer that could not show it leaves it for the next matching request.
  void give_back(const Fault& fault);

 private:
  struct Rule {
    std::optional<std::string> method;
    std::optional<std::string> path_contains;
    std::optional<std::string> listener;
    int64_t remaining = 1;  // < 0: until cleared
    Fault fault;
    nlohmann::json source;
  };
  static Rule parse(const nlohmann::json& rule, size_t index);

  mutable std::mutex mutex_;
  std::vector<Rule> rules_;
  uint64_t next_rule_id_ = 1;
};

}  // namespace neuron_cache::hub_server
