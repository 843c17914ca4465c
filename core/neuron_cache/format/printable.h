// Text that did not come from us (a store's names, a server's error message) as it may stand in a
// message, a log or a terminal: no control character of it reaches the screen, so an answer can
// neither move the cursor (ESC, BEL) nor forge lines of its own ("\nneuron-cache: ...").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace neuron_cache {

// A name quoted in a message: short enough to read in one line.
inline constexpr size_t kPrintableName = 80;
// A server's own explanation quoted in a message: long enough for S3's and the Hub's sentences.
inline constexpr size_t kPrintableMessage = 400;

// `text` with control characters (C0, DEL, C1), bidirectional marks, backslash and bytes that are
// not UTF-8 as \xNN (UTF-8 text stays as it is), cut at `max_bytes` with the size said.
std::string printable(std::string_view text, size_t max_bytes = kPrintableName);

}  // namespace neuron_cache
