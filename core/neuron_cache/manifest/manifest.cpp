#include "neuron_cache/manifest/manifest.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/store_name.h"
#include "neuron_cache/manifest/command_template.h"
#include "neuron_cache/trust/keys.h"

namespace neuron_cache::manifest {
namespace {

using Keys = std::vector<std::string_view>;

const Keys kTopKeys = {
    "cache_repo",    "cache_dir",         "compiler_version", "optimum_neuron_version",
    "instance_type", "compiler_flags",    "compile",          "models",
    "trusted_keys",  "require_signatures"};
const Keys kCompileKeys = {"command", "env"};
const Keys kModelKeys = {"model_id", "revision", "model_type",
                         "checkout", "task",     "configurations"};
const Keys kConfigurationKeys = {"name",          "batch_size",           "sequence_length",
                                 "num_cores",     "tensor_parallel_size", "precision",
                                 "instance_type", "compiler_flags"};
constexpr std::string_view kInstanceTypes = "trn1, trn1n, trn2, inf2";
constexpr std::string_view kPrecisions = "bf16, fp16, fp32 (or bfloat16, float16, float32)";
// A manifest is a short hand-written file; anything beyond these bounds is a mistake or an
// attack, not a manifest. YAML aliases (*name) repeat a node without repeating its text, so the
// nodes visited and the scalar bytes read are counted as the reader walks, aliases expanded: a
// 1 MiB file repeating a 1 MiB flag 200 times stops at the bound instead of filling memory.
constexpr std::uintmax_t kMaxManifestBytes = 1 << 20;
constexpr std::size_t kMaxNodes = 500'000;
constexpr std::size_t kMaxScalarBytes = 16 << 20;
// What no real configuration passes (manifest.h: the bounds of a configuration).
constexpr std::int64_t kMaxBatchSize = 65'536;
constexpr std::int64_t kMaxSequenceLength = 1 << 24;  // 16 Mi tokens
constexpr std::int64_t kMaxCores = 1'024;
constexpr std::string_view kCoresWhy = "no Neuron instance has that many NeuronCores";
constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";
constexpr std::string_view kIntTag = "tag:yaml.org,2002:int";
constexpr std::string_view kBoolTag = "tag:yaml.org,2002:bool";

std::string join(const Keys& keys) {
  std::string out;
  for (std::string_view key : keys) out += (out.empty() ? "" : ", ") + std::string(key);
  return out;
}

// How a value is shown in a message: long values are cut so a message stays one line.
std::string show(std::string_view text) {
  constexpr size_t kMax = 60;
  if (text.size() > kMax) return "\"" + std::string(text.substr(0, kMax)) + "...\"";
  return "\"" + std::string(text) + "\"";
}

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  // yaml-cpp tags quoted scalars "!", plain ones "?" and explicit ones with the full tag.
  if (node.Tag() == "!") return "the quoted string " + show(node.Scalar());
  if (node.Tag() == kStrTag) return "the string " + show(node.Scalar()) + " (tagged !!str)";
  if (node.Tag() != "?") return show(node.Scalar()) + " tagged " + node.Tag();
  return show(node.Scalar());
}

// YAML 1.2 core schema integers: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+.
bool is_plain_integer(std::string_view text) {
  auto all = [](std::string_view digits, auto accepts) {
    return !digits.empty() && std::all_of(digits.begin(), digits.end(), [&](char c) {
      return accepts(static_cast<unsigned char>(c));
    });
  };
  auto octal = [](unsigned char c) { return c >= '0' && c <= '7'; };
  auto hex = [](unsigned char c) { return std::isxdigit(c) != 0; };
  auto decimal = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (text.starts_with("0o")) return all(text.substr(2), octal);
  if (text.starts_with("0x")) return all(text.substr(2), hex);
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  return all(text, decimal);
}

bool is_plain_float(std::string_view text) {
  static const std::set<std::string_view> kSpecial = {".inf", "-.inf", "+.inf", ".Inf", "-.Inf",
                                                      ".INF", "-.INF", ".nan",  ".NaN", ".NAN"};
  if (kSpecial.contains(text)) return true;
  char* end = nullptr;
  std::string copy(text);
  std::strtod(copy.c_str(), &end);
  return !copy.empty() && end == copy.c_str() + copy.size() &&
         copy.find_first_of("xXnN") == std::string::npos;
}

// What a plain (unquoted) scalar means to YAML when it is not a string: "the integer 5". Other
// YAML readers (PyYAML, the Hub's CI) read these as numbers or booleans, so the manifest never
// takes them as text; quoting says "text" to every reader. yes/no/on/off are YAML 1.1 booleans.
std::optional<std::string> non_string_meaning(std::string_view text) {
  static const std::set<std::string_view> kBooleans = {
      "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES",
      "no",   "No",   "NO",   "on",    "On",    "ON",    "off", "Off", "OFF"};
  static const std::set<std::string_view> kNulls = {"~", "null", "Null", "NULL"};
  if (kBooleans.contains(text)) return "the boolean " + std::string(text);
  if (kNulls.contains(text)) return "the null value " + std::string(text);
  if (is_plain_integer(text)) return "the integer " + std::string(text);
  if (is_plain_float(text)) return "the number " + std::string(text);
  return std::nullopt;
}

// The offset of the first byte that is not part of well-formed UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF), or of a NUL, which no argument or file name can carry.
std::optional<size_t> bad_text_offset(std::string_view text) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (size_t i = 0; i < text.size();) {
    unsigned char c = byte(i);
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = c >= 0xC2 && c <= 0xDF   ? 2
                    : c >= 0xE0 && c <= 0xEF ? 3
                    : c >= 0xF0 && c <= 0xF4 ? 4
                                             : 0;
    if (length == 0 || i + length > text.size()) return i;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
    if (byte(i + 1) < low || byte(i + 1) > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

// The keys of one YAML map, checked against the keys its context allows.
struct Fields {
  YAML::Node node;
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> by_key;  // key -> (key, value)

  const YAML::Node* value(const std::string& key) const {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : &it->second.second;
  }
  const YAML::Node& key_node(const std::string& key) const { return by_key.at(key).first; }
};

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  std::string where(const YAML::Mark& mark) const {
    if (mark.is_null()) return file_ + ": ";
    return file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
           ": ";
  }
  SourceLocation location(const YAML::Node& node) const {
    YAML::Mark mark = node.Mark();
    if (mark.is_null()) return {file_, 0, 0};
    return {file_, mark.line + 1, mark.column + 1};
  }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw input_error(where(node.Mark()) + message);
  }

  // Counts one node against kMaxNodes; aliases count each time they are used.
  void visit(const YAML::Node& node) const {
    if (++nodes_ > kMaxNodes) {
      fail(node, "the manifest has more than " + std::to_string(kMaxNodes) +
                     " YAML nodes once aliases (*name) are expanded: a manifest is a short "
                     "hand-written file; write the configurations out instead of repeating "
                     "aliases");
    }
  }

  // Counts `bytes` of text held against kMaxScalarBytes (aliases and copied flags included).
  void charge(const YAML::Node& node, size_t bytes) const {
    scalar_bytes_ += bytes;
    if (scalar_bytes_ > kMaxScalarBytes) {
      fail(node, "the manifest's values add up to more than " +
                     std::to_string(kMaxScalarBytes >> 20) +
                     " MiB once aliases (*name) and global compiler_flags are expanded: a "
                     "manifest is a short hand-written file; shorten the repeated values");
    }
  }

  // Every scalar is read here: counted against the bounds, and refused unless it is UTF-8 text
  // without NUL, so no later message, JSON output or argv carries broken text. `label` names the
  // value ("\"task\"", "a key in a model").
  const std::string& text(const YAML::Node& node, const std::string& label) const {
    visit(node);
    const std::string& value = node.Scalar();
    charge(node, value.size());
    if (std::optional<size_t> at = bad_text_offset(value)) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(value[*at]));
      fail(node, label + (value[*at] == 0 ? " contains a NUL byte" : " is not valid UTF-8") +
                     " (byte " + byte + " at offset " + std::to_string(*at) +
                     " of the value): save the manifest as UTF-8 text");
    }
    return value;
  }

  // A string where a string is expected: quoted, tagged !!str, or plain text that YAML does not
  // read as a number, boolean or null (`task: 5` is the integer 5).
  void check_string_tag(const YAML::Node& node, std::string_view key) const {
    const std::string& tag = node.Tag();
    if (tag == "!" || tag == kStrTag) return;
    if (tag != "?") fail(node, show(key) + " must be a string, got " + describe(node));
    if (std::optional<std::string> meaning = non_string_meaning(node.Scalar())) {
      fail(node, show(key) + " must be a string, got " + *meaning +
                     " (quote it if you mean the text: \"" + node.Scalar() + "\")");
    }
  }

  Fields fields(const YAML::Node& node, std::string_view context, const Keys& allowed) const {
    visit(node);
    if (!node.IsMap()) fail(node, std::string(context) + " must be a map, got " + describe(node));
    Fields out{node, {}};
    for (auto it = node.begin(); it != node.end(); ++it) {
      YAML::Node key = it->first;
      if (!key.IsScalar()) {
        fail(key, "a key in " + std::string(context) + " must be a string, got " + describe(key));
      }
      const std::string& name = text(key, "a key in " + std::string(context));
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        fail(key, "unknown key " + show(name) + " in " + std::string(context) +
                      " (expected one of: " + join(allowed) + ")");
      }
      YAML::Node value = it->second;
      // An empty value's position is that of the next token, often on another line: point at
      // the key instead. No key of the schema takes an empty value.
      if (value.IsNull()) {
        fail(key, show(name) + " in " + std::string(context) +
                      " has no value (give one, or remove the key)");
      }
      if (!out.by_key.emplace(name, std::make_pair(key, value)).second) {
        fail(key, "duplicate key " + show(name) + " in " + std::string(context) +
                      " (already set at " + location(out.key_node(name)).to_string() + ")");
      }
    }
    return out;
  }

  const YAML::Node& required(const Fields& f, const std::string& key, std::string_view context,
                             std::string_view expected) const {
    const YAML::Node* value = f.value(key);
    if (value == nullptr) {
      fail(f.node, std::string(context) + " is missing the required key " + show(key) + " (" +
                       std::string(expected) + ")");
    }
    return *value;
  }

  std::string string(const YAML::Node& node, std::string_view key) const {
    if (!node.IsScalar()) {
      fail(node, show(key) + " must be a string, got " + describe(node));
    }
    const std::string& value = text(node, show(key));
    check_string_tag(node, key);
    if (value.empty()) fail(node, show(key) + " must not be empty");
    return value;
  }

  // A string of one of hub_names' grammars: `what` names it ("a Hub repo id"), `rule` says it.
  std::string string_of(const YAML::Node& node, std::string_view key,
                        bool (*accepts)(std::string_view), std::string_view what,
                        std::string_view rule) const {
    std::string value = string(node, key);
    if (!accepts(value)) {
      fail(node, std::string(key) + " " + show(value) + " is not " + std::string(what) + " (" +
                     std::string(rule) + "): check the value");
    }
    return value;
  }

  std::optional<std::string> optional_version(const Fields& f, const std::string& key) const {
    const YAML::Node* value = f.value(key);
    if (value == nullptr) return std::nullopt;
    return string_of(*value, key, hub_names::is_version, "a version", hub_names::kVersionRule);
  }

  std::optional<std::string> optional_string(const Fields& f, const std::string& key) const {
    const YAML::Node* value = f.value(key);
    if (value == nullptr) return std::nullopt;
    return string(*value, key);
  }

  // Plain integers only: a quoted "1" is a string. At most `most` (what no real model reaches,
  // `why` says so): a typo of 100000 cores is refused here, not at the compiler an hour later.
  std::int64_t positive(const YAML::Node& node, std::string_view key, std::int64_t most,
                        std::string_view why) const {
    std::int64_t number = positive(node, key);
    if (number > most) {
      fail(node, show(key) + " is " + std::to_string(number) + ", more than " +
                     std::to_string(most) + " (" + std::string(why) + "): check the value");
    }
    return number;
  }
  std::int64_t positive(const YAML::Node& node, std::string_view key) const {
    std::int64_t number = 0;
    bool parsed = false;
    // Plain (or !!int) only: a quoted "1" or a !!str 1 is a string.
    if (node.IsScalar() && (node.Tag() == "?" || node.Tag() == kIntTag)) {
      const std::string& digits = text(node, show(key));
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
      parsed = ec == std::errc() && end == digits.data() + digits.size();
    }
    if (!parsed || number <= 0) {
      fail(node, show(key) + " must be a positive integer, got " + describe(node));
    }
    return number;
  }

  // A plain YAML boolean: true/false (YAML 1.1's yes/no/on/off too, as PyYAML reads them); a
  // quoted "true" is a string and an error, as for integers.
  bool boolean(const YAML::Node& node, std::string_view key) const {
    static const std::set<std::string_view> kTrue = {"true", "True", "TRUE", "yes", "Yes",
                                                     "YES",  "on",   "On",   "ON"};
    static const std::set<std::string_view> kFalse = {"false", "False", "FALSE", "no", "No",
                                                      "NO",    "off",   "Off",   "OFF"};
    if (node.IsScalar() && (node.Tag() == "?" || node.Tag() == kBoolTag)) {
      const std::string& value = text(node, show(key));
      if (kTrue.contains(value)) return true;
      if (kFalse.contains(value)) return false;
    }
    fail(node, show(key) + " must be true or false, got " + describe(node));
  }

  std::vector<std::string> string_list(const YAML::Node& node, std::string_view key) const {
    if (!node.IsSequence()) {
      fail(node, show(key) + " must be a list of strings, got " + describe(node));
    }
    visit(node);
    std::vector<std::string> out;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) {
        visit(item);
        fail(item, "each item of " + show(key) + " must be a string, got " + describe(item));
      }
      out.push_back(string(item, key));
    }
    return out;
  }

  std::string instance_type(const YAML::Node& node) const {
    std::string value = string(node, "instance_type");
    if (!is_known_instance_type(value)) {
      fail(node, "unknown instance type " + show(value) +
                     " (expected one of: " + std::string(kInstanceTypes) + ")");
    }
    return value;
  }

 private:
  std::string file_;
  mutable size_t nodes_ = 0;
  mutable size_t scalar_bytes_ = 0;
};

