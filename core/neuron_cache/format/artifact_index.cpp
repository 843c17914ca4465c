#include "neuron_cache/format/artifact_index.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <set>
#include <tuple>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"

namespace neuron_cache::artifact_index {
namespace {

using pyjson::Json;

// Bounds on what one entry read from a shared repo may claim: a file above 1 TiB is no NEFF, and
// an entry listing 100,000 modules would cost hundreds of thousands of requests. The totals bound
// what one configuration may make a prefetch download and write (10,000 modules of five files).
constexpr uint64_t kMaxFileBytes = 1ull << 40;
constexpr uint64_t kMaxEntryBytes = 2ull << 40;
constexpr size_t kMaxModules = 10000;
constexpr size_t kMaxFilesPerEntry = 50000;
constexpr size_t kMaxNameBytes = 255;

// The files libneuronxla writes in a MODULE_<graph key>+<flags key> folder (format spec 2.2),
// lock files aside: such a folder is flat and holds nothing else.
constexpr std::string_view kModuleFiles[] = {
    layout::kHlo,  layout::kLegacyHlo, layout::kFlagsJson, layout::kLegacyFlagsTxt,
    layout::kNeff, layout::kDone,      layout::kLog,       layout::kWrappedNeff};

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw input_error(origin + ": not a valid artifact index: " + what);
}

const Json& member(const Json& object, const char* name, const std::string& origin) {
  if (!object.is_object() || !object.contains(name)) {
    bad(origin, std::string("missing field \"") + name + "\"");
  }
  return object.at(name);
}

std::string text(const Json& object, const char* name, const std::string& origin) {
  const Json& value = member(object, name, origin);
  if (!value.is_string()) bad(origin, std::string("\"") + name + "\" is not a string");
  return value.get<std::string>();
}

bool is_lower_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// A loop, not find_first_not_of: that searched the 16 digits once per character (a warm plan
// checks some 1,400 of these).
bool is_sha256(std::string_view hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), is_lower_hex_digit);
}

Json files_to_json(const std::vector<FileRecord>& files) {
  Json out = Json::array();
  for (const auto& file : files) {
    out.push_back({{"name", file.name}, {"size", file.size}, {"sha256", file.sha256}});
  }
  return out;
}

// No control character, DEL or backslash: names are printed in messages and logs, and become
// paths on every machine that reads the cache.
bool has_safe_chars(std::string_view name) {
  return std::none_of(name.begin(), name.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f || c == '\\';
  });
}

bool is_lower_hex(std::string_view text, size_t length) {
  return text.size() == length &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The graph keys libneuronxla and NxD write are decimal or hex (format spec 2.3): letters,
// digits, '.', '_' and '-' cover them and keep the folder name one plain path component.
bool is_graph_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

using NameCheck = std::optional<std::string> (*)(std::string_view module, std::string_view name);

std::optional<std::string> registry_name_problem(std::string_view, std::string_view name) {
  if (name.size() > kMaxNameBytes) return "longer than 255 bytes";
  if (!has_safe_chars(name)) return "a control character or a backslash";
  if (!is_safe_relative_path(name)) return "not a relative path inside the folder";
  if (!name.starts_with(std::string(layout::kRegistryDir) + "/")) return "outside 0_REGISTRY";
  return std::nullopt;
}

// "a" listed as a file and "a/b" below it: both cannot be written.
std::optional<std::string> file_under_file(const std::set<std::string>& names) {
  for (const auto& name : names) {
    for (size_t slash = name.find('/'); slash != std::string::npos;
         slash = name.find('/', slash + 1)) {
      if (names.count(name.substr(0, slash))) return name.substr(0, slash);
    }
  }
  return std::nullopt;
}

std::vector<FileRecord> files_from_json(const Json& list, const std::string& origin,
                                        std::string_view module, NameCheck check) {
  if (!list.is_array()) bad(origin, "a file list is not a list");
  if (list.size() > kMaxFilesPerList) {
    bad(origin, "a file list of " + std::to_string(list.size()) + " files (at most " +
                    std::to_string(kMaxFilesPerList) + ")");
  }
  std::vector<FileRecord> files;
  std::set<std::string> names;
  for (const Json& item : list) {
    FileRecord file{text(item, "name", origin), 0, text(item, "sha256", origin)};
    auto shown = [&] { return printable(file.name); };  // only for a message
    if (auto problem = check(module, file.name)) {
      bad(origin, "\"" + shown() + "\" is not a file of a MODULE_ folder or of 0_REGISTRY (" +
                      *problem + ")");
    }
    if (!names.insert(file.name).second) {
      bad(origin, (module.empty() ? std::string("the registry") : std::string(module)) + " lists " +
                      shown() + " twice");
    }
    const Json& size = member(item, "size", origin);
    if (!size.is_number_unsigned() && !(size.is_number_integer() && size.get<int64_t>() >= 0)) {
      bad(origin, "the size of " + shown() + " is not a non-negative integer");
    }
    file.size = size.get<uint64_t>();
    if (file.size > kMaxFileBytes) {
      bad(origin,
          "the size of " + shown() + " (" + std::to_string(file.size) + " bytes) is above 1 TiB");
    }
    if (!is_sha256(file.sha256)) bad(origin, "bad sha256 for " + shown());
    files.push_back(std::move(file));
  }
  if (auto both = file_under_file(names)) {
    bad(origin,
        std::string(module) + " lists " + printable(*both) + " both as a file and as a folder");
  }
  return files;
}

}  // namespace

