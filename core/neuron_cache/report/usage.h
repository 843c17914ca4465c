// What a cache store holds (remote/store_usage.h), for machines and for people: the JSON of
// `neuron-cache du --json` (keys in docs/gc.md, "du") and the Markdown section the GitHub Action
// adds to the job summary (input store-usage).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "neuron_cache/maintenance/store_usage.h"

namespace neuron_cache::report {

// {"count", "bytes"} of a tally of folders (what `du` and `gc` print for MODULE folders).
nlohmann::json count_json(const maintenance::Tally& tally);
// Every section; `top_models` models at most (the most referenced bytes first), with
// "models_total" telling how many there are.
nlohmann::json usage_json(const maintenance::StoreUsage& usage, size_t top_models);
// "### Cache store usage", the total and one table row per compiler version.
std::string usage_markdown(const maintenance::StoreUsage& usage);
// The section when the store could not be measured: one warning line, `why` redacted.
std::string usage_markdown_failure(const std::string& store, const std::string& why);

}  // namespace neuron_cache::report
