#include "neuron_cache/format/lease.h"

#include <cmath>

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

}  // namespace

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
  double seconds = expected->get<double>();
  if (!std::isfinite(seconds) || seconds < 0) return std::nullopt;
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
