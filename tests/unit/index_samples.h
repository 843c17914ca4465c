// A sample artifact-index entry (one MODULE_ folder, one registry file) for the tests of the
// index format: its round trip, and the seeds the fuzz test mutates.
#pragma once

#include <string>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"

namespace neuron_cache::testing {

inline artifact_index::Entry sample_index_entry(const cache_key::KeyInputs& inputs,
                                                const std::string& configuration) {
  artifact_index::Entry entry;
  entry.inputs = inputs;
  entry.key = cache_key::key_of(entry.inputs);
  entry.configuration = configuration;
  entry.modules.push_back(
      {"MODULE_0123456789abcdef0123+d7517139",
       {{"model.neff", 123, std::string(64, 'a')}, {"model.done", 0, std::string(64, 'b')}}});
  entry.registry.push_back(
      {"0_REGISTRY/0.4.5/llama/meta-llama/Llama-3.1-8B/x.json", 10, std::string(64, 'c')});
  entry.compile_seconds = 1834.5;
  entry.tool = "neuron-cache 0.1.0";
  entry.created_at = "2026-11-29T18:00:00Z";
  return entry;
}

}  // namespace neuron_cache::testing
