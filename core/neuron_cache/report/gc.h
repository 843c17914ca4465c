// What `neuron-cache gc` found and did (remote/gc.h), for machines: the JSON of `gc --json`
// (keys in docs/gc.md, "gc").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "neuron_cache/maintenance/gc.h"

namespace neuron_cache::report {

nlohmann::json gc_json(const maintenance::GcPlan& plan);
// "### neuron-cache gc": what was (or would be) removed and kept, for the Action's job summary.
std::string gc_markdown(const maintenance::GcPlan& plan);

}  // namespace neuron_cache::report
