// Printing for the commands: JSON for scripts, aligned text for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "neuron_cache/format/layout.h"

namespace neuron_cache::cli {

// The format of every command's --json output (`format_version`, added to an object that has
// none: the run reports carry report::kReportFormatVersion). Raised when a key goes away or
// changes meaning; new keys may come within a version, so readers must ignore keys they do not
// know.
inline constexpr int kJsonFormatVersion = 1;
void print_json(nlohmann::json value);
std::string upper_state(layout::EntryState state);  // "SUCCESS", "FAILED", ...
// Prints "neuron-cache: warning: ..." on stderr.
void warn(const std::string& message);

// A gate that failed after the command printed its result (plan --fail-on-miss): main prints
// "neuron-cache: <message>" and exits with kExitGate, told apart from a failure (1) or bad
// input (2), so CI can tell "would compile" from "could not tell".
inline constexpr int kExitGate = 3;
struct GateFailed {
  std::string message;
};

// `run -- CMD` whose command failed: main returns the command's exit status after every object
// of the run is destroyed (its threads joined, its leases ended), never std::exit.
struct CommandExit {
  int code = 1;
};

}  // namespace neuron_cache::cli
