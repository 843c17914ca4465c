// `neuron-cache inspect`: understand a key or a miss. A registry entry gives its canonical text,
// entry hash and arch digest; --flags gives the flags key; a MODULE_ folder gives its state.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/compile_flags.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/pipeline/pipeline.h"

namespace neuron_cache::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string target;
  std::optional<std::string> flags;
  bool json = false;
  bool canonical = false;
  std::string manifest;
  std::vector<std::string> configs;
};

// The cache key of each declared configuration, with the inputs it was computed from.
void inspect_keys(Context& context, const Options& options) {
  pipeline::Options pipeline_options;
  pipeline_options.manifest = options.manifest;
  pipeline_options.configs = options.configs;
  pipeline::Pipeline pipeline(context.settings_with_compiler(), context.remotes(),
                              pipeline_options);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& target : pipeline.targets()) {
    nlohmann::json inputs = cache_key::to_json(target.inputs);
    if (options.json) {
      out.push_back({{"name", target.configuration.name}, {"key", target.key}, {"inputs", inputs}});
    } else {
      std::cout << target.configuration.name << "\nkey: " << target.key
                << "\ninputs (sha256 of this JSON, compact and sorted, gives the key):\n"
                << pyjson::dumps(inputs, 2) << "\n\n";
    }
  }
  if (options.json) print_json(out);
}

void inspect_flags(const std::string& flags_text, bool json) {
  std::vector<std::string> flags = parse_compile_flags_json(flags_text);
  std::string text = compile_flags_json(flags);
  std::string legacy = legacy_compile_flags_txt(flags);
  if (json) {
    print_json({{"compile_flags_json", text},
                {"flags_key", flags_key(text)},
                {"legacy_compile_flags_txt", legacy},
                {"legacy_flags_key", flags_key(legacy)}});
    return;
  }
  std::cout << "compile_flags.json: " << text << "\nflags key: " << flags_key(text)
            << "  (folder MODULE_<graph key>+" << flags_key(text) << ")\n"
            << "legacy compile_flags.txt: " << legacy << "\nlegacy flags key: " << flags_key(legacy)
            << "\n";
}

