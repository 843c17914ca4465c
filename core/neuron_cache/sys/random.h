// Random names for temporary files and scratch folders, and seeds.
#pragma once

#include <cstdint>
#include <string>

namespace neuron_cache::sys {

// 64 bits from the kernel (getrandom). Not std::random_device: libstdc++'s calls glibc 2.36's
// arc4random, which the release (glibc 2.34) must not need.
uint64_t random_seed();

// `digits` random lowercase hex digits: unique names for temporary files and scratch folders.
std::string random_hex(int digits);

}  // namespace neuron_cache::sys