std::optional<std::string> incomplete_module_problem(const ModuleRecord& module) {
  std::vector<std::string> paths;
  for (const auto& file : module.files) {
    if (file.name == layout::kDone && file.size != 0) {
      return "lists a model.done of " + std::to_string(file.size) +
             " bytes (libneuronxla's marker is empty)";
    }
    paths.push_back(file.name);
  }
  if (layout::is_complete(layout::classify_listed(module.name, paths))) return std::nullopt;
  if (layout::is_traced_module_name(module.name))
    return "lists no config.json (or model_index.json) or no *.neuron file";
  return "lists no model.neff or no model.done: a folder without both is not a compiled graph";
}

namespace {

ModuleRecord module_from_json(const Json& item, const std::string& origin) {
  std::string name = text(item, "name", origin);
  if (auto problem = module_name_problem(name)) {
    bad(origin, "\"" + printable(name) + "\" is not a MODULE_ folder name (" + *problem + ")");
  }
  ModuleRecord module{
      name, files_from_json(member(item, "files", origin), origin, name, file_name_problem)};
  if (auto problem = incomplete_module_problem(module)) {
    bad(origin, (layout::is_traced_module_name(name) ? "the traced export " : "the folder ") +
                    module.name + " " + *problem);
  }
  return module;
}

// What one entry holds in all, bounded as it is read.
struct Totals {
  size_t files = 0;
  uint64_t bytes = 0;
  void add(const std::vector<FileRecord>& list, const std::string& origin) {
    files += list.size();
    for (const auto& file : list) bytes += file.size;  // each at most 1 TiB: no overflow
    if (files > kMaxFilesPerEntry) {
      bad(origin, "more than " + std::to_string(kMaxFilesPerEntry) +
                      " files in one entry: no configuration needs that many");
    }
    if (bytes > kMaxEntryBytes) {
      bad(origin, "more than " + std::to_string(kMaxEntryBytes) +
                      " bytes in one entry (2 TiB): no configuration needs that much");
    }
  }
};

// A bounded informative text: printed in plans and reports.
std::string short_text(const Json& object, const char* name, const std::string& origin) {
  std::string value = text(object, name, origin);
  if (value.size() > kMaxNameBytes || !has_safe_chars(value)) {
    bad(origin, std::string("the ") + name + " \"" + printable(value) +
                    "\" is longer than 255 bytes or holds a control character");
  }
  return value;
}

// A format 2 shard belongs to one model ("model_id") or one profile ("profile").
void read_owner(const Json& json, const std::string& origin, IndexFile& index) {
  if (!json.contains("profile")) {
    index.model_id = text(json, "model_id", origin);
    return;
  }
  index.profile = text(json, "profile", origin);
  if (auto problem = cache_key::profile_name_problem(*index.profile)) bad(origin, *problem);
}

std::string owner_of(const IndexFile& index) {
  return index.profile ? "profile " + *index.profile : index.model_id;
}

template <typename Record>
void add_missing(std::vector<Record>& into, const std::vector<Record>& from) {
  std::set<std::string> names;
  for (const auto& record : into) names.insert(record.name);
  for (const auto& record : from) {
    if (names.insert(record.name).second) into.push_back(record);
  }
  std::sort(into.begin(), into.end(),
            [](const Record& a, const Record& b) { return a.name < b.name; });
}

template <typename Record>
bool has_all_names(const std::vector<Record>& have, const std::vector<Record>& want) {
  std::set<std::string> names;
  for (const auto& record : have) names.insert(record.name);
  return std::all_of(want.begin(), want.end(),
                     [&](const Record& record) { return names.count(record.name) > 0; });
}

bool is_base64_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
}