bool is_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

CompileSpec read_compile(const YamlReader& r, const YAML::Node& node) {
  Fields f = r.fields(node, "compile", kCompileKeys);
  CompileSpec spec;
  const YAML::Node& command =
      r.required(f, "command", "compile", "the command template, e.g. \"optimum-cli export ...\"");
  spec.command = r.string(command, "command");
  try {
    check_command_template(spec.command);
  } catch (const Error& e) {
    r.fail(command, e.what());
  }
  if (const YAML::Node* env = f.value("env")) {
    r.visit(*env);
    if (!env->IsMap()) r.fail(*env, "\"env\" must be a map, got " + describe(*env));
    for (auto it = env->begin(); it != env->end(); ++it) {
      YAML::Node key = it->first;
      if (!key.IsScalar() || !is_env_name(r.text(key, "a key in compile.env"))) {
        r.fail(key, "invalid environment variable name " + describe(key) +
                        " in compile.env (letters, digits and _, not starting with a digit)");
      }
      YAML::Node value = it->second;
      if (value.IsNull())
        r.fail(key, "environment variable " + show(key.Scalar()) + " has no value");
      if (!value.IsScalar()) {
        r.fail(value, "environment variable " + show(key.Scalar()) + " must be a string, got " +
                          describe(value));
      }
      r.text(value, "environment variable " + show(key.Scalar()));
      if (!spec.env.emplace(key.Scalar(), value.Scalar()).second) {
        r.fail(key, "duplicate key " + show(key.Scalar()) + " in compile.env");
      }
    }
  }
  return spec;
}