std::string read_input(const std::string& target) {
  if (target == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::error_code error;
  if (!fs::is_regular_file(target, error)) {
    throw input_error(target + " is neither a registry entry file, a MODULE_ folder, nor '-'");
  }
  std::ifstream file(target, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// optimum-neuron hashes a multi-model entry's digest from the raw config.json files of the
// original model's components (white-listed keys dropped, vae ones left out), which the entry does
// not carry: a digest of the entry would match no registry folder.
constexpr const char* kMultiModelDigestReason =
    "a MultiModelCacheEntry (diffusion pipeline) is filed under the digest of the original "
    "model's component config.json files, which the entry does not carry: it cannot be computed "
    "from the entry";

void print_entry_text(const std::string& text, const std::string& hash,
                      const std::optional<std::string>& digest) {
  std::cout << text << "\n\nentry hash: " << hash << "\n";
  if (!digest) {
    std::cout << "arch digest: unknown (" << kMultiModelDigestReason
              << ")\nregistry file: 0_REGISTRY/<optimum-neuron version>/<arch digest of the "
                 "original model>/"
              << hash << ".json\n";
    return;
  }
  std::cout << "arch digest: " << *digest << "\nregistry file: 0_REGISTRY/<optimum-neuron version>/"
            << *digest << "/" << hash << ".json\n";
}

void inspect_entry(const std::string& target, bool json, bool canonical) {
  registry::Json entry = pyjson::parse(read_input(target));
  if (entry.is_object() && !entry.contains("_entry_class")) {
    throw input_error(
        "this JSON has no \"_entry_class\": it is not a current registry entry but a text written "
        "by optimum-neuron < 0.2.0 (or not an entry at all); its file name would be the SHA-512 "
        "prefix of its exact bytes, which `neuron-cache status` verifies");
  }
  std::string text = registry::serialize(entry);
  if (canonical) {
    std::cout << text;  // exactly the registry file bytes: no trailing newline
    return;
  }
  std::string hash = registry::entry_hash(text);
  std::optional<std::string> digest;
  if (entry["_entry_class"] != registry::kMultiModel) digest = registry::arch_digest(entry);
  if (json) {
    nlohmann::json out = {{"serialized", text}, {"entry_hash", hash}, {"arch_digest", nullptr}};
    if (digest) {
      out["arch_digest"] = *digest;
    } else {
      out["arch_digest_reason"] = kMultiModelDigestReason;
    }
    print_json(out);
    return;
  }
  print_entry_text(text, hash, digest);
}

nlohmann::json module_json(const local::ModuleEntry& m) {
  return {{"compiler_dir", m.compiler_dir},
          {"name", m.name},
          {"graph_key", m.module.graph_key},
          {"flags_key", m.module.flags_key},
          {"state", layout::state_name(m.state)},
          {"reason", layout::explain(m.state, m.files)},
          {"files", m.file_names},
          {"size_bytes", m.size_bytes},
          {"flags_file", m.flags_file},
          {"flags_file_key", m.flags_file_key},
          {"untrusted_links", m.untrusted_links}};
}

void print_module(const local::ModuleEntry& m) {
  std::cout << m.name << " in " << m.compiler_dir << "\n  graph key: " << m.module.graph_key
            << "\n  flags key: "
            << (m.module.flags_key.empty() ? "(none: a traced export folder)" : m.module.flags_key)
            << "\n";
  if (!m.flags_file.empty()) {
    bool match = m.flags_file_key == m.module.flags_key;
    std::cout << "  " << m.flags_file << " hashes to " << m.flags_file_key
              << (match ? " (matches the folder name)" : " (does NOT match the folder name)")
              << "\n";
  }
  std::cout << "  state: " << upper_state(m.state) << ": " << layout::explain(m.state, m.files)
            << "\n  size: " << m.size_bytes << " bytes\n  files:";
  for (const auto& name : m.file_names) std::cout << " " << name;
  std::cout << "\n";
  for (const auto& link : m.untrusted_links) {
    warn(link + " is a symlink to a place outside the cache: ignored");
  }
}

void inspect_module(Context& context, const fs::path& dir, bool json) {
  fs::path path = fs::absolute(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  if (!path.filename().string().starts_with(layout::kModulePrefix)) {
    throw input_error(path.string() +
                      " is not a MODULE_ folder: give a MODULE_<key> folder, or "
                      "use `neuron-cache status` for a whole cache");
  }
  local::LocalCache cache(path.parent_path().parent_path(),
                          {context.settings().hf_hub_cache.value});
  sys::SafeDir parent = sys::SafeDir::open(path.parent_path());
  local::ModuleEntry module = cache.inspect_module(parent, path.filename().string(), true);
  if (json) {
    print_json(module_json(module));
  } else {
    print_module(module);
  }
}

void inspect(Context& context, const Options& options) {
  if (!options.manifest.empty()) {
    inspect_keys(context, options);
    return;
  }
  if (options.flags) {
    inspect_flags(*options.flags, options.json);
    return;
  }
  if (options.target.empty()) {
    throw input_error(
        "give a registry entry file, '-' for standard input, a MODULE_ folder, or "
        "--flags '<json list>'");
  }
  std::error_code error;
  if (fs::is_directory(options.target, error)) {
    inspect_module(context, options.target, options.json);
  } else {
    inspect_entry(options.target, options.json, options.canonical);
  }
}

}  // namespace

void register_inspect(CLI::App& app, Context& context) {
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Explain a registry entry (canonical text, entry hash, arch digest), a flags list "
      "(flags key) or a MODULE_ folder (state and why)");
  auto options = std::make_shared<Options>();
  cmd->add_option("target", options->target,
                  "A registry entry JSON file, '-' for standard input, or a MODULE_ folder");
  cmd->add_option_function<std::string>(
      "--flags", [options](const std::string& v) { options->flags = v; },
      "A JSON list of compiler flags, e.g. '[\"--target=trn1\"]'");
  cmd->add_option("--manifest", options->manifest,
                  "Print the cache key and key inputs of the manifest's configurations");
  cmd->add_option("--config", options->configs, "With --manifest: only this configuration");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->add_flag("--canonical", options->canonical,
                "Print only the registry file text of an entry (no trailing newline)");
  cmd->callback([&context, options] { inspect(context, *options); });
}

}  // namespace neuron_cache::cli
