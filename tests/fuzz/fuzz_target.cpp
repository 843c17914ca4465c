// A libFuzzer target of one reader of untrusted text (chosen by NEURON_CACHE_FUZZ_READER when
// compiled): the YAML manifest reader (0), the inference-cache-config reader (1), the index
// parser (2) or the registry parser (3). A reader may accept the input or throw the project's
// Error; anything else (another exception, a crash, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/manifest/manifest.h"

namespace {

void read(const std::string& text) {
  using namespace neuron_cache;
#if NEURON_CACHE_FUZZ_READER == 0
  manifest::parse_yaml(text, "fuzz.yaml");
#elif NEURON_CACHE_FUZZ_READER == 1
  manifest::parse_inference_cache_config(text, "fuzz.json", std::string("trn1"));
#elif NEURON_CACHE_FUZZ_READER == 2
  artifact_index::parse_index(text, "fuzz/index.json");
#else
  static const auto location =
      registry::locate("0.4.5/llama/meta-llama/Llama-3.1-8B/0123456789abcdef0123.json");
  registry::read_record(*location, text);
  registry::arch_digest(pyjson::parse(text));
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    read(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const neuron_cache::Error&) {
    // A message for the user: the expected way to refuse an input.
  } catch (const std::exception& other) {
    std::fprintf(stderr, "not the project's Error: %s\n", other.what());
    std::abort();
  }
  return 0;
}
