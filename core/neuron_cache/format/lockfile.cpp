#include "neuron_cache/format/lockfile.h"

#include <algorithm>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::lockfile {
namespace {

using pyjson::Json;

[[noreturn]] void bad(const std::string& origin, const std::string& why) {
  throw input_error(origin + " is not a neuron-cache lockfile: " + why +
                    "; write it again with `neuron-cache lock`");
}

std::string text_field(const Json& json, const char* name, const std::string& origin) {
  auto it = json.find(name);
  if (it == json.end() || !it->is_string()) bad(origin, std::string("no text \"") + name + "\"");
  return it->get<std::string>();
}

bool is_hex64(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(c) != 0; });
}

Locked locked_from_json(const Json& item, const std::string& origin) {
  if (!item.is_object() || !item.contains("entry")) bad(origin, "a configuration without entry");
  Locked locked;
  locked.name = text_field(item, "name", origin);
  if (locked.name.empty() || locked.name.size() > 200 || printable(locked.name) != locked.name)
    bad(origin, "a configuration name that is empty, too long or not printable");
  locked.entry = artifact_index::entry_from_json(item["entry"], origin + " (" + locked.name + ")");
  if (item.contains("signed_by")) {
    const Json& keys = item["signed_by"];
    if (!keys.is_array() || keys.size() > artifact_index::kMaxSignatures)
      bad(origin, "\"signed_by\" of " + locked.name + " is not a short list of key names");
    for (const auto& key : keys) {
      if (!key.is_string() || artifact_index::key_name_problem(key.get<std::string>()))
        bad(origin, "\"signed_by\" of " + locked.name + " holds something that is no key name");
      locked.signed_by.push_back(key.get<std::string>());
    }
  }
  return locked;
}

}  // namespace

const Locked* Lock::find(std::string_view name) const {
  for (const auto& locked : configurations)
    if (locked.name == name) return &locked;
  return nullptr;
}

std::string serialize(Lock lock) {
  std::sort(lock.configurations.begin(), lock.configurations.end(),
            [](const Locked& a, const Locked& b) { return a.name < b.name; });
  Json configurations = Json::array();
  for (const auto& locked : lock.configurations) {
    Json item = {{"name", locked.name}, {"entry", artifact_index::entry_to_json(locked.entry)}};
    if (!locked.signed_by.empty()) item["signed_by"] = locked.signed_by;
    configurations.push_back(std::move(item));
  }
  Json document = {{"format_version", kFormat},
                   {"manifest", lock.manifest},
                   {"manifest_sha256", lock.manifest_sha256},
                   {"store", lock.store},
                   {"revision", lock.revision},
                   {"configurations", configurations}};
  return pyjson::dumps(document, 2) + "\n";
}

Lock parse(std::string_view text, const std::string& origin) {
  if (text.size() > kMaxLockBytes) bad(origin, "larger than a lockfile may be (64 MiB)");
  Json json;
  try {
    json = pyjson::parse(text);
  } catch (const Error& error) {
    bad(origin, error.what());
  }
  if (!json.is_object()) bad(origin, "not a JSON object");
  auto version = json.find("format_version");
  if (version == json.end() || !version->is_number_integer()) bad(origin, "no format_version");
  if (version->get<int64_t>() != kFormat) {
    throw input_error(origin + " is a lockfile of format " +
                      std::to_string(version->get<int64_t>()) +
                      "; this neuron-cache reads format " + std::to_string(kFormat) +
                      ": update neuron-cache, or write the lock again with this one");
  }
  Lock lock;
  lock.manifest = text_field(json, "manifest", origin);
  lock.manifest_sha256 = text_field(json, "manifest_sha256", origin);
  if (!is_hex64(lock.manifest_sha256)) bad(origin, "manifest_sha256 is not a sha256");
  lock.store = text_field(json, "store", origin);
  lock.revision = text_field(json, "revision", origin);
  auto items = json.find("configurations");
  if (items == json.end() || !items->is_array()) bad(origin, "no configurations list");
  std::set<std::string> names;
  for (const auto& item : *items) {
    Locked locked = locked_from_json(item, origin);
    if (!names.insert(locked.name).second)
      bad(origin, "the configuration " + locked.name + " is listed twice");
    lock.configurations.push_back(std::move(locked));
  }
  return lock;
}

std::vector<LockedFile> locked_files(const Lock& lock) {
  std::vector<LockedFile> files;
  for (const auto& locked : lock.configurations) {
    const artifact_index::Entry& e = locked.entry;
    for (const auto& module : e.modules) {
      for (const auto& f : module.files)
        files.push_back({e.compiler_dir() + "/" + module.name + "/" + f.name, f.size, f.sha256});
    }
    for (const auto& f : e.registry)
      files.push_back({e.compiler_dir() + "/" + f.name, f.size, f.sha256});
  }
  return files;
}

}  // namespace neuron_cache::lockfile
