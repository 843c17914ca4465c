#include "neuron_cache/pipeline/hub_keys.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::pipeline {
namespace {

using nlohmann::json;

// The keys remembered for this repo and revision; none when the file says something else.
std::set<std::string> read_keys(const sys::RootedFile& file, const std::string& repo,
                                const std::string& revision) {
  json memo = pyjson::read_kept(file).value_or(json());
  if (!memo.is_object() || memo.value("repo", "") != repo ||
      memo.value("revision", "") != revision || !memo.contains("keys") ||
      !memo["keys"].is_array()) {
    return {};
  }
  std::set<std::string> keys;
  for (const auto& key : memo["keys"]) {
    if (key.is_string()) keys.insert(key.get<std::string>());
  }
  return keys;
}

}  // namespace

bool HubKeys::has_all(const std::vector<std::string>& keys) const {
  if (revision_.empty()) return false;
  std::set<std::string> known = read_keys(file_, repo_, revision_);
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& key) { return known.count(key) > 0; });
}

void HubKeys::remember(const std::vector<std::string>& keys) const {
  if (revision_.empty()) return;
  std::set<std::string> known = read_keys(file_, repo_, revision_);
  size_t before = known.size();
  known.insert(keys.begin(), keys.end());
  if (known.size() == before) return;  // nothing new: nothing written
  try {
    file_.replace(json{{"repo", repo_}, {"revision", revision_}, {"keys", known}}.dump());
  } catch (const std::exception&) {
    // Remembering only saves reading the index next time.
  }
}

}  // namespace neuron_cache::pipeline
