// The journal of a download in a staging folder: which byte spans of a partly downloaded file are
// on disk. Large files arrive in parallel parts written where they belong, so a download killed
// mid-file leaves holes that cannot be told from data: this note is the only thing the next run
// may resume such a file from. It lives in the staging folder's layout::kDownloadJournalDir,
// which is never installed. It is replaced atomically (a rename) but never flushed: the digest
// of the finished file is the guard, and a span claimed wrongly only costs a whole-file refetch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::local {

// A file of an entry as the artifact index lists it: its '/'-path in the entry, size and sha256.
struct ExpectedFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

// Bytes [start, end) of a file.
struct Span {
  uint64_t start = 0;
  uint64_t end = 0;
};

// A journal never holds more: a text beyond it is not a journal (and is never read whole).
inline constexpr size_t kMaxJournalBytes = 256 << 10;

// The journal's name in the journal folder: a digest of the file's path, which may hold '/'.
std::string journal_name(std::string_view file_name);

// The journal of `file` holding `written` (sorted, disjoint); only the first spans when there are
// more than a journal holds (the start of a file is what a resume hashes first).
std::string journal_text(const ExpectedFile& file, const std::vector<Span>& written);

// The spans a journal claims for `file`, or nothing when the text is not a journal of this very
// file (another name, size or sha256) or breaks a rule: malformed, too large, a span empty, out
// of order, overlapping another or past the end of the file.
std::optional<std::vector<Span>> parse_journal(std::string_view text, const ExpectedFile& file);

// Bytes the spans hold.
uint64_t bytes_in(const std::vector<Span>& spans);

}  // namespace neuron_cache::local
