// The few S3 answers neuron-cache reads (ListObjectsV2, InitiateMultipartUpload,
// CompleteMultipartUpload, Error), with a minimal XML reader: elements, text and the five
// entities plus numeric references; no DTD, no namespaces beyond ignoring them. Every answer is
// hostile until checked: the body, the depth, the number of elements, each text, each count and
// size are bounded by the named limits below, and anything beyond them is an Error, never a
// partial answer taken as whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::storage::s3xml {

// A page of ListObjectsV2 holds at most 1,000 keys of at most 1,024 bytes, about 1.5 MB of XML.
constexpr size_t kMaxBodyBytes = 16u << 20;
constexpr size_t kMaxDepth = 16;
constexpr size_t kMaxElements = 100000;
// S3 keys are at most 1,024 bytes of UTF-8; continuation tokens and upload ids are opaque but
// short (a few hundred bytes).
constexpr size_t kMaxTextBytes = 4096;
constexpr size_t kMaxKeysPerPage = 1000;

struct Element {
  std::string name;  // without a namespace prefix
  std::string text;  // decoded text directly inside it
  std::vector<Element> children;
  // The text of the first child named `name`, or nothing.
  std::optional<std::string> child(std::string_view name) const;
};

// Parses a whole document; throws an operational Error saying what was wrong.
Element parse(std::string_view body);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // unquoted
};

struct ListPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_token;
};

ListPage parse_list_page(std::string_view body);
// The UploadId of an InitiateMultipartUploadResult.
std::string parse_upload_id(std::string_view body);
// Whether a CompleteMultipartUpload answer is the result S3 gives when the object was made; an
// <Error> (S3 may send one with a 200), a cut or garbled body is not.
bool is_completion_result(std::string_view body);

// One page of ListMultipartUploads: the uploads in progress and where the next page starts.
struct PendingUpload {
  std::string key;
  std::string upload_id;
  std::optional<int64_t> initiated;  // seconds since 1970 (UTC); nothing when unreadable
};
struct UploadsPage {
  std::vector<PendingUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
UploadsPage parse_uploads_page(std::string_view body);
// S3's timestamps ("2024-05-01T12:34:56.000Z", UTC) as seconds since 1970, or nothing.
std::optional<int64_t> parse_timestamp(std::string_view text);

// An <Error> document's code and message (empty when the body is not one), escaped with
// printable(): they are the store's words, quoted in our messages.
struct ErrorAnswer {
  std::string code;
  std::string message;
};
ErrorAnswer parse_error(std::string_view body);

// An ETag without its quotes (and W/ prefix).
std::string unquote_etag(std::string etag);
// Whether an ETag is a plain MD5 of the content (32 hex digits): single PUTs without SSE-KMS.
// Multipart ETags ("<hex>-<parts>") are not.
bool is_plain_md5(const std::string& etag);

}  // namespace neuron_cache::storage::s3xml
