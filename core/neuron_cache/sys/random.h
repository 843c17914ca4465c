// Random names for temporary files and scratch folders.
#pragma once

#include <string>

namespace neuron_cache::sys {

// `digits` random lowercase hex digits: unique names for temporary files and scratch folders.
std::string random_hex(int digits);

}  // namespace neuron_cache::sys
