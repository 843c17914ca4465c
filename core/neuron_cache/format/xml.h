// A minimal, bounded XML reader for the few XML answers of AWS APIs (S3, STS): elements, text and
// the five entities plus numeric references; no DTD, no namespaces beyond ignoring them. Every
// answer is hostile until checked: the body, the depth, the number of elements and each text are
// bounded by the limits below, and anything beyond them is an Error, never a partial answer taken
// as whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::xml {

// A page of S3's ListObjectsV2 holds at most 1,000 keys of at most 1,024 bytes, about 1.5 MB.
constexpr size_t kMaxBodyBytes = 16u << 20;
constexpr size_t kMaxDepth = 16;
constexpr size_t kMaxElements = 100000;
// S3 keys are at most 1,024 bytes of UTF-8; continuation tokens, upload ids and STS session
// tokens are opaque but a few hundred to about 2,000 bytes.
constexpr size_t kMaxTextBytes = 4096;

struct Element {
  std::string name;  // without a namespace prefix
  std::string text;  // decoded text directly inside it
  std::vector<Element> children;
  // The text of the first child named `name`, or nothing.
  std::optional<std::string> child(std::string_view name) const;
};

// Parses a whole document; throws an operational Error "not the XML expected (why)". `max_text`
// bounds each element's text.
Element parse(std::string_view body, size_t max_text = kMaxTextBytes);

}  // namespace neuron_cache::xml
