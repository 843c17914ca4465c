// Publication to S3: artifacts (single PUT or multipart, skipped when already stored; completion
// marks in a round of their own after the others), then the operations that expect a version of
// their file (s3_conditional.cpp), then deletes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <set>
#include <tuple>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/net/in_transit.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"
#include "neuron_cache/storage/s3_xml.h"

namespace neuron_cache::storage {

namespace s3 {

RemoteEntry entry_of(const std::string& path, const net::Headers& headers) {
  RemoteEntry entry;
  entry.path = path;
  std::string length = headers.get("Content-Length").value_or("");
  if (length.empty() || length.size() > 19 ||
      length.find_first_not_of("0123456789") != std::string::npos) {
    throw operational_error("the S3 store gave " + path + " no valid Content-Length");
  }
  entry.size = std::stoull(length);
  entry.oid = s3xml::unquote_etag(headers.get("ETag").value_or(""));
  std::string sha = headers.get(kShaMetaHeader).value_or("");
  if (sha.size() == 64 && sha.find_first_not_of("0123456789abcdef") == std::string::npos) {
    entry.content_sha256 = sha;
  }
  return entry;
}

std::string md5_of_range(int fd, uint64_t offset, uint64_t length) {
  Hasher hasher(HashAlgorithm::Md5);
  if (!hash_range(fd, hasher, offset, offset + length))
    throw operational_error("cannot read a file back to compare it");
  return hasher.hex_digest();
}

std::string kept_otherwise_twice(const std::string& location, const std::string& path) {
  return net::changed_in_transit_twice(
      "the S3 store " + location + " kept other bytes than were sent for " + path +
          " (its answer's checksum or ETag is not that of the bytes sent)",
      "the server does not check the x-amz-checksum-sha256 it is sent",
      "have the server verify checksums");
}

Kept kept_bytes(const net::Headers& answer, const std::string& checksum,
                const std::function<std::string()>& md5, bool etag_is_md5) {
  if (auto echoed = answer.get("x-amz-checksum-sha256"); echoed && !echoed->empty())
    return *echoed == checksum ? Kept::Confirmed : Kept::Different;
  std::string etag = s3xml::unquote_etag(answer.get("ETag").value_or(""));
  if (!etag_is_md5 || !s3xml::is_plain_md5(etag)) return Kept::Unknown;
  return etag == md5() ? Kept::Confirmed : Kept::Different;
}

}  // namespace s3

namespace {

using net::HttpRequest;
using net::HttpResponse;

// One artifact to send.
struct Artifact {
  const CommitOperation* op = nullptr;
  uint64_t size = 0;
  std::string sha256;
  std::unique_ptr<s3::Fd> fd;
  std::string upload_id;  // multipart
  std::string record;     // its upload record (s3_sweep.h), once written
  bool closed = false;    // its upload was completed or aborted: the record may go
  std::vector<std::string> part_etags;
  std::vector<std::string> part_checksums;  // base64 sha256 of each part, as S3 checks them
  bool failed = false;
  std::string error;
};

std::string md5_of_file(int fd, uint64_t size) {
  return s3::md5_of_range(fd, 0, size);
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

// S3's ETag of a completed multipart upload: the MD5 of the parts' binary MD5s, "-<parts>".
// Nothing when a part's ETag (the server's word) is not an MD5.
std::optional<std::string> multipart_etag(const std::vector<std::string>& part_etags) {
  std::string digests;
  for (const auto& hex : part_etags) {
    if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      return std::nullopt;
    for (size_t i = 0; i < hex.size(); i += 2)
      digests += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return md5_hex(digests) + "-" + std::to_string(part_etags.size());
}

// A request with a body, retried on transient failures; the answer is kept.
// One request of a publication, retried on transient failures and signed when it is sent (not
// when it was made): a long upload's last requests go with refreshed credentials.
class Send : public net::RetryingExchange {
 public:
  Send(net::HttpRequest request, const net::RetryPolicy& policy, const S3Store& store)
      : RetryingExchange(std::move(request), policy), store_(store) {}

  net::HttpRequest request() override {
    net::HttpRequest r = RetryingExchange::request();
    store_.sign_again(r);
    return r;
  }

 private:
  const S3Store& store_;
};

// A multipart part with its own checksum, which S3 verifies (the payload is not signed,
// UNSIGNED-PAYLOAD) and the completion lists. Hashed when the part is first sent, not before the
// upload starts: later parts hash while earlier ones are on the wire.
class PartSend : public Send {
 public:
  PartSend(net::HttpRequest request, const net::RetryPolicy& policy, const S3Store& store,
           std::string& checksum)
      : Send(std::move(request), policy, store), checksum_(checksum) {}

  net::HttpRequest request() override {
    net::HttpRequest r = Send::request();
    if (checksum_.empty()) {
      Hasher hasher(HashAlgorithm::Sha256);
      if (!hash_range(r.upload_fd, hasher, r.upload_offset, r.upload_offset + r.upload_length))
        throw operational_error("cannot read the file being uploaded to hash its part");
      checksum_ = base64_of_hex(hasher.hex_digest());
    }
    r.headers.push_back("x-amz-checksum-sha256: " + checksum_);
    return r;
  }

 private:
  std::string& checksum_;  // the artifact's, for the completion
};

bool ok(const net::HttpResponse& r) {
  return r.status >= 200 && r.status < 300;
}

class Publisher {
 public:
  Publisher(S3Store& store, CommitResult& result) : store_(store), result_(result) {}

  void upload(std::vector<Artifact>& artifacts) {
    std::vector<Artifact*> to_send = not_stored(artifacts);
    std::vector<Artifact*> large;
    uint64_t bytes = 0;
    for (Artifact* a : to_send) {
      bytes += a->size;
      if (a->size > store_.options().part_size) large.push_back(a);
    }
    net::meter().expect(bytes, to_send.size());
    initiate(large);
    std::vector<std::unique_ptr<Send>> sends;
    std::vector<std::pair<Artifact*, size_t>> owners;  // artifact, part index (or npos)
    for (Artifact* a : to_send) {
      if (a->failed) continue;
      if (a->upload_id.empty()) {
        sends.push_back(single_put(*a));
        owners.emplace_back(a, std::string::npos);
        continue;
      }
      uint64_t part = part_size_of(*a);
      size_t parts = static_cast<size_t>((a->size + part - 1) / part);
      a->part_etags.resize(parts);
      a->part_checksums.resize(parts);
      for (size_t p = 0; p < parts; ++p) {
        sends.push_back(part_put(*a, p, part));
        owners.emplace_back(a, p);
      }
    }
    run(sends);
    send_changed_again(sends, owners);
    for (size_t i = 0; i < sends.size(); ++i) record(*owners[i].first, owners[i].second, *sends[i]);
    complete(large);
    forget_records(large);
    for (Artifact* a : to_send) {
      if (a->failed) throw operational_error(a->error);
      net::meter().add_file();
      ++result_.large_sent;
      result_.bytes_sent += a->size;
    }
  }

 private:
  // The artifacts the store lacks: one already stored with the same size and content (its
  // sha256 metadata, or a plain-MD5 ETag equal to the file's MD5) is not sent again.
  std::vector<Artifact*> not_stored(std::vector<Artifact>& artifacts) {
    std::vector<std::string> paths;
    for (const Artifact& a : artifacts) paths.push_back(a.op->path);
    std::map<std::string, RemoteEntry> stored;
    for (auto& entry : store_.stat(paths, "")) stored[entry.path] = entry;
    std::vector<Artifact*> missing;
    for (Artifact& a : artifacts) {
      auto found = stored.find(a.op->path);
      if (found != stored.end() && same_content(a, found->second)) {
        ++result_.large_already_stored;
        continue;
      }
      missing.push_back(&a);
    }
    return missing;
  }

  // A plain-MD5 ETag is the id of the bytes the store holds; the sha256 metadata is only what
  // their writer sent (a byte changed in transit on a server that checks nothing keeps it).
  bool same_content(const Artifact& a, const RemoteEntry& stored) const {
    if (stored.size != a.size) return false;
    if (store_.etags_are_md5() && s3xml::is_plain_md5(stored.oid))
      return md5_of_file(a.fd->get(), a.size) == stored.oid;
    return !stored.content_sha256.empty() && stored.content_sha256 == a.sha256;
  }

  // The range of `a` that `part` sends (npos: all of it), and the checksum sent with it.
  std::tuple<uint64_t, uint64_t, std::string> sent_range(const Artifact& a, size_t part) const {
    if (part == std::string::npos) return {0, a.size, base64_of_hex(a.sha256)};
    uint64_t size = part_size_of(a);
    uint64_t offset = part * size;
    return {offset, std::min(size, a.size - offset), a.part_checksums[part]};
  }

  // Whether the store answered that it kept other bytes than `send` sent (s3::kept_bytes).
  bool changed_in_transit(const Artifact& a, size_t part, const Send& send) const {
    if (!ok(send.response_)) return false;
    auto [offset, length, checksum] = sent_range(a, part);
    auto md5 = [&, offset = offset, length = length] {
      return s3::md5_of_range(a.fd->get(), offset, length);
    };
    return s3::kept_bytes(send.response_.headers, checksum, md5, store_.etags_are_md5()) ==
           s3::Kept::Different;
  }

  // Bytes hashed here and kept otherwise there changed on their way: each such PUT is sent once
  // more; kept otherwise again, its artifact fails and the object is removed (net/in_transit.h).
  void send_changed_again(std::vector<std::unique_ptr<Send>>& sends,
                          const std::vector<std::pair<Artifact*, size_t>>& owners) {
    std::vector<size_t> again;
    for (size_t i = 0; i < sends.size(); ++i) {
      auto [a, part] = owners[i];
      if (!changed_in_transit(*a, part, *sends[i])) continue;
      again.push_back(i);
      sends[i] = part == std::string::npos ? single_put(*a) : part_put(*a, part, part_size_of(*a));
    }
    if (again.empty()) return;
    std::vector<net::Exchange*> pointers;
    for (size_t i : again) pointers.push_back(sends[i].get());
    store_.http().run(pointers, store_.options().parallel);
    for (size_t i : again) {
      auto [a, part] = owners[i];
      if (!changed_in_transit(*a, part, *sends[i]) || a->failed) continue;
      a->failed = true;
      a->error = s3::kept_otherwise_twice(store_.location(), a->op->path);
      if (part == std::string::npos) remove_object(*a);
    }
  }

  // An object this push stored with the wrong bytes: removed, so that nothing takes it for the
  // artifact (its sha256 metadata says what was meant, not what is there).
  void remove_object(const Artifact& a) {
    try {
      store_.call(store_.signed_request("DELETE", store_.address().object_url(a.op->path),
                                        s3::kEmptySha256));
    } catch (const Error&) {
      // Unreferenced by any index entry, and replaced by the next push (same_content).
    }
  }

  uint64_t part_size_of(const Artifact& a) const {
    uint64_t part = store_.options().part_size;
    // 10,000 parts at most: a file larger than that many parts gets larger parts.
    uint64_t least = (a.size + S3Options::kMaxParts - 1) / S3Options::kMaxParts;
    return std::max(part, least);
  }

  void run(std::vector<std::unique_ptr<Send>>& sends) {
    std::vector<net::Exchange*> pointers;
    for (auto& s : sends) pointers.push_back(s.get());
    store_.http().run(pointers, store_.options().parallel);
  }

  net::HttpRequest with_file(net::HttpRequest r, const Artifact& a, uint64_t offset,
                             uint64_t length) {
    r.upload_fd = a.fd->get();
    r.upload_offset = offset;
    r.upload_length = length;
    r.answer_timeout = std::chrono::milliseconds(store_.options().timeout * 4);
    r.tells_reachability = false;
    return r;
  }

  std::unique_ptr<Send> single_put(const Artifact& a) {
    // The payload's sha256 is signed: S3 refuses the PUT when the bytes it got differ.
    net::HttpRequest r =
        store_.signed_request("PUT", store_.address().object_url(a.op->path), a.sha256);
    r.headers.push_back(std::string(s3::kShaMetaHeader) + ": " + a.sha256);
    // S3 checks the bytes against it and keeps it: a reader can verify the object without
    // the index (GetObject with ChecksumMode=ENABLED).
    r.headers.push_back("x-amz-checksum-sha256: " + base64_of_hex(a.sha256));
    r.headers.push_back("Content-Type: application/octet-stream");
    store_.add_encryption(r);
    return std::make_unique<Send>(with_file(std::move(r), a, 0, a.size), store_.options().retry,
                                  store_);
  }

  std::unique_ptr<Send> part_put(Artifact& a, size_t p, uint64_t part) {
    std::string query =
        "partNumber=" + std::to_string(p + 1) + "&uploadId=" + url::url_encode(a.upload_id, false);
    net::HttpRequest r = store_.signed_request(
        "PUT", store_.address().object_url(a.op->path, query), s3::kUnsignedPayload);
    uint64_t offset = p * part;
    return std::make_unique<PartSend>(
        with_file(std::move(r), a, offset, std::min(part, a.size - offset)), store_.options().retry,
        store_, a.part_checksums[p]);
  }

  void record(Artifact& a, size_t part, const Send& send) {
    const net::HttpResponse& response = send.response_;
    std::string etag = response.headers.get("ETag").value_or("");
    if (ok(response) && (part == std::string::npos || !etag.empty())) {
      if (part != std::string::npos) a.part_etags[part] = s3xml::unquote_etag(etag);
      return;
    }
    if (a.failed) return;
    a.failed = true;
    std::string what = "uploading " + a.op->path;
    if (part != std::string::npos) what += " (part " + std::to_string(part + 1) + ")";
    a.error = store_.failure(response, what).what();
  }

  void initiate(const std::vector<Artifact*>& large) {
    std::vector<std::unique_ptr<Send>> sends;
    for (Artifact* a : large) {
      net::HttpRequest r = store_.signed_request(
          "POST", store_.address().object_url(a->op->path, "uploads="), s3::kEmptySha256);
      r.headers.push_back(std::string(s3::kShaMetaHeader) + ": " + a->sha256);
      r.headers.push_back("x-amz-checksum-algorithm: SHA256");
      r.headers.push_back("Content-Type: application/octet-stream");
      store_.add_encryption(r);
      sends.push_back(std::make_unique<Send>(std::move(r), store_.options().retry, store_));
    }
    run(sends);
    for (size_t i = 0; i < large.size(); ++i) {
      const net::HttpResponse& response = sends[i]->response_;
      if (!ok(response)) {
        large[i]->failed = true;
        large[i]->error =
            store_.failure(response, "starting the upload of " + large[i]->op->path).what();
        continue;
      }
      large[i]->upload_id = s3xml::parse_upload_id(response.body);
    }
    write_records(large);
  }

  // A record of each upload begun, before its parts go: what gc finds when this writer is
  // killed on a server without ListMultipartUploads. Housekeeping: a failure is a warning.
  void write_records(const std::vector<Artifact*>& large) {
    std::vector<std::unique_ptr<Send>> sends;
    std::vector<Artifact*> owners;
    for (Artifact* a : large) {
      if (a->upload_id.empty()) continue;
      a->record = new_upload_record_path();
      std::string body = upload_record_text({a->op->path, a->upload_id});
      net::HttpRequest r =
          store_.signed_request("PUT", store_.address().object_url(a->record), sha256_hex(body));
      r.body = std::move(body);
      r.headers.push_back("Content-Type: application/json");
      store_.add_encryption(r);
      sends.push_back(std::make_unique<Send>(std::move(r), store_.options().retry, store_));
      owners.push_back(a);
    }
    run(sends);
    for (size_t i = 0; i < sends.size(); ++i) {
      if (ok(sends[i]->response_)) continue;
      owners[i]->record.clear();
      result_.warnings.push_back(
          store_.failure(sends[i]->response_, "recording the upload of " + owners[i]->op->path)
              .what() +
          std::string(": were this push killed, only ListMultipartUploads or the bucket's "
                      "lifecycle rule would find its parts"));
    }
  }

  // The records of the uploads that ended; one that stays is deleted by gc after a day.
  void forget_records(const std::vector<Artifact*>& large) {
    std::vector<std::unique_ptr<Send>> sends;
    for (Artifact* a : large) {
      if (a->record.empty() || !a->closed) continue;
      sends.push_back(std::make_unique<Send>(
          store_.signed_request("DELETE", store_.address().object_url(a->record), s3::kEmptySha256),
          store_.options().retry, store_));
    }
    run(sends);
    for (const auto& send : sends) {
      if (ok(send->response_) || send->response_.status == 404) continue;
      result_.warnings.push_back(
          store_.failure(send->response_, "deleting an upload record").what() +
          std::string(": gc deletes it after a day"));
    }
  }

  // Whether the object is there as this upload's completion makes it: the multipart ETag of
  // exactly these parts (S3), or our content by the store's own ids (s3rver gives a completed
  // upload the plain MD5 of its bytes). A completion whose answer was lost, and whose retry then
  // met NoSuchUpload (or a 500), did land.
  bool landed(const Artifact& a) {
    try {
      std::vector<RemoteEntry> object = store_.stat({a.op->path}, "");
      if (object.size() != 1 || object[0].size != a.size) return false;
      std::optional<std::string> etag = multipart_etag(a.part_etags);
      return (etag && object[0].oid == *etag) || same_content(a, object[0]);
    } catch (const Error&) {
      return false;  // unknown: the upload is reported failed
    }
  }

  std::string not_completed(const net::HttpResponse& response, const Artifact& a) {
    std::string what = "completing the upload of " + a.op->path;
    s3xml::ErrorAnswer error = s3xml::parse_error(response.body);
    if (!ok(response) || !error.code.empty()) return store_.failure(response, what).what();
    return what + " in " + store_.location() + " failed: its answer (HTTP " +
           std::to_string(response.status) +
           ") is not a CompleteMultipartUploadResult and the object is not there as this upload "
           "makes it; push again";
  }

  // CompleteMultipartUpload for every large file whose parts all went; the others are aborted
  // so that their parts are not kept (and billed) by the store.
  void complete(const std::vector<Artifact*>& large) {
    std::vector<std::unique_ptr<Send>> sends;
    std::vector<Artifact*> owners;
    std::vector<std::pair<Artifact*, const Send*>> aborts;
    for (Artifact* a : large) {
      if (a->upload_id.empty()) continue;
      std::string query = "uploadId=" + url::url_encode(a->upload_id, false);
      std::string url = store_.address().object_url(a->op->path, query);
      if (a->failed) {
        sends.push_back(
            std::make_unique<Send>(store_.signed_request("DELETE", url, s3::kEmptySha256),
                                   store_.options().retry, store_));
        owners.push_back(nullptr);
        aborts.emplace_back(a, sends.back().get());
        continue;
      }
      std::string body = "<CompleteMultipartUpload>";
      for (size_t p = 0; p < a->part_etags.size(); ++p) {
        body += "<Part><PartNumber>" + std::to_string(p + 1) + "</PartNumber><ETag>\"" +
                xml_escape(a->part_etags[p]) + "\"</ETag>";
        if (p < a->part_checksums.size() && !a->part_checksums[p].empty())
          body += "<ChecksumSHA256>" + a->part_checksums[p] + "</ChecksumSHA256>";
        body += "</Part>";
      }
      body += "</CompleteMultipartUpload>";
      net::HttpRequest r = store_.signed_request("POST", url, sha256_hex(body));
      r.body = std::move(body);
      r.headers.push_back("Content-Type: application/xml");
      r.answer_timeout = std::chrono::milliseconds(store_.options().timeout * 4);
      r.tells_reachability = false;
      sends.push_back(std::make_unique<Send>(std::move(r), store_.options().retry, store_));
      owners.push_back(a);
    }
    run(sends);
    for (auto [a, abort] : aborts)
      a->closed = ok(abort->response_) || abort->response_.status == 404;
    for (size_t i = 0; i < sends.size(); ++i) {
      if (owners[i] == nullptr) continue;
      owners[i]->closed = true;  // completed, else aborted below
      const net::HttpResponse& response = sends[i]->response_;
      // S3 may answer 200 and still fail (the error is then the body); a cut or garbled answer
      // says nothing either way.
      bool completed = ok(response) && s3xml::is_completion_result(response.body);
      if (!completed && landed(*owners[i])) {  // the answer was lost, not the upload
        result_.landed_unanswered = "completing the upload of " + owners[i]->op->path + " in " +
                                    store_.location() +
                                    " got no valid answer, but the object is there as this "
                                    "upload makes it (its size, and the parts' multipart ETag "
                                    "or its content's sha256 or MD5): it is stored";
        continue;
      }
      if (!completed) {
        owners[i]->failed = true;
        owners[i]->error = not_completed(response, *owners[i]);
        net::HttpResponse aborted = store_.call(store_.signed_request(
            "DELETE",
            store_.address().object_url(owners[i]->op->path,
                                        "uploadId=" + url::url_encode(owners[i]->upload_id, false)),
            s3::kEmptySha256));
        owners[i]->closed = ok(aborted) || aborted.status == 404;
      }
    }
  }

  S3Store& store_;
  CommitResult& result_;
};

// Deletes without a condition, all at once; a file already gone is deleted too.
void delete_all(S3Store& store, const std::vector<const CommitOperation*>& deletes,
                CommitResult& result) {
  std::vector<std::unique_ptr<Send>> sends;
  std::vector<net::Exchange*> pointers;
  for (const CommitOperation* op : deletes) {
    sends.push_back(std::make_unique<Send>(
        store.signed_request("DELETE", store.address().object_url(op->path), s3::kEmptySha256),
        store.options().retry, store));
    pointers.push_back(sends.back().get());
  }
  store.http().run(pointers, store.options().parallel);
  for (size_t i = 0; i < deletes.size(); ++i) {
    const net::HttpResponse& response = sends[i]->response_;
    if (!ok(response) && response.status != 404) {
      throw store.failure(response, "deleting " + deletes[i]->path);
    }
    ++result.deleted;
  }
}

}  // namespace

CommitResult S3Store::commit(const std::vector<CommitOperation>& operations,
                             const std::string& /*message*/,
                             const std::optional<std::string>& /*parent*/) {
  check_online("publishing to " + location());
  if (std::string why = why_not_writable(); !why.empty()) throw input_error(why);
  CommitResult result;
  std::vector<Artifact> artifacts;
  std::vector<const CommitOperation*> conditional, deletes, conditional_deletes;
  for (const auto& op : operations) {
    bool expects = op.expected.conditional();
    if (op.kind == CommitOperation::Kind::Delete) {
      (expects ? conditional_deletes : deletes).push_back(&op);
    } else if (expects) {
      conditional.push_back(&op);
    } else {
      Artifact a;
      a.op = &op;
      a.size = s3::size_of_file(op.local);
      a.sha256 = sha256_of_file(op.local);
      a.fd = std::make_unique<s3::Fd>(op.local);
      artifacts.push_back(std::move(a));
    }
  }
  if (!artifacts.empty()) {
    sweep_.abort_abandoned_uploads(result);
    // Completion marks only once every other artifact is stored (layout::is_completion_mark):
    // the PUTs of one round run in parallel and land in any order.
    auto marks = std::stable_partition(artifacts.begin(), artifacts.end(), [](const Artifact& a) {
      return !layout::is_completion_mark(a.op->path);
    });
    std::vector<Artifact> last(std::make_move_iterator(marks),
                               std::make_move_iterator(artifacts.end()));
    artifacts.erase(marks, artifacts.end());
    for (std::vector<Artifact>* round : {&artifacts, &last}) {
      if (!round->empty()) Publisher(*this, result).upload(*round);
    }
  }
  if (!conditional.empty()) conditional_.write(conditional, result);
  for (const CommitOperation* op : conditional_deletes) {
    conditional_.remove(*op);
    ++result.deleted;
  }
  if (!deletes.empty()) delete_all(*this, deletes, result);
  result.committed = result.large_sent + result.small_files + result.deleted > 0;
  return result;
}

}  // namespace neuron_cache::storage
