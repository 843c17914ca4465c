// Verified, resumable, parallel downloads through the resolve endpoint.
#include <memory>
#include <optional>
#include <string>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/net/ranged_download.h"

namespace neuron_cache::hub {
namespace {

std::string normalise_etag(std::string etag) {
  if (etag.starts_with("W/")) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// A file known only from an artifact index entry (its size and sha256), not from a listing: when
// the Hub disagrees with what the entry says, either side may be the one that is wrong.
bool known_by_index_only(const TreeEntry& expected) {
  return !expected.is_lfs() && expected.oid.empty();
}

// The entry and the Hub's answer disagree and nothing yet says which is right: both are named.
std::string entry_and_hub_disagree(const std::string& path, const std::string& entry_says,
                                   const std::string& hub_says) {
  return "the index entry and the Hub disagree about " + path + ": the entry says " + entry_says +
         ", the Hub's answer says " + hub_says +
         "; it is not installed (if the entry is wrong, push the configuration again from a "
         "machine that has it; if the Hub's answer is, run the command again later)";
}

// The bytes served are the Hub's file, whole and as the Hub describes it: the entry is wrong.
std::string index_entry_wrong(const std::string& path, const std::string& what) {
  return "the index entry is wrong about " + path + ": " + what +
         "; it is not installed (push the configuration again from a machine that has it)";
}

// The size of the whole file an answer serves: Content-Range's total for a 206, Content-Length
// for a 200.
std::optional<uint64_t> served_size(long status, const net::Headers& headers) {
  std::optional<std::string> value;
  if (status == 206) {
    value = headers.get("Content-Range");
    if (value && value->find('/') != std::string::npos) value = value->substr(value->find('/') + 1);
  } else if (status == 200) {
    value = headers.get("Content-Length");
  }
  if (!value || value->empty() || value->find_first_not_of("0123456789") != std::string::npos ||
      value->size() > 19) {
    return std::nullopt;
  }
  return std::stoull(*value);
}

std::string expected_hash(const TreeEntry& expected) {
  if (expected.is_lfs()) return expected.lfs_sha256;
  return expected.oid.empty() ? expected.content_sha256 : expected.oid;
}

net::Verification verification(const TreeEntry& expected) {
  if (expected.is_lfs()) return {HashAlgorithm::Sha256, "", expected.lfs_sha256};
  if (expected.oid.empty()) return {HashAlgorithm::Sha256, "", expected.content_sha256};
  // git blob id: sha1("blob <size>\0" + content)
  return {HashAlgorithm::Sha1, git_blob_header(expected.size), expected.oid};
}

// One file through the resolve endpoint: the Hub's headers say which commit served it and
// whether the file is still the one listed (or the one its index entry describes).
class HubSource : public net::RangedSource {
 public:
  HubSource(std::string url, std::string repo, const DownloadRequest& request, AdviceContext advice)
      : url_(std::move(url)),
        repo_(std::move(repo)),
        request_(request),
        advice_(std::move(advice)) {}

  net::HttpRequest request(const std::optional<net::ByteRange>& /*range*/) override {
    net::HttpRequest r{"GET", url_};
    r.may_leave_origin = true;  // LFS files come from the CDN the Hub redirects to
    return r;
  }

  std::optional<std::string> check_start(long status, const net::Headers& headers) override {
    return check_served_size(status, headers);
  }

  std::optional<std::string> revision(const net::HttpResponse& response) override {
    return hub_headers(response).get("X-Repo-Commit");
  }

  std::optional<std::string> check_answer(const net::HttpResponse& response) override {
    if (response.status < 200 || response.status >= 400) return std::nullopt;
    const net::Headers& hub = hub_headers(response);
    auto linked_etag = hub.get("X-Linked-Etag");
    auto etag = linked_etag ? linked_etag : hub.get("ETag");
    auto linked_size = hub.get("X-Linked-Size");
    const TreeEntry& expected = request_.expected;
    const std::string& path = request_.path_in_repo;
    if (known_by_index_only(expected)) {
      // The Hub's own sha256 of an LFS file, or the git blob id of a regular one: the bytes
      // decide, once they are in, which side a disagreement comes from (explain_mismatch).
      if (linked_etag) hub_sha256_ = normalise_etag(*linked_etag);
      if (etag && !linked_etag) hub_blob_id_ = normalise_etag(*etag);
      if (linked_size && *linked_size != std::to_string(expected.size)) {
        return entry_and_hub_disagree(path, std::to_string(expected.size) + " bytes",
                                      printable(*linked_size) + " bytes (X-Linked-Size)");
      }
      return check_served_size(response.status, response.headers);
    }
    if (etag && normalise_etag(*etag) != expected_hash(expected)) {
      return path + " changed on the Hub since it was listed (etag " +
             printable(normalise_etag(*etag)) + "): run the command again";
    }
    if (linked_size && *linked_size != std::to_string(expected.size)) {
      return path + " changed on the Hub since it was listed (size " + printable(*linked_size) +
             "): run the command again";
    }
    return std::nullopt;
  }

  std::string failure(const net::HttpResponse& response, int /*attempts*/) override {
    // A part past the end of the file: the Hub's file is shorter than the entry says
    // (Content-Range: bytes */<size> tells its size).
    if (response.status == 416 && known_by_index_only(request_.expected)) {
      std::string range = response.headers.get("Content-Range").value_or("");
      std::string size =
          range.substr(range.find('/') == std::string::npos ? range.size() : range.find('/') + 1);
      return entry_and_hub_disagree(
          request_.path_in_repo, std::to_string(request_.expected.size) + " bytes",
          size.empty() || size.size() > 19 || size.find_first_not_of("0123456789") != size.npos
              ? "the file ends before that (HTTP 416)"
              : size + " bytes (HTTP 416)");
    }
    return hub_error(response, "downloading " + request_.path_in_repo, repo_, advice_).what();
  }

  // Whether the bytes received are the Hub's file as the Hub describes it (the sha256 of an LFS
  // file, the git blob id of a regular one): then the entry's sha256 is wrong, and fetching again
  // cannot help. Bytes that match neither side were damaged on the way (corrupt()).
  std::optional<std::string> explain_mismatch(const std::string& actual) override {
    const TreeEntry& expected = request_.expected;
    if (!known_by_index_only(expected)) return std::nullopt;
    if (!hub_sha256_.empty() && actual == hub_sha256_) {
      return index_entry_wrong(request_.path_in_repo,
                               "it says sha256 " + expected.content_sha256 +
                                   ", the bytes served are the Hub's file (sha256 " + actual + ")");
    }
    if (hub_blob_id_.empty()) return std::nullopt;
    Hasher blob(HashAlgorithm::Sha1);
    blob.update(git_blob_header(expected.size));
    if (!hash_range(request_.fd, blob, 0, expected.size) || blob.hex_digest() != hub_blob_id_) {
      return std::nullopt;
    }
    return index_entry_wrong(request_.path_in_repo, "it says sha256 " + expected.content_sha256 +
                                                        ", the Hub's file (git blob " +
                                                        printable(hub_blob_id_) + ") has sha256 " +
                                                        actual);
  }

  std::string corrupt(const std::string& actual) override {
    return "the content of " + request_.path_in_repo + " does not match its checksum (" + actual +
           " instead of " + expected_hash(request_.expected) + "): it was corrupted in transit";
  }

 private:
  // The Hub's final answer, as huggingface_hub takes it: after the redirects within the Hub
  // (regular files go to /api/resolve-cache/...), the last one before its CDN's.
  static const net::Headers& hub_headers(const net::HttpResponse& response) {
    return response.origin_headers.items.empty() ? response.headers : response.origin_headers;
  }

  // A file the Hub serves at another size than its index entry says is never installed, whatever
  // its bytes hash to (a size 0 entry for a NEFF, a size cut short).
  std::optional<std::string> check_served_size(long status, const net::Headers& headers) {
    const TreeEntry& expected = request_.expected;
    if (!known_by_index_only(expected)) return std::nullopt;
    auto size = served_size(status, headers);
    if (!size || *size == expected.size) return std::nullopt;
    // A whole answer shorter than the entry says may be a body cut short on the way (the Hub's
    // own size header agreeing with the entry): it is resumed with a Range, and a file that
    // really ends there answers that Range with 416 (failure()). A 206's total is the file's.
    if (status == 200 && *size < expected.size) return std::nullopt;
    return entry_and_hub_disagree(request_.path_in_repo, std::to_string(expected.size) + " bytes",
                                  std::to_string(*size) + " bytes");
  }

  std::string url_;
  std::string repo_;
  const DownloadRequest& request_;
  AdviceContext advice_;
  std::string hub_blob_id_;  // the ETag of a regular file known only by an index entry
  std::string hub_sha256_;   // the X-Linked-Etag of an LFS file known only by an index entry
};

}  // namespace

std::vector<DownloadResult> HubClient::download(const std::string& repo,
                                                const std::string& revision,
                                                std::vector<DownloadRequest>& requests) {
  check_repo(repo);
  check_online("downloading from " + repo);
  std::vector<DownloadResult> results(requests.size());
  std::vector<net::RangedFile> files;
  std::vector<size_t> sent;  // files[k] is requests[sent[k]]
  for (size_t i = 0; i < requests.size(); ++i) {
    DownloadRequest& request = requests[i];
    net::Verification verify = verification(request.expected);
    if (request.expected.size == 0 && !known_by_index_only(request.expected)) {
      // Nothing to fetch: an empty file the listing says is empty only needs its hash checked.
      // One an index entry says is empty is asked for: the Hub's answer says its size.
      results[i].ok = net::new_hasher(verify)->hex_digest() == verify.digest;
      if (!results[i].ok) results[i].error = "empty file does not match its listed checksum";
      continue;
    }
    std::string url = resolve_url(repo, revision, request.path_in_repo);
    files.push_back({request.path_in_repo, request.fd, request.expected.size, std::move(verify),
                     std::make_unique<HubSource>(std::move(url), repo, request, advice()),
                     request.on_disk, request.on_progress});
    sent.push_back(i);
  }
  net::RangedOptions options{options_.part_size, options_.parallel, options_.retry};
  std::vector<net::RangedResult> done = net::download_ranged(http_, files, options);
  for (size_t k = 0; k < done.size(); ++k) {
    DownloadResult& result = results[sent[k]];
    result.ok = done[k].ok;
    result.error = std::move(done[k].error);
    result.bytes = done[k].bytes;
    result.commit = std::move(done[k].revision);
    result.disk_errno = done[k].disk_errno;
    result.bytes_resumed = done[k].bytes_resumed;
  }
  return results;
}

}  // namespace neuron_cache::hub
