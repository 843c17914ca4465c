// Reading the JSON of an answer (the Hub's API; any JSON a store serves). An answer of the wrong
// shape (not JSON, a string where an object belongs, a number for a path) is the server failing,
// like a 5xx: an operational Error that names the request and what was expected, never a raw JSON
// library message. Every answer is read by pyjson's one bounded reader (pyjson::kApiAnswer: bytes,
// depth and values), so no answer can grow a DOM beyond what an API answer needs.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/net/http.h"

namespace neuron_cache::net {

// What a part of an answer should have been, thrown by the readers below and turned into an
// Error by read_answer (which knows the request).
class BadAnswer : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "POST /api/models/org/repo/preupload/main": the method and path, without the query (a signed
// URL's signature) or the host; the token is never part of a URL.
inline std::string request_name(const std::string& method, const std::string& url) {
  size_t scheme = url.find("://");
  size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  std::string out = path == std::string::npos ? "/" : url.substr(path);
  out = out.substr(0, out.find_first_of("?#"));
  return method + " " + out;
}

inline std::string request_name(const HttpRequest& request) {
  return request_name(request.method, request.url);
}

// Who answered and what to check, for messages: the Hub unless a store says otherwise.
struct Server {
  std::string name = "the Hub";
  std::string check = "check that HF_ENDPOINT points to a Hugging Face Hub";
};

inline Error malformed_answer(const std::string& request, long status, const std::string& expected,
                              const std::string& why, const Server& server = {}) {
  return operational_error(request + " failed: " + server.name + "'s answer (HTTP " +
                           std::to_string(status) + ") is not " + expected + ": " + why + "; " +
                           server.check + ", or retry later if " + server.name + " is failing");
}

inline const char* kind_of(const nlohmann::json& value) {
  return value.is_discarded() ? "not JSON" : value.type_name();
}

// `value` itself, when it is an object; `what` names it in the message ("the answer", "an item").
inline const nlohmann::json& object_in(const nlohmann::json& value, const std::string& what) {
  if (!value.is_object()) throw BadAnswer(what + " is " + kind_of(value) + ", not an object");
  return value;
}

inline const nlohmann::json& array_in(const nlohmann::json& value, const std::string& what) {
  if (!value.is_array()) throw BadAnswer(what + " is " + kind_of(value) + ", not a list");
  return value;
}

// The member `key` of an object when present and not null, else nothing.
inline const nlohmann::json* member(const nlohmann::json& object, const std::string& key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string text_in(const nlohmann::json& object, const std::string& key,
                           const std::string& fallback = "") {
  const nlohmann::json* value = member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_string())
    throw BadAnswer("\"" + key + "\" is " + kind_of(*value) + ", not a string");
  return value->get<std::string>();
}

inline bool flag_in(const nlohmann::json& object, const std::string& key, bool fallback) {
  const nlohmann::json* value = member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw BadAnswer("\"" + key + "\" is " + kind_of(*value) + ", not true or false");
  return value->get<bool>();
}

inline uint64_t size_in(const nlohmann::json& object, const std::string& key, uint64_t fallback) {
  const nlohmann::json* value = member(object, key);
  if (value == nullptr) return fallback;
  // pyjson reads a non-negative integer as signed when it fits.
  if (!value->is_number_unsigned() && !(value->is_number_integer() && value->get<int64_t>() >= 0))
    throw BadAnswer("\"" + key + "\" is " + kind_of(*value) + ", not a size");
  return value->get<uint64_t>();
}

// Parses the body of `response` to the request `request` and reads it with `read`; `expected`
// says what the answer should be ("a list of files"). Every shape problem becomes an Error.
template <typename Read>
auto read_answer(const HttpResponse& response, const std::string& request,
                 const std::string& expected, Read&& read, const Server& server = {}) {
  nlohmann::json value;
  try {
    if (response.too_large) throw BadAnswer(response.error);
    try {
      value = pyjson::parse(response.body, pyjson::kApiAnswer);
    } catch (const Error& error) {
      throw BadAnswer(std::string("it is not JSON within an answer's bounds (") + error.what() +
                      ")");
    }
    return read(value);
  } catch (const BadAnswer& bad) {
    // What was wrong may quote the answer (a key, a message): escaped, as all a server says.
    throw malformed_answer(request, response.status, expected,
                           printable(bad.what(), kPrintableMessage), server);
  } catch (const nlohmann::json::exception&) {
    // A reader missed a check: still the answer's fault, told without the library's words.
    throw malformed_answer(request, response.status, expected, "a value has an unexpected type",
                           server);
  }
}

}  // namespace neuron_cache::net
