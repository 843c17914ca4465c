// Byte ranges of a file: what a Range header asks for, and what a download has on disk.
#pragma once

#include <cstdint>

namespace neuron_cache::net {

// Bytes [first, last] of a file, both included (as in a Range header).
struct ByteRange {
  uint64_t first = 0;
  uint64_t last = 0;
};

}  // namespace neuron_cache::net
