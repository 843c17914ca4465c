// How every message, report and progress line says a length of time: one rule, so that a wait,
// an ETA and a compile saved read alike ("250 ms", "2.5 s", "45 s", "12 min", "1.5 h").
#pragma once

#include <chrono>
#include <string>

namespace neuron_cache::sys {

// "0 s"; under 1 s in ms; under 10 s with one decimal when not whole; under 2 min in seconds;
// under 2 h in minutes; then hours with one decimal when not whole. Negative lengths and NaN (a
// clock stepped back, a hostile record) read "0 s"; longer than 10^12 s reads as 10^12 s.
std::string duration_text(std::chrono::milliseconds length);
std::string duration_text(double seconds);

}  // namespace neuron_cache::sys
