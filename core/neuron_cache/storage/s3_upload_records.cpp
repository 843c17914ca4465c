// The in-store records of multipart uploads (s3_sweep.h, kUploadRecordDir): what lets gc abort
// the upload a killed writer left on a server without ListMultipartUploads (s3_sweep.cpp then
// finds nothing). A record is store text when read back: bounded, validated, and never acted on
// outside the store's prefix (its path is joined below the prefix only once every part is a
// plain name, so no "../" reaches a URL).
#include <cctype>
#include <nlohmann/json.hpp>

#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "neuron_cache/sys/random.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::storage {
namespace {

constexpr int kRecordDigits = 16;
constexpr std::string_view kRecordSuffix = ".json";
constexpr int kRecordFormat = 1;
// S3 keys are at most 1024 bytes; upload ids are opaque but short (AWS: about 100 characters).
constexpr size_t kMaxRecordPath = 1024;
constexpr size_t kMaxUploadId = 1024;

// Why `path` is not a path an upload of this store writes, or "".
std::string bad_target(const std::string& path) {
  if (path.empty() || path.size() > kMaxRecordPath) return "its path is empty or too long";
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f || c == '\\') return "its path holds a control character";
  }
  std::vector<std::string> parts = layout::split_path(path);
  std::string joined;
  try {
    for (const auto& part : parts) {
      sys::check_plain_name(part);
      joined += (joined.empty() ? "" : "/") + part;
    }
  } catch (const Error&) {
    return "its path leaves the store (an empty, \".\" or \"..\" part)";
  }
  if (joined != path) return "its path is not plain";
  if (parts.front() == kUploadRecordDir) return "its path is a record's";
  return "";
}

std::string bad_upload_id(const std::string& id) {
  if (id.empty() || id.size() > kMaxUploadId) return "its upload id is empty or too long";
  for (unsigned char c : id) {
    if (!std::isalnum(c) &&
        std::string_view("._-~+/=").find(static_cast<char>(c)) == std::string_view::npos)
      return "its upload id holds a character S3's do not";
  }
  return "";
}

bool ok(long status) {
  return (status >= 200 && status < 300) || status == 404;  // 404: gone already
}

}  // namespace

std::string new_upload_record_path() {
  return std::string(kUploadRecordDir) + "/" + sys::random_hex(kRecordDigits) +
         std::string(kRecordSuffix);
}

bool is_upload_record_path(std::string_view path) {
  std::string_view dir = kUploadRecordDir;
  size_t size = dir.size() + 1 + kRecordDigits + kRecordSuffix.size();
  if (path.size() != size || !path.starts_with(dir) || path[dir.size()] != '/' ||
      !path.ends_with(kRecordSuffix))
    return false;
  std::string_view digits = path.substr(dir.size() + 1, kRecordDigits);
  return digits.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string upload_record_text(const UploadRecord& record) {
  return nlohmann::json{
      {"format", kRecordFormat}, {"path", record.path}, {"upload_id", record.upload_id}}
      .dump();
}

std::optional<UploadRecord> parse_upload_record(std::string_view text, std::string& why) {
  if (text.size() > kMaxUploadRecordBytes) {
    why = "larger than a record may be";
    return std::nullopt;
  }
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("format") ||
      !doc["format"].is_number_integer() || doc["format"].get<int64_t>() != kRecordFormat ||
      !doc.contains("path") || !doc["path"].is_string() || !doc.contains("upload_id") ||
      !doc["upload_id"].is_string()) {
    why = "not an upload record of this format";
    return std::nullopt;
  }
  UploadRecord record{doc["path"].get<std::string>(), doc["upload_id"].get<std::string>()};
  why = bad_target(record.path);
  if (why.empty()) why = bad_upload_id(record.upload_id);
  if (!why.empty()) return std::nullopt;
  return record;
}

