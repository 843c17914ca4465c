#include "neuron_cache/local/download_journal.h"

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"

namespace neuron_cache::local {
namespace {

using Json = pyjson::Json;

constexpr uint64_t kJournalVersion = 1;
// Spans a journal keeps: ~40 bytes each in the text, so 4096 stay far below kMaxJournalBytes.
constexpr size_t kMaxJournalSpans = 4096;
constexpr pyjson::Limits kJournalLimits{kMaxJournalBytes, 4, 3 * kMaxJournalSpans + 16};

// A non-negative integer, however the parser typed it.
std::optional<uint64_t> unsigned_value(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

std::optional<Span> span_of(const Json& pair) {
  if (!pair.is_array() || pair.size() != 2) return std::nullopt;
  auto start = unsigned_value(pair[0]);
  auto end = unsigned_value(pair[1]);
  if (!start || !end) return std::nullopt;
  return Span{*start, *end};
}

bool describes(const Json& journal, const ExpectedFile& file) {
  auto text = [&](const char* key) {
    const Json& value = journal.contains(key) ? journal.at(key) : Json();
    return value.is_string() ? value.get<std::string>() : std::string();
  };
  return unsigned_value(journal.value("version", Json())) == kJournalVersion &&
         text("file") == file.name && text("sha256") == file.sha256 &&
         unsigned_value(journal.value("size", Json())) == file.size;
}

}  // namespace

std::string journal_name(std::string_view file_name) {
  return sha256_hex(file_name).substr(0, 32) + ".json";
}

std::string journal_text(const ExpectedFile& file, const std::vector<Span>& written) {
  Json spans = Json::array();
  for (size_t i = 0; i < written.size() && i < kMaxJournalSpans; ++i) {
    spans.push_back(Json::array({written[i].start, written[i].end}));
  }
  Json journal = {{"version", kJournalVersion},
                  {"file", file.name},
                  {"size", file.size},
                  {"sha256", file.sha256},
                  {"written", std::move(spans)}};
  return journal.dump() + "\n";
}

std::optional<std::vector<Span>> parse_journal(std::string_view text, const ExpectedFile& file) {
  std::optional<Json> journal = pyjson::parse_or_nothing(text, kJournalLimits);
  if (!journal || !journal->is_object() || !describes(*journal, file)) return std::nullopt;
  const Json& list = journal->value("written", Json());
  if (!list.is_array()) return std::nullopt;
  std::vector<Span> spans;
  uint64_t next = 0;
  for (const Json& pair : list) {
    std::optional<Span> span = span_of(pair);
    if (!span || span->start < next || span->end <= span->start || span->end > file.size) {
      return std::nullopt;
    }
    spans.push_back(*span);
    next = span->end;
  }
  return spans;
}

uint64_t bytes_in(const std::vector<Span>& spans) {
  uint64_t bytes = 0;
  for (const Span& span : spans) bytes += span.end - span.start;
  return bytes;
}

}  // namespace neuron_cache::local