// What a model gives each of its configurations.
struct ModelDefaults {
  std::string model_id;
  std::optional<std::string> revision;
  std::optional<std::string> model_type;
  std::optional<std::string> checkout;
  std::string task;
};

struct NamedAt {
  YAML::Node node;  // the name value, or the configuration when the name is derived
  bool derived;
};

Configuration read_configuration(const YamlReader& r, const YAML::Node& node,
                                 const ModelDefaults& model, const Manifest& manifest,
                                 NamedAt* named_at) {
  constexpr std::string_view kContext = "a configuration";
  Fields f = r.fields(node, kContext, kConfigurationKeys);
  Configuration c;
  c.model_id = model.model_id;
  c.revision = model.revision;
  c.model_type = model.model_type;
  c.checkout = model.checkout;
  c.task = model.task;
  c.source = r.location(node);
  c.batch_size = r.positive(r.required(f, "batch_size", kContext, "a positive integer"),
                            "batch_size", kMaxBatchSize, "the largest batch a compile takes");
  c.sequence_length =
      r.positive(r.required(f, "sequence_length", kContext, "a positive integer"),
                 "sequence_length", kMaxSequenceLength, "the longest context of any model");

  const YAML::Node* cores = f.value("num_cores");
  const YAML::Node* tp = f.value("tensor_parallel_size");
  if (cores == nullptr && tp == nullptr) {
    r.fail(node,
           "a configuration is missing the required key \"num_cores\" (or its alias "
           "\"tensor_parallel_size\"): a positive integer");
  }
  if (cores != nullptr) c.num_cores = r.positive(*cores, "num_cores", kMaxCores, kCoresWhy);
  if (tp != nullptr) {
    std::int64_t value = r.positive(*tp, "tensor_parallel_size", kMaxCores, kCoresWhy);
    if (cores != nullptr && value != c.num_cores) {
      r.fail(*tp, "\"tensor_parallel_size\" (" + std::to_string(value) + ") and \"num_cores\" (" +
                      std::to_string(c.num_cores) +
                      ") are the same setting with different values; give only one");
    }
    c.num_cores = value;
  }

  const YAML::Node& precision =
      r.required(f, "precision", kContext, "one of: " + std::string(kPrecisions));
  std::optional<std::string> normalized = normalize_precision(r.string(precision, "precision"));
  if (!normalized) {
    r.fail(precision, "unknown precision " + show(precision.Scalar()) +
                          " (expected one of: " + std::string(kPrecisions) + ")");
  }
  c.precision = *normalized;

  if (const YAML::Node* type = f.value("instance_type")) {
    c.instance_type = r.instance_type(*type);
  } else if (manifest.instance_type) {
    c.instance_type = *manifest.instance_type;
  } else {
    r.fail(node,
           "a configuration has no \"instance_type\" and the manifest sets no default "
           "(add instance_type: one of " +
               std::string(kInstanceTypes) +
               ", to the configuration or to the top of the manifest)");
  }

  c.compiler_flags = manifest.compiler_flags;
  for (const std::string& flag : c.compiler_flags) r.charge(node, flag.size());
  if (const YAML::Node* flags = f.value("compiler_flags")) {
    for (std::string& flag : r.string_list(*flags, "compiler_flags")) {
      c.compiler_flags.push_back(std::move(flag));
    }
  }

  if (const YAML::Node* name = f.value("name")) {
    c.name = r.string(*name, "name");
    if (!is_valid_name(c.name)) {
      r.fail(*name,
             "invalid configuration name " + show(c.name) +
                 " (start with a letter or digit, then letters, digits and . _ - + @ : only, at "
                 "most " +
                 std::to_string(kMaxNameLength) + " characters)");
    }
    *named_at = {*name, false};
  } else {
    c.name = default_name(c);
    if (c.name.size() > kMaxNameLength) {
      r.fail(node, "the configuration's default name (" + show(c.name) + ") is longer than " +
                       std::to_string(kMaxNameLength) + " characters: give it a name");
    }
    *named_at = {node, true};
  }
  return c;
}

