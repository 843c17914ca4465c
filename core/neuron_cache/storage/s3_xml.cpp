#include "neuron_cache/storage/s3_xml.h"

#include <cctype>
#include <ctime>

#include "neuron_cache/error.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/format/xml.h"

namespace neuron_cache::storage::s3xml {
namespace {

[[noreturn]] void bad(const std::string& why) {
  throw operational_error("the S3 store's answer is not the XML expected (" + why +
                          "): check that the endpoint is an S3 API");
}

uint64_t parse_size(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    bad("a size that is not a number: '" + text.substr(0, 40) + "'");
  return std::stoull(text);
}

}  // namespace

Element parse(std::string_view body) {
  try {
    return xml::parse(body);
  } catch (const Error& error) {
    throw operational_error("the S3 store's answer is " + std::string(error.what()) +
                            ": check that the endpoint is an S3 API");
  }
}

std::string unquote_etag(std::string etag) {
  if (etag.starts_with("W/")) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

bool is_plain_md5(const std::string& etag) {
  if (etag.size() != 32) return false;
  for (char c : etag) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

ListPage parse_list_page(std::string_view body) {
  Element root = parse(body);
  if (root.name != "ListBucketResult") bad("<" + root.name + "> instead of <ListBucketResult>");
  ListPage page;
  for (const Element& e : root.children) {
    if (e.name == "Contents") {
      ListedObject object;
      object.key = e.child("Key").value_or("");
      if (object.key.empty()) bad("an object without a key");
      object.size = parse_size(e.child("Size").value_or(""));
      object.etag = unquote_etag(e.child("ETag").value_or(""));
      object.modified = parse_utc_timestamp(e.child("LastModified").value_or("")).value_or(0);
      page.objects.push_back(std::move(object));
    } else if (e.name == "CommonPrefixes") {
      std::string prefix = e.child("Prefix").value_or("");
      if (prefix.empty()) bad("a common prefix without a value");
      page.common_prefixes.push_back(std::move(prefix));
    } else if (e.name == "IsTruncated") {
      page.truncated = e.text == "true";
    } else if (e.name == "NextContinuationToken") {
      page.next_token = e.text;
    }
  }
  if (page.objects.size() + page.common_prefixes.size() > kMaxKeysPerPage) {
    bad("more than " + std::to_string(kMaxKeysPerPage) + " keys in one page");
  }
  if (page.truncated && page.next_token.empty()) bad("a truncated page without a continuation");
  return page;
}

std::string parse_upload_id(std::string_view body) {
  Element root = parse(body);
  std::string id = root.child("UploadId").value_or("");
  if (root.name != "InitiateMultipartUploadResult" || id.empty()) bad("no UploadId");
  return id;
}

bool is_completion_result(std::string_view body) {
  try {
    return parse(body).name == "CompleteMultipartUploadResult";
  } catch (const Error&) {
    return false;
  }
}

UploadsPage parse_uploads_page(std::string_view body) {
  Element root = parse(body);
  if (root.name != "ListMultipartUploadsResult") {
    bad("<" + printable(root.name) + "> instead of <ListMultipartUploadsResult>");
  }
  UploadsPage page;
  for (const Element& e : root.children) {
    if (e.name == "Upload") {
      PendingUpload upload{e.child("Key").value_or(""), e.child("UploadId").value_or(""),
                           parse_timestamp(e.child("Initiated").value_or(""))};
      if (upload.key.empty() || upload.upload_id.empty()) bad("an upload without a key or id");
      page.uploads.push_back(std::move(upload));
    } else if (e.name == "IsTruncated") {
      page.truncated = e.text == "true";
    } else if (e.name == "NextKeyMarker") {
      page.next_key_marker = e.text;
    } else if (e.name == "NextUploadIdMarker") {
      page.next_upload_id_marker = e.text;
    }
  }
  if (page.uploads.size() > kMaxKeysPerPage) {
    bad("more than " + std::to_string(kMaxKeysPerPage) + " uploads in one page");
  }
  if (page.truncated && page.next_key_marker.empty()) bad("a truncated page without a marker");
  return page;
}

std::optional<int64_t> parse_timestamp(std::string_view text) {
  return parse_utc_timestamp(text);
}

ErrorAnswer parse_error(std::string_view body) {
  try {
    Element root = parse(body);
    if (root.name != "Error") return {};
    // Escaped here, where the store's words enter our messages (an ESC or a newline in <Message>).
    return {printable(root.child("Code").value_or("")),
            printable(root.child("Message").value_or(""), kPrintableMessage)};
  } catch (const Error&) {
    return {};
  }
}

}  // namespace neuron_cache::storage::s3xml
