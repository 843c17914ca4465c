// THE human-readable byte count of every message: powers of 1024 with IEC labels (KiB, MiB, GiB,
// TiB) everywhere, except where neuron-cache repeats optimum-cli's own output word for word
// (`cleanup`'s "Freed 1.5 KB.", `status`'s sizes, pinned by tests/unit/cleanup_test.cpp), which
// says KB/MB/GB for the same powers of 1024.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace neuron_cache::format {

enum class ByteLabels {
  Iec,            // "1.5 MiB": the tool's own messages, progress, reports
  OptimumNeuron,  // "1.5 MB" for 1.5 MiB, at most GB: optimum-neuron's wording
};

// "0 B", "1023 B", then one decimal: "1.0 KiB", "1.5 MiB", "2.0 GiB".
std::string human_bytes(uint64_t bytes, ByteLabels labels = ByteLabels::Iec);

// What parse_size accepts, for help texts and error messages.
inline constexpr std::string_view kSizeForms =
    "a number of bytes (1000000), or a number with a unit: K, M, G, T or KiB, MiB, GiB, TiB "
    "(powers of 1024, as sccache reads them), KB, MB, GB, TB (powers of 1000); a "
    "decimal point is allowed with a unit (1.5TB), letter case is ignored";

// A size as a person writes it: "200GiB", "200G", "500 MiB", "1.5TB", "1048576". Rounded down to
// whole bytes. Throws an input Error naming `what` (the flag or variable) and kSizeForms for
// anything else: a sign, an exponent, a fraction of a byte, more than 6 decimals, a unit it does
// not know, a size over 2^64 - 1.
uint64_t parse_size(std::string_view text, std::string_view what);

}  // namespace neuron_cache::format