// Only the shape: a name by the key name rule and a signature of 64 bytes' base64 length. Whether
// its bytes decode and verify is trust/'s question, and a failure there is a bad signature, not
// an unreadable entry.
EntrySignature signature_from_json(const Json& item, const std::string& origin) {
  EntrySignature signature{text(item, "key", origin), text(item, "sig", origin)};
  if (auto problem = key_name_problem(signature.key)) {
    bad(origin, "a signature's key name \"" + printable(signature.key.substr(0, kMaxKeyName)) +
                    "\" is not valid (" + *problem + ")");
  }
  if (signature.sig.size() != kSignatureBase64Bytes ||
      !std::all_of(signature.sig.begin(), signature.sig.end(), is_base64_char)) {
    bad(origin, "the signature of key " + signature.key + " is not the base64 of 64 bytes");
  }
  return signature;
}

std::vector<EntrySignature> signatures_from_json(const Json& list, const std::string& origin) {
  if (!list.is_array()) bad(origin, "\"signatures\" is not a list");
  if (list.size() > kMaxSignatures) {
    bad(origin, std::to_string(list.size()) + " signatures (at most " +
                    std::to_string(kMaxSignatures) + ")");
  }
  std::vector<EntrySignature> signatures;
  std::set<std::string> keys;
  for (const Json& item : list) {
    EntrySignature signature = signature_from_json(item, origin);
    if (!keys.insert(signature.key).second) {
      bad(origin, "two signatures of key " + signature.key);
    }
    signatures.push_back(std::move(signature));
  }
  return signatures;
}

Json signatures_to_json(const std::vector<EntrySignature>& signatures) {
  Json out = Json::array();
  for (const auto& signature : signatures) {
    out.push_back({{"key", signature.key}, {"sig", signature.sig}});
  }
  return out;
}

bool same_files(const std::vector<FileRecord>& a, const std::vector<FileRecord>& b) {
  auto fields = [](const FileRecord& f) { return std::tie(f.name, f.size, f.sha256); };
  return std::equal(
      a.begin(), a.end(), b.begin(), b.end(),
      [&](const FileRecord& x, const FileRecord& y) { return fields(x) == fields(y); });
}

// Whether both list the same files with the same sizes and sha256s, in any order.
bool same_contents(const Entry& a, const Entry& b) {
  auto by_name = [](const auto& x, const auto& y) { return x.name < y.name; };
  auto modules_a = a.modules, modules_b = b.modules;
  auto registry_a = a.registry, registry_b = b.registry;
  std::sort(modules_a.begin(), modules_a.end(), by_name);
  std::sort(modules_b.begin(), modules_b.end(), by_name);
  std::sort(registry_a.begin(), registry_a.end(), by_name);
  std::sort(registry_b.begin(), registry_b.end(), by_name);
  auto same_module = [](ModuleRecord x, ModuleRecord y) {
    auto by_file = [](const FileRecord& p, const FileRecord& q) { return p.name < q.name; };
    std::sort(x.files.begin(), x.files.end(), by_file);
    std::sort(y.files.begin(), y.files.end(), by_file);
    return x.name == y.name && same_files(x.files, y.files);
  };
  return std::equal(modules_a.begin(), modules_a.end(), modules_b.begin(), modules_b.end(),
                    same_module) &&
         same_files(registry_a, registry_b);
}

}  // namespace

