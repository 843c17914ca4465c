#include "neuron_cache/storage/s3_conditional.h"

#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_xml.h"
#include "neuron_cache/sys/random.h"

namespace neuron_cache::storage {
namespace {

bool ok(const net::HttpResponse& r) {
  return r.status >= 200 && r.status < 300;
}

}  // namespace

void S3ConditionalWrites::write(const std::vector<const CommitOperation*>& ops,
                                CommitResult& result) {
  bool checked = enforced();
  std::vector<std::pair<std::string, std::string>> written;  // path, ETag
  for (const CommitOperation* op : ops) written.emplace_back(op->path, put(*op, checked, result));
  if (checked) return;
  // A writer that checked the version before our write can still land its PUT after our
  // read-back; give it time to land, then look again.
  std::this_thread::sleep_for(store_.options().recheck);
  for (const auto& [path, etag] : written) require(path, Expected::at(etag));
}

void S3ConditionalWrites::remove(const CommitOperation& op) {
  require(op.path, op.expected);
  net::HttpResponse response = store_.call(
      store_.signed_request("DELETE", store_.address().object_url(op.path), s3::kEmptySha256));
  if (!ok(response) && response.status != 404)
    throw store_.failure(response, "deleting " + op.path);
}

std::string S3ConditionalWrites::put(const CommitOperation& op, bool checked,
                                     CommitResult& result) {
  // The condition the store will not check: a writer that published since our read is a
  // conflict, not overwritten.
  if (!checked) require(op.path, op.expected);
  uint64_t size = s3::size_of_file(op.local);
  std::string sha = sha256_of_file(op.local);
  s3::Fd fd(op.local);
  std::string condition = op.expected.kind == Expected::Kind::Version
                              ? "If-Match: \"" + op.expected.token + "\""
                              : "If-None-Match: *";
  net::HttpResponse response = send(op, fd, size, sha, condition);
  std::string written = s3xml::unquote_etag(response.headers.get("ETag").value_or(""));
  if (changed_in_transit(response, fd, size, sha) && !written.empty()) {
    // The file now holds bytes changed on their way (readers refuse them): written again over
    // exactly that version, once (net/in_transit.h).
    response = send(op, fd, size, sha, "If-Match: \"" + written + "\"");
    written = s3xml::unquote_etag(response.headers.get("ETag").value_or(""));
    if (changed_in_transit(response, fd, size, sha)) {
      throw operational_error(s3::kept_otherwise_twice(store_.location(), op.path));
    }
  }
  // Stores that ignore the condition: another writer's version read back now is a lost update
  // of theirs or ours, reported as a conflict so the caller merges again.
  std::optional<std::string> now = etag_now(op.path);
  if (!now || (!written.empty() && *now != written))
    throw CommitConflict(conflict_message(op.path));
  ++result.small_files;
  result.bytes_sent += size;
  return *now;
}

net::HttpResponse S3ConditionalWrites::send(const CommitOperation& op, const s3::Fd& fd,
                                            uint64_t size, const std::string& sha,
                                            const std::string& condition) {
  net::HttpRequest r = store_.signed_request("PUT", store_.address().object_url(op.path), sha);
  r.headers.push_back(condition);
  r.headers.push_back(std::string(s3::kShaMetaHeader) + ": " + sha);
  r.headers.push_back("x-amz-checksum-sha256: " + base64_of_hex(sha));
  r.headers.push_back("Content-Type: application/octet-stream");
  store_.add_encryption(r);
  r.upload_fd = fd.get();
  r.upload_length = size;
  net::HttpResponse response = store_.call(std::move(r));
  s3xml::ErrorAnswer answer = s3xml::parse_error(response.body);
  if (response.status == 412 ||
      (response.status == 409 && answer.code == "ConditionalRequestConflict")) {
    throw CommitConflict(conflict_message(op.path));
  }
  if (!ok(response)) throw store_.failure(response, "writing " + op.path);
  return response;
}

bool S3ConditionalWrites::changed_in_transit(const net::HttpResponse& response, const s3::Fd& fd,
                                             uint64_t size, const std::string& sha) const {
  auto md5 = [&] { return s3::md5_of_range(fd.get(), 0, size); };
  return s3::kept_bytes(response.headers, base64_of_hex(sha), md5, store_.etags_are_md5()) ==
         s3::Kept::Different;
}

void S3ConditionalWrites::require(const std::string& path, const Expected& expected) {
  if (!expected.met_by(etag_now(path))) throw CommitConflict(conflict_message(path));
}

std::optional<std::string> S3ConditionalWrites::etag_now(const std::string& path) {
  std::vector<RemoteEntry> found = store_.stat({path}, "");
  if (found.empty()) return std::nullopt;
  return found.front().oid;
}

std::string S3ConditionalWrites::conflict_message(const std::string& path) const {
  return path + " in " + store_.location() +
         " changed since it was read (another writer published meanwhile): read it again, merge "
         "and publish again";
}

// A conditional write that must be refused: If-Match on an ETag no object has, to a new key.
// S3, MinIO and R2 refuse it (412, or 404 for the missing key); a store that ignores conditions
// stores the empty probe, which is deleted at once. An answer that says neither counts as not
// enforced: the careful path costs a few requests and one wait, never an entry.
bool S3ConditionalWrites::enforced() {
  {
    std::lock_guard lock(mutex_);
    if (enforced_) return *enforced_;
  }
  std::string probe = std::string(S3Store::kProbePrefix) + sys::random_hex(16);
  net::HttpRequest r =
      store_.signed_request("PUT", store_.address().object_url(probe), s3::kEmptySha256);
  r.headers.push_back("If-Match: \"" + std::string(32, '0') + "\"");
  r.headers.push_back("Content-Type: application/octet-stream");
  store_.add_encryption(r);
  net::HttpResponse response = store_.call(std::move(r));
  bool refused = response.status == 404 || response.status == 409 || response.status == 412;
  if (ok(response))
    store_.call(
        store_.signed_request("DELETE", store_.address().object_url(probe), s3::kEmptySha256));
  std::lock_guard lock(mutex_);
  enforced_ = refused;
  return refused;
}

}  // namespace neuron_cache::storage
