// neuron-cache: reuse compiled AWS Neuron models (NEFFs) across machines and pipelines.
#include <CLI/CLI.hpp>
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/pipeline/pipeline.h"

namespace {

constexpr int kExitOperational = 1;
constexpr int kExitUsage = 2;

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
  cli::register_config(app, context);
  cli::register_status(app, context);
  cli::register_cleanup(app, context);
  cli::register_inspect(app, context);
  cli::register_repo_commands(app, context);
  cli::register_lookup(app, context);
  cli::register_fetch(app, context);
  cli::register_synchronize(app, context);
  cli::register_pipeline(app, context);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
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