uint64_t ModuleRecord::size() const {
  uint64_t total = 0;
  for (const auto& file : files) total += file.size;
  return total;
}

std::string Entry::compiler_dir() const {
  return layout::compiler_dir_name(inputs.compiler_version);
}

uint64_t Entry::total_bytes() const {
  uint64_t total = 0;
  for (const auto& module : modules) total += module.size();
  for (const auto& file : registry) total += file.size;
  return total;
}

Json entry_to_json(const Entry& entry) {
  Json modules = Json::array();
  for (const auto& module : entry.modules) {
    modules.push_back({{"name", module.name}, {"files", files_to_json(module.files)}});
  }
  Json out = {{"key", entry.key},
              {"inputs", cache_key::to_json(entry.inputs)},
              {"configuration", entry.configuration},
              {"modules", modules},
              {"registry", files_to_json(entry.registry)},
              {"compile_seconds", entry.compile_seconds},
              {"tool", entry.tool},
              {"created_at", entry.created_at}};
  if (!entry.signatures.empty()) out["signatures"] = signatures_to_json(entry.signatures);
  return out;
}

Entry entry_from_json(const Json& json, const std::string& origin, const KnownKey* known) {
  Entry entry;
  entry.key = text(json, "key", origin);
  try {
    entry.inputs = cache_key::from_json(member(json, "inputs", origin));
  } catch (const Error& error) {
    bad(origin, error.what());
  }
  bool made_here = known && entry.key == known->key && entry.inputs == known->inputs;
  if (!made_here && cache_key::key_of(entry.inputs) != entry.key) {
    bad(origin, "entry " + entry.key + " does not match its inputs");
  }
  const std::string& version = entry.inputs.compiler_version;
  if (version.empty() || version.size() > 200 || version.find('/') != std::string::npos ||
      version == "." || version == ".." || !has_safe_chars(version)) {
    bad(origin, "unsafe compiler version \"" + printable(version) + "\"");
  }
  entry.configuration = text(json, "configuration", origin);
  if (entry.configuration.size() > kMaxNameBytes || !has_safe_chars(entry.configuration)) {
    bad(origin, "the configuration name \"" + printable(entry.configuration) +
                    "\" is longer than 255 bytes or holds a control character");
  }
  const Json& modules = member(json, "modules", origin);
  if (!modules.is_array()) bad(origin, "\"modules\" is not a list");
  if (modules.size() > kMaxModules) {
    bad(origin, std::to_string(modules.size()) + " modules in one entry (at most " +
                    std::to_string(kMaxModules) + ")");
  }
  Totals totals;
  std::set<std::string> module_names;
  for (const Json& item : modules) {
    ModuleRecord module = module_from_json(item, origin);
    if (!module_names.insert(module.name).second) bad(origin, "lists " + module.name + " twice");
    totals.add(module.files, origin);
    entry.modules.push_back(std::move(module));
  }
  entry.registry =
      files_from_json(member(json, "registry", origin), origin, "", registry_name_problem);
  totals.add(entry.registry, origin);
  const Json& seconds = member(json, "compile_seconds", origin);
  if (!seconds.is_number()) bad(origin, "\"compile_seconds\" is not a number");
  entry.compile_seconds = seconds.get<double>();
  entry.tool = short_text(json, "tool", origin);
  entry.created_at = short_text(json, "created_at", origin);
  if (json.contains("signatures"))
    entry.signatures = signatures_from_json(json.at("signatures"), origin);
  return entry;
}

std::string serialize_entry(const Entry& entry) {
  return pyjson::dumps(entry_to_json(entry), 2);
}

Entry parse_entry(std::string_view text_in, const std::string& origin, const KnownKey* known) {
  Json json;
  try {
    json = pyjson::parse(text_in);
  } catch (const Error& error) {
    bad(origin, error.what());
  }
  return entry_from_json(json, origin, known);
}

std::string serialize_index(const IndexFile& index) {
  Json entries = Json::object();
  for (const auto& [key, raw] : index.unreadable) entries[key] = raw;
  for (const auto& [key, entry] : index.entries) entries[key] = entry_to_json(entry);
  if (index.format == kLegacyFormat) {
    return pyjson::dumps({{"format", kLegacyFormat}, {"entries", entries}}, 2);
  }
  if (index.profile) {
    return pyjson::dumps({{"format", kFormat}, {"profile", *index.profile}, {"entries", entries}});
  }
  return pyjson::dumps({{"format", kFormat}, {"model_id", index.model_id}, {"entries", entries}});
}

