// THE human-readable byte count of every message: powers of 1024 with IEC labels (KiB, MiB, GiB,
// TiB) everywhere, except where neuron-cache repeats optimum-cli's own output word for word
// (`cleanup`'s "Freed 1.5 KB.", `status`'s sizes, pinned by tests/unit/cleanup_test.cpp), which
// says KB/MB/GB for the same powers of 1024.
#pragma once

#include <cstdint>
#include <string>

namespace neuron_cache::format {

enum class ByteLabels {
  Iec,            // "1.5 MiB": the tool's own messages, progress, reports
  OptimumNeuron,  // "1.5 MB" for 1.5 MiB, at most GB: optimum-neuron's wording
};

// "0 B", "1023 B", then one decimal: "1.0 KiB", "1.5 MiB", "2.0 GiB".
std::string human_bytes(uint64_t bytes, ByteLabels labels = ByteLabels::Iec);

}  // namespace neuron_cache::format