// A Hub repo id; with a checkout, whose folder is the model, any other name too, as long as it
// cannot pass for an option or a placeholder where the compile command renders {model_id}.
std::string model_id(const YamlReader& r, const YAML::Node& node, bool has_checkout) {
  std::string id = r.string(node, "model_id");
  if (hub_names::is_repo_id(id)) return id;
  if (!has_checkout) {
    r.fail(node, "model_id " + show(id) + " is not a Hub repo id (" +
                     std::string(hub_names::kRepoIdRule) +
                     "): check the name, or give the local clone as checkout:");
  }
  bool controls = std::any_of(id.begin(), id.end(),
                              [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  if (id.front() == '-' || id.find_first_of("{}") != std::string::npos || controls) {
    r.fail(node, "model_id " + show(id) +
                     " can be neither an option (starting with '-') nor hold '{', '}' or control "
                     "characters: it is passed to the compile command; check the name");
  }
  return id;
}

void read_model(const YamlReader& r, const YAML::Node& node, Manifest* manifest,
                std::vector<NamedAt>* names) {
  constexpr std::string_view kContext = "a model";
  Fields f = r.fields(node, kContext, kModelKeys);
  ModelDefaults model;
  model.checkout = r.optional_string(f, "checkout");
  model.model_id = model_id(
      r, r.required(f, "model_id", kContext, "the Hub model id, e.g. meta-llama/Llama-3.1-8B"),
      model.checkout.has_value());
  if (const YAML::Node* revision = f.value("revision")) {
    model.revision = r.string_of(*revision, "revision", hub_names::is_revision, "a git revision",
                                 hub_names::kRevisionRule);
  }
  if (const YAML::Node* type = f.value("model_type")) {
    model.model_type = r.string_of(*type, "model_type", hub_names::is_identifier, "a model type",
                                   hub_names::kIdentifierRule);
  }
  if (model.checkout && model.revision) {
    r.fail(*f.value("checkout"),
           "a model has both \"revision\" and \"checkout\": the revision of a checkout is the "
           "commit it is at; give only one");
  }
  model.task = r.string_of(r.required(f, "task", kContext, "e.g. text-generation"), "task",
                           hub_names::is_identifier, "a task", hub_names::kIdentifierRule);
  const YAML::Node& list = r.required(f, "configurations", kContext, "a list of configurations");
  r.visit(list);
  if (!list.IsSequence()) {
    r.fail(list, "\"configurations\" must be a list of configurations, got " + describe(list));
  }
  if (list.size() == 0) r.fail(list, "\"configurations\" is empty (give at least one)");
  for (const YAML::Node& item : list) {
    NamedAt named_at;
    manifest->configurations.push_back(read_configuration(r, item, model, *manifest, &named_at));
    names->push_back(named_at);
  }
}

void check_unique_names(const YamlReader& r, const Manifest& manifest,
                        const std::vector<NamedAt>& names) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < manifest.configurations.size(); ++i) {
    const std::string& name = manifest.configurations[i].name;
    auto [it, inserted] = first.emplace(name, i);
    if (inserted) continue;
    std::string message = "duplicate configuration name " + show(name) + " (also used at " +
                          manifest.configurations[it->second].source.to_string() + "; ";
    message += names[i].derived ? "the name is derived from the fields: give each a \"name\")"
                                : "names must be unique)";
    r.fail(names[i].node, message);
  }
}

