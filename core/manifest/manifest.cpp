#include "manifest/manifest.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.h"
#include "manifest/command_template.h"

namespace neuron_cache::manifest {
namespace {

using Keys = std::vector<std::string_view>;

const Keys kTopKeys = {
    "cache_repo",    "cache_dir",      "compiler_version", "optimum_neuron_version",
    "instance_type", "compiler_flags", "compile",          "models"};
const Keys kCompileKeys = {"command", "env"};
const Keys kModelKeys = {"model_id", "revision", "model_type",
                         "checkout", "task",     "configurations"};
const Keys kConfigurationKeys = {"name",          "batch_size",           "sequence_length",
                                 "num_cores",     "tensor_parallel_size", "precision",
                                 "instance_type", "compiler_flags"};
constexpr std::string_view kInstanceTypes = "trn1, trn1n, trn2, inf2";
constexpr std::string_view kPrecisions = "bf16, fp16, fp32 (or bfloat16, float16, float32)";
// A manifest is a short hand-written file; anything this big is a mistake, not a manifest.
constexpr std::uintmax_t kMaxManifestBytes = 16 << 20;

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
  // yaml-cpp tags quoted scalars "!" and plain ones "?".
  if (node.Tag() == "!") return "the quoted string " + show(node.Scalar());
  return show(node.Scalar());
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

  Fields fields(const YAML::Node& node, std::string_view context, const Keys& allowed) const {
    if (!node.IsMap()) fail(node, std::string(context) + " must be a map, got " + describe(node));
    Fields out{node, {}};
    for (auto it = node.begin(); it != node.end(); ++it) {
      YAML::Node key = it->first;
      if (!key.IsScalar()) {
        fail(key, "a key in " + std::string(context) + " must be a string, got " + describe(key));
      }
      const std::string& name = key.Scalar();
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
    if (node.Scalar().empty()) fail(node, show(key) + " must not be empty");
    return node.Scalar();
  }

  std::optional<std::string> optional_string(const Fields& f, const std::string& key) const {
    const YAML::Node* value = f.value(key);
    if (value == nullptr) return std::nullopt;
    return string(*value, key);
  }

  // Plain integers only: a quoted "1" is a string.
  std::int64_t positive(const YAML::Node& node, std::string_view key) const {
    std::int64_t number = 0;
    bool parsed = false;
    if (node.IsScalar() && node.Tag() != "!") {
      const std::string& text = node.Scalar();
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
      parsed = ec == std::errc() && end == text.data() + text.size();
    }
    if (!parsed || number <= 0) {
      fail(node, show(key) + " must be a positive integer, got " + describe(node));
    }
    return number;
  }

  std::vector<std::string> string_list(const YAML::Node& node, std::string_view key) const {
    if (!node.IsSequence()) {
      fail(node, show(key) + " must be a list of strings, got " + describe(node));
    }
    std::vector<std::string> out;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) {
        fail(item, "each item of " + show(key) + " must be a string, got " + describe(item));
      }
      out.push_back(item.Scalar());
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
    if (!env->IsMap()) r.fail(*env, "\"env\" must be a map, got " + describe(*env));
    for (auto it = env->begin(); it != env->end(); ++it) {
      YAML::Node key = it->first;
      if (!key.IsScalar() || !is_env_name(key.Scalar())) {
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
  c.batch_size =
      r.positive(r.required(f, "batch_size", kContext, "a positive integer"), "batch_size");
  c.sequence_length = r.positive(r.required(f, "sequence_length", kContext, "a positive integer"),
                                 "sequence_length");

  const YAML::Node* cores = f.value("num_cores");
  const YAML::Node* tp = f.value("tensor_parallel_size");
  if (cores == nullptr && tp == nullptr) {
    r.fail(node,
           "a configuration is missing the required key \"num_cores\" (or its alias "
           "\"tensor_parallel_size\"): a positive integer");
  }
  if (cores != nullptr) c.num_cores = r.positive(*cores, "num_cores");
  if (tp != nullptr) {
    std::int64_t value = r.positive(*tp, "tensor_parallel_size");
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
                 " (start with a letter or digit, then letters, digits and . _ - + @ : only)");
    }
    *named_at = {*name, false};
  } else {
    c.name = default_name(c);
    *named_at = {node, true};
  }
  return c;
}

void read_model(const YamlReader& r, const YAML::Node& node, Manifest* manifest,
                std::vector<NamedAt>* names) {
  constexpr std::string_view kContext = "a model";
  Fields f = r.fields(node, kContext, kModelKeys);
  ModelDefaults model;
  model.model_id = r.string(
      r.required(f, "model_id", kContext, "the Hub model id, e.g. meta-llama/Llama-3.1-8B"),
      "model_id");
  model.revision = r.optional_string(f, "revision");
  model.model_type = r.optional_string(f, "model_type");
  model.checkout = r.optional_string(f, "checkout");
  if (model.checkout && model.revision) {
    r.fail(*f.value("checkout"),
           "a model has both \"revision\" and \"checkout\": the revision of a checkout is the "
           "commit it is at; give only one");
  }
  model.task = r.string(r.required(f, "task", kContext, "e.g. text-generation"), "task");
  const YAML::Node& list = r.required(f, "configurations", kContext, "a list of configurations");
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

Manifest read_document(const YamlReader& r, const YAML::Node& root, const std::string& file) {
  constexpr std::string_view kContext = "the manifest";
  Fields f = r.fields(root, kContext, kTopKeys);
  Manifest m;
  m.path = file;
  m.cache_repo = r.optional_string(f, "cache_repo");
  m.cache_dir = r.optional_string(f, "cache_dir");
  m.compiler_version = r.optional_string(f, "compiler_version");
  m.optimum_neuron_version = r.optional_string(f, "optimum_neuron_version");
  if (const YAML::Node* type = f.value("instance_type")) m.instance_type = r.instance_type(*type);
  if (const YAML::Node* flags = f.value("compiler_flags")) {
    m.compiler_flags = r.string_list(*flags, "compiler_flags");
  }
  if (const YAML::Node* compile = f.value("compile")) m.compile = read_compile(r, *compile);

  const YAML::Node& models = r.required(f, "models", kContext, "a list of models");
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
  if (ec) throw operational_error("cannot read manifest " + path.string() + ": " + ec.message());
  if (size > kMaxManifestBytes) {
    throw input_error("manifest " + path.string() + " is " + std::to_string(size) +
                      " bytes; a manifest is at most 16 MiB");
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
  // Names become file names and command arguments: no ".", "..", hidden files or options.
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name.front()))) return false;
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
  if (extension == ".json") {
    return parse_inference_cache_config(text, path.string(), default_instance_type);
  }
  return parse_yaml(text, path.string());
}

}  // namespace neuron_cache::manifest
