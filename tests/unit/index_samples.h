// Sample key inputs and artifact-index entry (one MODULE_ folder, one registry file) for the
// tests of the key and the index format, and the seeds the fuzz test mutates.
#pragma once

#include <string>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/cache_key.h"

namespace neuron_cache::testing {

// A Llama configuration as optimum-neuron keys it (batch 4, sequence 4096, 8 cores, bf16, trn1).
inline cache_key::KeyInputs sample_key_inputs(const std::string& model_id) {
  cache_key::KeyInputs in;
  in.model_id = model_id;
  in.model_type = "llama";
  in.task = "text-generation";
  in.precision = "bf16";
  in.batch_size = 4;
  in.sequence_length = 4096;
  in.compiler_version = "2.21.33363.0+82129205";
  in.num_cores = 8;
  in.target = "trn1";
  in.flags = {"--optlevel=2", "--enable-fast-loading-neuron-binaries"};
  in.checkpoint_revision = "9ab9e76e2b09f9f29ea2d56aa5bd139e4445c59e";
  in.optimum_neuron_version = "0.4.5";
  return in;
}

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