// Public keys are checked here, so a typo is named at its line rather than when a store is read.
void read_trust(const YamlReader& r, const Fields& f, Manifest& m) {
  if (const YAML::Node* keys = f.value("trusted_keys")) {
    m.trusted_keys = r.string_list(*keys, "trusted_keys");
    size_t i = 0;
    for (const YAML::Node& item : *keys) {
      try {
        trust::parse_public_key((*m.trusted_keys)[i++], "trusted_keys");
      } catch (const Error& e) {
        r.fail(item, e.what());
      }
    }
  }
  if (const YAML::Node* require = f.value("require_signatures")) {
    m.require_signatures = r.boolean(*require, "require_signatures");
  }
}

Manifest read_document(const YamlReader& r, const YAML::Node& root, const std::string& file) {
  constexpr std::string_view kContext = "the manifest";
  Fields f = r.fields(root, kContext, kTopKeys);
  Manifest m;
  m.path = file;
  if (const YAML::Node* repo = f.value("cache_repo")) {
    m.cache_repo = r.string(*repo, "cache_repo");
    try {
      store_name::parse_store_name(*m.cache_repo, "cache_repo");
    } catch (const Error& e) {
      r.fail(*repo, e.what());
    }
  }
  m.cache_dir = r.optional_string(f, "cache_dir");
  m.compiler_version = r.optional_version(f, "compiler_version");
  m.optimum_neuron_version = r.optional_version(f, "optimum_neuron_version");
  if (const YAML::Node* type = f.value("instance_type")) m.instance_type = r.instance_type(*type);
  if (const YAML::Node* flags = f.value("compiler_flags")) {
    m.compiler_flags = r.string_list(*flags, "compiler_flags");
  }
  if (const YAML::Node* compile = f.value("compile")) m.compile = read_compile(r, *compile);
  read_trust(r, f, m);

  const YAML::Node& models = r.required(f, "models", kContext, "a list of models");
  r.visit(models);
  if (!models.IsSequence()) r.fail(models, "\"models\" must be a list, got " + describe(models));
  if (models.size() == 0) r.fail(models, "\"models\" is empty (declare at least one model)");
  std::vector<NamedAt> names;
  for (const YAML::Node& model : models) read_model(r, model, &m, &names);
  check_unique_names(r, m, names);
  return m;
}