IndexFile parse_index(std::string_view text_in, const std::string& origin) {
  Json json;
  try {
    json = pyjson::parse(text_in);
  } catch (const Error& error) {
    bad(origin, error.what());
  }
  const Json& format = member(json, "format", origin);
  bool known = format.is_number_integer() &&
               (format.get<int64_t>() == kFormat || format.get<int64_t>() == kLegacyFormat);
  if (!known) {
    bad(origin, "index format " + format.dump() + " is newer than format " +
                    std::to_string(kFormat) + ": upgrade neuron-cache");
  }
  const Json& entries = member(json, "entries", origin);
  if (!entries.is_object()) bad(origin, "\"entries\" is not an object");
  IndexFile index;
  index.format = static_cast<int>(format.get<int64_t>());
  if (index.format == kFormat) read_owner(json, origin, index);
  for (const auto& [key, value] : entries.items()) {
    try {
      Entry entry = entry_from_json(value, origin + " (entry " + key + ")");
      if (entry.key != key) bad(origin, "entry " + key + " is stored under another key");
      if (index.format == kFormat && !is_shard_for(index, entry.inputs)) {
        bad(origin, "entry " + key + " of " + cache_key::owner_of(entry.inputs) +
                        " is in the shard of " + owner_of(index));
      }
      if (index.format == kLegacyFormat && entry.inputs.profile) {
        bad(origin, "entry " + key + " of a profile is in a format 1 file");
      }
      index.entries.emplace(key, std::move(entry));
    } catch (const Error& error) {
      index.unreadable.emplace(key, value);
      index.problems.push_back(error.what());
    }
  }
  return index;
}

bool is_newer_index(std::string_view text) {
  try {
    Json json = pyjson::parse(text);
    if (!json.is_object() || !json.contains("format")) return false;
    const Json& format = json["format"];
    return format.is_number_integer() && format.get<int64_t>() > kFormat;
  } catch (const Error&) {
    return false;
  }
}

std::string remote_index_path(std::string_view compiler_version) {
  return std::string(kRemoteDir) + "/" + layout::compiler_dir_name(compiler_version) + ".json";
}

std::string model_slug(std::string_view model_id) {
  constexpr size_t kMaxSlug = 200;
  bool plain = !model_id.empty() && model_id.size() <= kMaxSlug && model_id.front() != '.' &&
               model_id.front() != '-' && std::count(model_id.begin(), model_id.end(), '/') <= 1 &&
               model_id.find("--") == std::string_view::npos && model_id.back() != '/';
  for (char ch : model_id) {
    bool allowed = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ||
                   ch == '-' || ch == '/';
    plain = plain && allowed;
  }
  if (plain && model_id.find("/.") != std::string_view::npos) plain = false;
  if (!plain) return "model-" + sha256_hex(model_id).substr(0, 32);
  std::string slug;
  for (char ch : model_id) slug += ch == '/' ? std::string("--") : std::string(1, ch);
  return slug;
}

std::string remote_shard_path(std::string_view compiler_version, std::string_view model_id) {
  return std::string(kRemoteDir) + "/" + layout::compiler_dir_name(compiler_version) + "/" +
         model_slug(model_id) + ".json";
}

std::string remote_profile_shard_path(std::string_view compiler_version, std::string_view profile) {
  return std::string(kRemoteDir) + "/" + layout::compiler_dir_name(compiler_version) +
         "/profiles/" + std::string(profile) + ".json";
}

std::string remote_shard_path(const cache_key::KeyInputs& inputs) {
  if (inputs.profile) return remote_profile_shard_path(inputs.compiler_version, *inputs.profile);
  return remote_shard_path(inputs.compiler_version, inputs.model_id);
}

IndexFile shard_for(const cache_key::KeyInputs& inputs) {
  IndexFile shard;
  shard.profile = inputs.profile;
  if (!inputs.profile) shard.model_id = inputs.model_id;
  return shard;
}

