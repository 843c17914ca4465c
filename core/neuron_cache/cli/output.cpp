#include "neuron_cache/cli/output.h"

#include <cctype>
#include <iostream>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/report/progress.h"

namespace neuron_cache::cli {

void print_json(nlohmann::json value) {
  if (value.is_object() && !value.contains("format_version"))
    value["format_version"] = kJsonFormatVersion;
  // Replace invalid UTF-8 instead of throwing: paths on disk need not be UTF-8.
  std::cout << config::redact(value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace))
            << "\n";
}

std::string upper_state(layout::EntryState state) {
  std::string name(layout::state_name(state));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void warn(const std::string& message) {
  report::ProgressDisplay::clear_line();
  std::cerr << "neuron-cache: warning: " << config::redact(message) << "\n";
}

}  // namespace neuron_cache::cli