std::string read_text(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw input_error("manifest " + path.string() + " is a directory, not a file");
  }
  std::uintmax_t size = std::filesystem::file_size(path, ec);
  // A path that names nothing is the user's input, like a typo inside the file: exit 2.
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    throw input_error("manifest " + path.string() +
                      " does not exist: check the path (relative paths start in " +
                      std::filesystem::current_path(ec).string() + ")");
  }
  if (ec) throw operational_error("cannot read manifest " + path.string() + ": " + ec.message());
  if (size > kMaxManifestBytes) {
    throw input_error("manifest " + path.string() + " is " + std::to_string(size) +
                      " bytes; a manifest is at most 1 MiB (" + std::to_string(kMaxManifestBytes) +
                      " bytes): split it or shorten it");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    throw operational_error("cannot read manifest " + path.string() + ": " + std::strerror(errno));
  }
  return text.str();
}

}  // namespace

std::string SourceLocation::to_string() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const Configuration* Manifest::find(std::string_view name) const {
  for (const Configuration& c : configurations) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::optional<std::string> normalize_precision(std::string_view precision) {
  if (precision == "bf16" || precision == "bfloat16") return "bf16";
  if (precision == "fp16" || precision == "float16") return "fp16";
  if (precision == "fp32" || precision == "float32") return "fp32";
  return std::nullopt;
}

bool is_known_instance_type(std::string_view instance_type) {
  return instance_type == "trn1" || instance_type == "trn1n" || instance_type == "trn2" ||
         instance_type == "inf2";
}

namespace {
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("._-+@:").find(c) != std::string_view::npos;
}
}  // namespace

