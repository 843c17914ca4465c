// `neuron-cache config show`: every setting with where it came from, like `ccache -p`.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/storage/s3_store.h"

namespace neuron_cache::cli {
namespace {

// How a value is written in JSON: its text, a number, or a boolean (scripts compare them as such).
enum class Type { Text, Number, Flag };

struct Row {
  std::string key;
  config::Setting setting;
  Type type = Type::Text;
};

// A number or flag setting as JSON; an unset one (the built-in default applies) is null.
nlohmann::json typed(const Row& row) {
  const std::string& value = row.setting.value;
  if (row.type == Type::Text) return value;
  if (value.empty()) return nullptr;
  if (row.type == Type::Flag) return value == "true" || value == "1";
  bool digits = value.find_first_not_of("0123456789") == std::string::npos && value.size() < 19;
  return digits ? nlohmann::json(std::stoull(value)) : nlohmann::json(value);
}

std::vector<Row> rows(const config::Settings& s) {
  config::Setting token = s.token;
  token.value = config::mask_token(token.value);
  config::Setting keys = s.trusted_keys;  // one key per line: one line here
  std::replace(keys.value.begin(), keys.value.end(), '\n', ',');
  return {
      {"cache_dir", s.cache_dir},
      {"cache_repo", s.cache_repo},
      {"token", token},
      {"endpoint", s.endpoint},
      {"offline", s.offline_origin, Type::Flag},
      {"store_offline", s.store_offline_origin, Type::Flag},
      {"compiler_version", s.compiler_version},
      {"installed_compiler", s.installed_compiler},
      {"hf_home", s.hf_home},
      {"hf_hub_cache", s.hf_hub_cache},
      {"custom_cache_file", s.custom_cache_file},
      {"neuron_cc_flags", s.cc_flags},
      {"seed", s.seeding_origin, Type::Flag},
      {"timeout_ms", s.timeout_ms, Type::Number},
      {"retry_base_ms", s.retry_base_ms, Type::Number},
      {"ssl_cert_file", s.ssl_cert_file, Type::Text},
      {"ssl_cert_dir", s.ssl_cert_dir, Type::Text},
      {"s3_recheck_ms", s.s3_recheck_ms, Type::Number},
      {"s3_sse", s.s3_sse},
      {"s3_sse_kms_key_id", s.s3_sse_kms_key_id},
      {"progress", s.progress_origin, Type::Flag},
      {"progress_interval_ms", s.progress_interval_ms, Type::Number},
      {"heartbeat_seconds", s.heartbeat_seconds, Type::Number},
      {"lease_seconds", s.lease_seconds, Type::Number},
      {"lease_poll_ms", s.lease_poll_ms, Type::Number},
      {"runner_name", s.runner_name, Type::Text},
      {"max_size", s.max_size},
      {"trusted_keys", keys},
      {"require_signatures", s.require_signatures_origin, Type::Flag},
      {"signing_key", s.signing_key},
      {"debug_log", s.debug_log_origin, Type::Flag},
  };
}

// How an S3 store is reached, when the cache repo is one: the credentials' source and expiry
// (fetched now, as a run would), the region and the endpoint; never a value.
std::optional<std::string> s3_access(const config::Settings& settings) {
  if (!settings.cache_repo.value.starts_with("s3://")) return std::nullopt;
  try {
    return storage::S3Store::open(settings.cache_repo.value, settings)->describe_access();
  } catch (const Error& error) {
    return std::string("error: ") + error.what() + "\n";
  }
}

void show(const config::Settings& settings, bool json) {
  std::optional<std::string> s3 = s3_access(settings);
  if (json) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& row : rows(settings)) {
      out[row.key] = {{"value", typed(row)}, {"origin", row.setting.origin}};
    }
    if (s3) out["s3_access"] = *s3;
    out["cache_dir"]["is_s3"] = settings.cache_dir_is_s3;
    out["warnings"] = settings.warnings;
    print_json(out);
    return;
  }
  for (const auto& row : rows(settings)) {
    std::string value = row.setting.value.empty() ? "(none)" : row.setting.value;
    std::cout << "(" << row.setting.origin << ") " << row.key << " = " << value << "\n";
  }
  if (s3) {
    std::istringstream lines(*s3);
    for (std::string line; std::getline(lines, line);) std::cout << "s3 " << line << "\n";
  }
  if (settings.cache_dir_is_s3) {
    std::cout
        << "note: cache_dir is an S3 URL, not a local path; local commands need --cache-dir\n";
  }
  for (const auto& warning : settings.warnings) warn(warning);
}

}  // namespace

void register_config(CLI::App& app, Context& context) {
  CLI::App* config = app.add_subcommand("config", "Show the configuration");
  config->require_subcommand(1);
  CLI::App* show_cmd = config->add_subcommand(
      "show", "Print every setting and its origin (option, environment variable, file, default)");
  auto json = std::make_shared<bool>(false);
  show_cmd->add_flag("--json", *json, "Print JSON for scripts");
  show_cmd->add_option_function<std::string>(
      "--cache-dir", [&context](const std::string& v) { context.overrides().cache_dir = v; },
      "Local cache root to report as the explicit option");
  show_cmd->add_option_function<std::string>(
      "--repo", [&context](const std::string& v) { context.overrides().cache_repo = v; },
      "Hub cache repo to report as the explicit option");
  auto manifest = std::make_shared<std::string>();
  show_cmd->add_option("--manifest", *manifest,
                       "Add this manifest's layer (cache_repo, cache_dir, compiler_version), as "
                       "plan, ci and the Action do");
  show_cmd->callback([&context, json, manifest] {
    const config::Settings& settings = context.settings_with_compiler();
    if (manifest->empty()) return show(settings, *json);
    show(settings.with_manifest(
             pipeline::manifest_layer(manifest::load_manifest(*manifest), *manifest)),
         *json);
  });
}

}  // namespace neuron_cache::cli