bool is_shard_for(const IndexFile& shard, const cache_key::KeyInputs& inputs) {
  if (shard.format != kFormat || shard.profile != inputs.profile) return false;
  return inputs.profile || shard.model_id == inputs.model_id;
}

bool covers(const Entry& hub, const Entry& local) {
  return hub.key == local.key && has_all_names(hub.modules, local.modules) &&
         has_all_names(hub.registry, local.registry);
}

Entry merged(const Entry& first, const Entry& more) {
  Entry out = first;
  add_missing(out.modules, more.modules);
  add_missing(out.registry, more.registry);
  out.signatures.clear();
  for (const Entry* input : {&first, &more}) {
    if (input->key != out.key || input->inputs != out.inputs || !same_contents(*input, out))
      continue;
    for (const auto& signature : input->signatures) {
      bool known = std::any_of(out.signatures.begin(), out.signatures.end(),
                               [&](const auto& s) { return s.key == signature.key; });
      if (!known && out.signatures.size() < kMaxSignatures) out.signatures.push_back(signature);
    }
  }
  return out;
}

std::string contents_id(const Entry& entry) {
  std::vector<std::string> names;
  for (const auto& module : entry.modules) names.push_back(module.name);
  for (const auto& file : entry.registry) names.push_back(file.name);
  std::sort(names.begin(), names.end());
  std::string all;
  for (const auto& name : names) all += name + "\n";
  return entry.key + "+" + sha256_hex(all).substr(0, 16);
}

std::optional<std::string> compiler_version_of_index(std::string_view path) {
  return layout::compiler_version_below(path, kRemoteDir);
}

std::string local_entry_path(std::string_view compiler_version, std::string_view key) {
  return std::string(kLocalDir) + "/" + layout::compiler_dir_name(compiler_version) + "/" +
         std::string(key) + ".json";
}

std::optional<std::string> module_name_problem(std::string_view name) {
  if (name.size() > kMaxNameBytes) return "longer than 255 bytes";
  if (!has_safe_chars(name)) return "a control character or a backslash";
  if (layout::is_traced_module_name(name)) return std::nullopt;
  auto parsed = layout::parse_module_name(name);
  if (!parsed || !is_graph_key(parsed->graph_key) || !is_lower_hex(parsed->flags_key, 8)) {
    return "libneuronxla names its folders MODULE_<graph key>+<8 hex flags key>, traced exports "
           "MODULE_<20 hex>";
  }
  return std::nullopt;
}

std::optional<std::string> key_name_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() > kMaxKeyName) return "longer than " + std::to_string(kMaxKeyName) + " bytes";
  if (!std::isalnum(static_cast<unsigned char>(name.front())))
    return "it must start with a letter or a digit";
  bool allowed = std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
  if (!allowed) return "only letters, digits, '.', '_' and '-' may appear";
  size_t dash = name.rfind('-');
  bool numbered = dash != std::string_view::npos && dash > 0 && dash + 1 < name.size() &&
                  std::all_of(name.begin() + dash + 1, name.end(),
                              [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!numbered)
    return "it must end in '-' and a number (acme-ci-1), so that a key can be replaced";
  return std::nullopt;
}

std::optional<std::string> file_name_problem(std::string_view module, std::string_view name) {
  if (name.size() > kMaxNameBytes) return "longer than 255 bytes";
  if (!has_safe_chars(name)) return "a control character or a backslash";
  if (!is_safe_relative_path(name)) return "not a relative path inside the folder";
  if (layout::is_traced_module_name(module)) return std::nullopt;  // the export's own files
  if (name.find('/') != std::string_view::npos) {
    return "a MODULE_<graph key>+<flags key> folder is flat";
  }
  if (std::find(std::begin(kModuleFiles), std::end(kModuleFiles), name) == std::end(kModuleFiles)) {
    return "not a file libneuronxla writes";
  }
  return std::nullopt;
}

bool is_safe_relative_path(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string_view::npos) {
    return false;
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  std::string_view base =
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  return !layout::is_lock_file(base);
}

std::string utc_now() {
  return utc_text(std::time(nullptr));
}

}  // namespace neuron_cache::artifact_index
