// The debug log (--verbose, NEURON_CACHE_LOG=debug, a GitHub re-run with debug logging): one line
// on stderr per request the tool makes and per decision it takes, so "why did this compile?" and
// "what did it ask the store?" have answers without a debugger. Off, it costs one relaxed load per
// call site. Every line passes through config::redact and printable(), and URLs through
// url::loggable(): a line never holds a credential nor a control character.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace neuron_cache::log {

void enable(bool on);
bool enabled();

// "neuron-cache: debug: +1.234s <topic>: <text>" when enabled. Thread-safe; lines never interleave.
void debug(std::string_view topic, std::string_view text);

// Called before each line is written (the CLI clears a progress bar being drawn).
void set_before_line(std::function<void()> hook);

}  // namespace neuron_cache::log
