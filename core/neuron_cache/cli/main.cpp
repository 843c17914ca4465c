// neuron-cache: reuse compiled AWS Neuron models (NEFFs) across machines and pipelines.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/sys/interrupt.h"

namespace {

constexpr int kExitOperational = 1;
constexpr int kExitUsage = 2;

// Letters to change, add or drop to turn `a` into `b` (Levenshtein distance).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// When the parse stopped because no command was recognised, what to say about the word given in
// its place: CLI11 only knows "A subcommand is required", which hides the typo.
std::optional<std::string> unknown_command(const CLI::App& app) {
  if (!app.get_subcommands().empty()) return std::nullopt;
  std::vector<std::string> rest = app.remaining();
  auto word = std::find_if(rest.begin(), rest.end(),
                           [](const auto& a) { return !a.empty() && a[0] != '-'; });
  if (word == rest.end()) return std::nullopt;
  std::string text = "unknown command \"" + neuron_cache::printable(*word) + "\"";
  std::string closest;
  size_t best = 3;  // farther than 2 edits is another word, not a typo
  for (const CLI::App* command : app.get_subcommands({})) {
    size_t distance = edit_distance(*word, command->get_name());
    if (distance < best) best = distance, closest = command->get_name();
  }
  if (!closest.empty()) text += "; did you mean `neuron-cache " + closest + "`?";
  return text + " (`neuron-cache --help` lists the commands)";
}

int run(int argc, char** argv) {
  using namespace neuron_cache;
  cli::Context context(config::Environment::from_process());
  CLI::App app{
      "neuron-cache: fetch, inspect and maintain the AWS Neuron compile cache shared with "
      "optimum-neuron.\nExit codes: 0 success, 1 operational failure, 2 usage or input error, 3 "
      "a gate failed (plan --fail-on-miss)."};
  app.require_subcommand(1);
  app.fallthrough();  // global options such as --compiler-version also work after the command
  app.set_version_flag("--version", neuron_cache::pipeline::tool_version());
  auto& overrides = context.overrides();
  app.add_option_function<std::string>(
         "--compiler-version", [&](const std::string& v) { overrides.compiler_version = v; },
         "neuronx-cc version, e.g. 2.21.33363.0+82129205 (default: `neuronx-cc --version`)")
      ->configurable(false);
  app.add_flag_function(
         "--verbose,-v", [&](int64_t) { overrides.verbose = true; },
         "Log every request (method, URL without credentials, status, bytes, time) and every "
         "decision (hit, miss, skip and why) to stderr; also NEURON_CACHE_LOG=debug")
      ->configurable(false);
  cli::register_config(app, context);
  cli::register_status(app, context);
  cli::register_cleanup(app, context);
  cli::register_inspect(app, context);
  cli::register_repo_commands(app, context);
  cli::register_lookup(app, context);
  cli::register_fetch(app, context);
  cli::register_synchronize(app, context);
  cli::register_du(app, context);
  cli::register_gc(app, context);
  cli::register_pipeline(app, context);
  cli::register_lock(app, context);
  cli::register_key(app, context);
  cli::register_verify(app, context);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (auto unknown = unknown_command(app)) {
      std::cerr << "neuron-cache: error: " << *unknown << "\n";
      return kExitUsage;
    }
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  neuron_cache::sys::report_interrupts("neuron-cache", neuron_cache::sys::kInterruptedLine);
  neuron_cache::sys::survive_file_size_limit();
  neuron_cache::log::set_before_line(neuron_cache::report::ProgressDisplay::clear_line);
  try {
    return run(argc, argv);
  } catch (const neuron_cache::cli::CommandExit& command) {
    return command.code;  // the command said why itself
  } catch (const neuron_cache::cli::GateFailed& gate) {
    std::cerr << "neuron-cache: " << neuron_cache::config::redact(gate.message) << "\n";
    return neuron_cache::cli::kExitGate;
  } catch (const neuron_cache::Error& error) {
    std::cerr << "neuron-cache: error: " << neuron_cache::config::redact(error.what()) << "\n";
    return error.kind() == neuron_cache::ErrorKind::Input ? kExitUsage : kExitOperational;
  } catch (const std::exception& error) {
    // Not the project's Error (a library's exception): one line and exit 1, never an abort.
    std::cerr << "neuron-cache: error: " << neuron_cache::config::redact(error.what()) << "\n";
    return kExitOperational;
  } catch (...) {
    std::cerr << "neuron-cache: error: an unexpected failure stopped the command\n";
    return kExitOperational;
  }
}
