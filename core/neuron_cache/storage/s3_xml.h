// The few S3 answers neuron-cache reads (ListObjectsV2, InitiateMultipartUpload,
// CompleteMultipartUpload, Error), read with the bounded XML reader of format/xml.h; each count
// and size is bounded too, and anything beyond the limits is an Error, never a partial answer
// taken as whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/format/xml.h"

namespace neuron_cache::storage::s3xml {

using xml::Element;
using xml::kMaxBodyBytes;
using xml::kMaxDepth;
using xml::kMaxElements;
using xml::kMaxTextBytes;
constexpr size_t kMaxKeysPerPage = 1000;

// Parses a whole document; throws an operational Error saying what was wrong.
Element parse(std::string_view body);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;      // unquoted
  int64_t modified = 0;  // LastModified in seconds since 1970 (UTC); 0 when absent or unreadable
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
