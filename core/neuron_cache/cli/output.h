// Printing for the commands: JSON for scripts, aligned text for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "neuron_cache/format/layout.h"

namespace neuron_cache::cli {

void print_json(const nlohmann::json& value);
std::string upper_state(layout::EntryState state);  // "SUCCESS", "FAILED", ...
// Prints "neuron-cache: warning: ..." on stderr.
void warn(const std::string& message);

}  // namespace neuron_cache::cli