bool is_valid_name(std::string_view name) {
  // Names become file names and command arguments: no ".", "..", hidden files or options, and
  // short enough for a file name with a suffix (NAME_MAX is 255 bytes).
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!std::isalnum(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), is_name_char);
}

std::string default_name(const Configuration& c) {
  std::string model;
  for (char ch : c.model_id) {
    if (ch == '/') {
      model += "--";
    } else {
      model += is_name_char(ch) ? ch : '_';
    }
  }
  return model + "-bs" + std::to_string(c.batch_size) + "-seq" + std::to_string(c.sequence_length) +
         "-tp" + std::to_string(c.num_cores) + "-" + c.precision + "-" + c.instance_type;
}

Manifest parse_yaml(std::string_view text, const std::string& file) {
  YamlReader r(file);
  if (text.size() > kMaxManifestBytes) {
    throw input_error(file + ": the manifest is " + std::to_string(text.size()) +
                      " bytes; a manifest is at most 1 MiB (" + std::to_string(kMaxManifestBytes) +
                      " bytes): split it or shorten it");
  }
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    throw input_error(r.where(e.mark) + "invalid YAML: " + e.msg);
  }
  if (documents.empty() || documents[0].IsNull()) {
    throw input_error(file +
                      ":1:1: the manifest is empty (expected a map with at least "
                      "\"models\")");
  }
  if (documents.size() > 1) {
    r.fail(documents[1], "a manifest is one YAML document; remove the second one (after ---)");
  }
  try {
    return read_document(r, documents[0], file);
  } catch (const YAML::Exception& e) {
    // Not expected: every access is checked first. Still an input problem, never a crash.
    throw input_error(r.where(e.mark) + "unexpected manifest content: " + e.msg);
  }
}

Manifest load_manifest(const std::filesystem::path& path,
                       const std::optional<std::string>& default_instance_type) {
  std::string extension = path.extension().string();
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (extension != ".yaml" && extension != ".yml" && extension != ".json") {
    throw input_error("manifest " + path.string() +
                      ": unknown format (expected a .yaml/.yml manifest or an "
                      "inference-cache-config .json file)");
  }
  std::string text = read_text(path);
  Manifest manifest = extension == ".json"
                          ? parse_inference_cache_config(text, path.string(), default_instance_type)
                          : parse_yaml(text, path.string());
  manifest.text_sha256 = sha256_hex(text);
  return manifest;
}

}  // namespace neuron_cache::manifest
