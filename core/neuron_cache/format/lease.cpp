#include "neuron_cache/format/lease.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/timestamp.h"

namespace neuron_cache::lease {
namespace {

using Json = pyjson::Json;

constexpr size_t kMaxText = 255;
constexpr pyjson::Limits kLimits{kMaxLeaseBytes, 4, 64};

bool plain_text(const std::string& text) {
  if (text.size() > kMaxText) return false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::optional<std::string> text_of(const Json& json, const char* name) {
  auto it = json.find(name);
  if (it == json.end() || !it->is_string()) return std::nullopt;
  std::string text = it->get<std::string>();
  if (!plain_text(text)) return std::nullopt;
  return text;
}

std::optional<int64_t> time_of(const Json& json, const char* name) {
  auto text = text_of(json, name);
  return text ? parse_utc_timestamp(*text) : std::nullopt;
}

std::optional<State> state_of(const std::string& name) {
  for (State state : {State::Compiling, State::Done, State::Released}) {
    if (state_name(state) == name) return state;
  }
  return std::nullopt;
}

// "5 hours", "48 hours": the bounds as damaged() names them.
std::string hours(int64_t seconds) {
  return std::to_string(seconds / 3600) + " hours";
}

// Why the expected compile time is not one a holder writes, or "".
std::string absurd_expected(double seconds) {
  if (std::isnan(seconds)) return "its expected compile time is not a number";
  if (seconds < 0) return "its expected compile time is negative";
  if (seconds > static_cast<double>(kMaxCompileSeconds))
    return "its expected compile time is beyond " + hours(kMaxCompileSeconds);
  return "";
}

// Why one of its times is before the store existed, or "".
std::string too_early(const Record& r) {
  for (auto [name, when] : {std::pair{"started", r.started}, std::pair{"heartbeat", r.heartbeat},
                            std::pair{"expires", r.expires}}) {
    if (when < kEarliestSeconds)
      return "its " + std::string(name) + " time " + time_text(when) + " is before 2020";
  }
  return "";
}

// Why its times are not those of a holder that claimed and renewed it, or "".
std::string impossible_times(const Record& r, int64_t now, std::string_view whose) {
  if (r.heartbeat > add_seconds(now, kMaxAheadSeconds))
    return "its heartbeat " + time_text(r.heartbeat) + " is in the future (" + std::string(whose) +
           ": " + time_text(now) + ")";
  if (r.started > r.heartbeat) return "it started after its last heartbeat";
  // started >= kEarliestSeconds > 0 (too_early() came first): no overflow.
  if (r.heartbeat - r.started > kMaxCompileSeconds)
    return "its compile started more than " + hours(kMaxCompileSeconds) + " before its heartbeat";
  if (r.expires > add_seconds(r.heartbeat, kMaxLifeSeconds))
    return "it expires " + time_text(r.expires) + ", more than " + hours(kMaxLifeSeconds) +
           " after its last heartbeat: no holder claims that long";
  return "";
}

}  // namespace

bool Record::live(int64_t now) const {
  return state == State::Compiling && now < expires && !damaged(*this, now);
}

int64_t Record::promised_life() const {
  // Saturated, then bounded: a damaged lease's times may be anything.
  return std::clamp(add_seconds(expires, heartbeat == std::numeric_limits<int64_t>::min()
                                             ? std::numeric_limits<int64_t>::max()
                                             : -heartbeat),
                    int64_t{0}, kMaxLifeSeconds);
}

std::optional<std::string> damaged(const Record& record, int64_t now, std::string_view whose) {
  // In this order: impossible_times() counts on too_early() having passed.
  std::string why = absurd_expected(record.expected_seconds);
  if (why.empty()) why = too_early(record);
  if (why.empty()) why = impossible_times(record, now, whose);
  if (why.empty()) return std::nullopt;
  return why;
}

int64_t add_seconds(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

double bounded_expected(double seconds) {
  if (std::isnan(seconds) || seconds <= 0) return 0;
  return std::min(seconds, static_cast<double>(kMaxCompileSeconds));
}

int64_t expected_whole_seconds(double seconds) {
  // Bounded first: converting a double beyond int64_t is undefined behaviour.
  return static_cast<int64_t>(std::ceil(bounded_expected(seconds)));
}

std::string time_text(int64_t seconds) {
  constexpr int64_t kLastOf9999 = 253'402'300'799;  // 9999-12-31T23:59:59Z
  if (seconds < 0 || seconds > kLastOf9999) return std::to_string(seconds) + " s since 1970";
  return utc_text(seconds);
}

std::string_view state_name(State state) {
  switch (state) {
    case State::Compiling:
      return "compiling";
    case State::Done:
      return "done";
    case State::Released:
      return "released";
  }
  return "released";
}

std::string remote_path(std::string_view compiler_version, std::string_view key) {
  return std::string(kRemoteDir) + "/" + layout::compiler_dir_name(compiler_version) + "/" +
         std::string(key) + ".json";
}

std::optional<std::string> compiler_version_of_lease(std::string_view path_in_store) {
  return layout::compiler_version_below(path_in_store, kRemoteDir);
}

std::string serialize(const Record& record) {
  return pyjson::dumps({{"format", kFormat},
                        {"state", state_name(record.state)},
                        {"holder", record.holder},
                        {"host", record.host},
                        {"configuration", record.configuration},
                        {"key", record.key},
                        {"started", utc_text(record.started)},
                        {"heartbeat", utc_text(record.heartbeat)},
                        {"expires", utc_text(record.expires)},
                        {"expected_seconds", record.expected_seconds},
                        {"note", record.note},
                        {"process", record.process}},
                       2) +
         "\n";
}

std::optional<Record> parse(std::string_view text) {
  auto json = pyjson::parse_or_nothing(text, kLimits);
  if (!json || !json->is_object()) return std::nullopt;
  auto format = json->find("format");
  if (format == json->end() || !format->is_number_integer() || format->get<int64_t>() != kFormat)
    return std::nullopt;
  Record r;
  auto state = text_of(*json, "state");
  auto holder = text_of(*json, "holder");
  auto host = text_of(*json, "host");
  auto configuration = text_of(*json, "configuration");
  auto key = text_of(*json, "key");
  auto note = text_of(*json, "note");
  auto started = time_of(*json, "started");
  auto heartbeat = time_of(*json, "heartbeat");
  auto expires = time_of(*json, "expires");
  auto expected = json->find("expected_seconds");
  if (!state || !state_of(*state) || !holder || holder->empty() || !host || !configuration ||
      !key || !note || !started || !heartbeat || !expires || expected == json->end() ||
      !expected->is_number())
    return std::nullopt;
  double seconds = expected->get<double>();  // NaN, inf or negative: damaged() says why
  r.state = *state_of(*state);
  r.holder = *holder;
  r.host = *host;
  r.configuration = *configuration;
  r.key = *key;
  r.note = *note;
  r.started = *started;
  r.heartbeat = *heartbeat;
  r.expires = *expires;
  r.expected_seconds = seconds;
  if (json->contains("process")) {  // optional: leases of older versions have none
    auto process = text_of(*json, "process");
    if (!process) return std::nullopt;
    r.process = *process;
  }
  return r;
}

}  // namespace neuron_cache::lease