namespace {

// The leftover a record `file` (old enough) stands for; a record that is not one stands for
// itself alone (deleting it is all gc does); nothing when it cannot be read now.
std::optional<Leftover> leftover_of(S3Store& store, const RemoteEntry& file, int64_t age) {
  Leftover out{Leftover::Kind::Upload, file.path, file.size, age, ""};
  std::string why = "larger than a record may be";
  std::optional<UploadRecord> record;
  if (file.size <= kMaxUploadRecordBytes) {
    std::optional<std::string> text;
    try {
      text = store.read_small(file.path, "", kMaxUploadRecordBytes);
    } catch (const Error& error) {
      // Larger than listed, or the read failed: this record waits for the next gc, the others
      // are not held up by it.
      log::debug("s3", "upload record " + file.path + " not read: " + error.what());
      return std::nullopt;
    }
    if (!text) return std::nullopt;  // gone since it was listed: its upload ended
    record = parse_upload_record(*text, why);
  }
  if (!record) {
    out.why = "a damaged upload record (" + why + "): only the record goes";
    return out;
  }
  out.why = "a multipart upload begun over a day ago and never finished (its writer is gone)";
  out.target = std::move(record->path);
  out.upload_id = std::move(record->upload_id);
  return out;
}

}  // namespace

std::vector<Leftover> S3Store::leftovers(const LeftoverAges& ages) {
  std::vector<Leftover> out;
  for (const RemoteEntry& file : list(std::string(kUploadRecordDir), true, "")) {
    // Nothing of another shape is touched; a record of unknown age may be a live writer's.
    if (file.is_directory || !is_upload_record_path(file.path) || file.modified == 0) continue;
    int64_t age = ages.now - file.modified;
    if (age < ages.upload) continue;
    if (std::optional<Leftover> found = leftover_of(*this, file, age)) out.push_back(*found);
  }
  return out;
}

namespace {

// Why `item` is not acted on, or "": a Leftover is data, and only this store's records and the
// uploads they name below its prefix are touched. Its age is not asked again: a record is written
// once, under a random name, so it never gets younger.
std::string refused(const Leftover& item) {
  if (item.kind != Leftover::Kind::Upload || !is_upload_record_path(item.path))
    return "not an upload record of this store: refused";
  if (item.upload_id.empty()) return "";  // a damaged record: only it goes
  std::string why = bad_target(item.target);
  return why.empty() ? bad_upload_id(item.upload_id) : why;
}

// Aborts the upload `item` names; "" when done (or gone already), else why not. A server without
// AbortMultipartUpload (s3rver answers 405) can never abort it: `cannot` says so, and the record
// goes all the same, or every later gc would try again in vain.
std::string abort_upload(S3Store& store, const Leftover& item, bool& cannot) {
  std::string url =
      store.address().object_url(item.target, "uploadId=" + url::url_encode(item.upload_id, false));
  net::HttpResponse response = store.call(store.signed_request("DELETE", url, s3::kEmptySha256));
  if (ok(response.status)) return "";
  cannot = response.status == 405 || response.status == 501;
  std::string why =
      store.failure(response, "aborting the multipart upload of " + item.target).what();
  if (cannot)
    why +=
        ": this server cannot abort uploads; the record is deleted, the upload's parts stay "
        "until the server itself removes them";
  return why;
}

std::string remove_record(S3Store& store, const Leftover& item) {
  bool cannot = false;
  std::string why = item.upload_id.empty() ? "" : abort_upload(store, item, cannot);
  if (!why.empty() && !cannot) return why;
  net::HttpResponse response = store.call(
      store.signed_request("DELETE", store.address().object_url(item.path), s3::kEmptySha256));
  if (!ok(response.status)) return store.failure(response, "deleting " + item.path).what();
  return why;
}

}  // namespace

LeftoverRemoval S3Store::remove_leftovers(const std::vector<Leftover>& found,
                                          const LeftoverAges& /*ages*/) {
  LeftoverRemoval out;
  for (const Leftover& item : found) {
    std::string why = refused(item);
    try {
      if (why.empty()) why = remove_record(*this, item);
    } catch (const Error& error) {
      why = error.what();
    }
    if (why.empty()) {
      ++out.removed;
    } else {
      out.kept.push_back(printable(item.path, 300) + ": " + why);
    }
  }
  return out;
}

}  // namespace neuron_cache::storage
