// Verified, resumable, parallel downloads through the resolve endpoint.
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::hub {
namespace {

// Resumes that receive nothing new before a file is given up.
constexpr int kMaxStalledResumes = 5;
constexpr uint64_t kWritebackChunk = 16ull << 20;

std::string normalise_etag(std::string etag) {
  if (etag.starts_with("W/")) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// What one file's download has verified so far, shared by its parts.
struct FileState {
  std::string repo;
  DownloadRequest* request = nullptr;
  DownloadResult* result = nullptr;
  size_t parts_left = 0;
  bool failed = false;
  // A ranged download is hashed in file order while its parts stream in: bytes at the frontier
  // are hashed from memory, bytes a later part wrote ahead of it are read back from the page
  // cache once the frontier reaches them. So no part is read back after the download ends.
  std::optional<Hasher> hasher;
  uint64_t hashed = 0;            // bytes [0, hashed) went through `hasher`
  uint64_t part_size = 0;         // every part but the last is this long
  std::vector<uint64_t> written;  // per part: bytes [part start, written) are on disk
  std::string hub_blob_id;        // the ETag of a regular file known only by an index entry
};

// A file known only from an artifact index entry (its size and sha256), not from a listing: when
// the Hub disagrees with what the entry says, the entry is wrong, not the transfer.
bool known_by_index_only(const TreeEntry& expected) {
  return !expected.is_lfs() && expected.oid.empty();
}

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

Hasher new_hasher(const TreeEntry& expected) {
  if (expected.is_lfs() || expected.oid.empty()) return Hasher(HashAlgorithm::Sha256);
  Hasher hasher(HashAlgorithm::Sha1);  // git blob id: sha1("blob <size>\0" + content)
  hasher.update("blob " + std::to_string(expected.size) + std::string(1, '\0'));
  return hasher;
}

std::string expected_hash(const TreeEntry& expected) {
  if (expected.is_lfs()) return expected.lfs_sha256;
  return expected.oid.empty() ? expected.content_sha256 : expected.oid;
}

// Records that a part wrote `bytes` at `offset` and moves the hash frontier as far as the bytes
// on disk allow.
void advance_hash(FileState& file, size_t part, uint64_t offset, std::string_view bytes) {
  file.written[part] = offset + bytes.size();
  if (offset != file.hashed) return;
  file.hasher->update(bytes);
  file.hashed += bytes.size();
  uint64_t size = file.request->expected.size;
  while (file.hashed < size) {
    uint64_t until = file.written[file.hashed / file.part_size];
    if (until <= file.hashed) return;
    if (!hash_range(file.request->fd, *file.hasher, file.hashed, until)) {
      file.failed = true;
      file.result->error = "cannot read back the downloaded bytes of " +
                           file.request->path_in_repo + " to verify them";
      return;
    }
    file.hashed = until;
  }
}

// One byte range [start, end) of a file, or the whole file when it is the only part.
class RangeExchange : public net::Exchange {
 public:
  RangeExchange(std::string url, std::shared_ptr<FileState> file, size_t part, uint64_t start,
                uint64_t end, bool whole, const net::RetryPolicy& policy)
      : url_(std::move(url)),
        file_(std::move(file)),
        part_(part),
        start_(start),
        end_(end),
        pos_(start),
        whole_(whole),
        policy_(policy) {
    if (whole_) hasher_.emplace(new_hasher(file_->request->expected));
  }

  net::HttpRequest request() override {
    net::HttpRequest r{"GET", url_};
    r.may_leave_origin = true;  // LFS files come from the CDN the Hub redirects to
    r.headers.push_back("Accept-Encoding: identity");
    if (!whole_ || pos_ > start_) {
      r.headers.push_back("Range: bytes=" + std::to_string(pos_) + "-" + std::to_string(end_ - 1));
    }
    asked_range_ = !whole_ || pos_ > start_;
    skip_ = 0;
    return r;
  }

  bool streams_body() const override { return true; }

  void on_stream_start(long status, const net::Headers& headers) override {
    check_served_size(status, headers);  // a wrong entry stops here, before its bytes come
    if (status != 200 || !asked_range_) return;
    // The server ignored Range: a whole file restarts from zero, a part skips to its range.
    if (whole_) {
      pos_ = start_;
      hasher_.emplace(new_hasher(file_->request->expected));
      if (ftruncate(file_->request->fd, 0) != 0) file_->failed = true;
    } else {
      skip_ = pos_;
    }
  }

  bool on_body(std::string_view bytes) override {
    file_->result->bytes += bytes.size();  // what moved, kept or not
    if (file_->failed) return false;
    if (skip_ > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, bytes.size()));
      bytes.remove_prefix(n);
      skip_ -= n;
    }
    bytes = bytes.substr(0, static_cast<size_t>(std::min<uint64_t>(bytes.size(), end_ - pos_)));
    if (!bytes.empty() && !write_at(bytes)) return false;
    return pos_ < end_ || whole_;
  }

  std::optional<std::chrono::milliseconds> on_complete(const net::HttpResponse& response) override {
    record_headers(response);
    if (file_->failed) return std::nullopt;
    bool success = response.status >= 200 && response.status < 300;
    if (success && pos_ >= end_) return finish_part();
    if (success || response.streamed_bytes > 0) return resume(response);
    if (auto delay = net::retry_delay(response, ++attempts_, policy_)) return delay;
    fail(hub_error(response, "downloading " + file_->request->path_in_repo, file_->repo).what());
    return std::nullopt;
  }

 private:
  bool write_at(std::string_view bytes) {
    ssize_t n = pwrite(file_->request->fd, bytes.data(), bytes.size(), static_cast<off_t>(pos_));
    if (n != static_cast<ssize_t>(bytes.size())) {
      fail("cannot write the downloaded bytes of " + file_->request->path_in_repo +
           " to disk: is the disk full?");
      return false;
    }
    if (whole_) {
      hasher_->update(bytes);
    } else {
      advance_hash(*file_, part_, pos_, bytes);
    }
    pos_ += bytes.size();
    start_writeback();
    return !file_->failed;
  }

  // The installer flushes every file before it becomes visible: asking the kernel to start
  // writing each 16 MiB as it arrives lets the disk work during the download instead of after.
  void start_writeback() {
    if (pos_ < written_back_) written_back_ = start_;  // restarted from the beginning
    if (pos_ - written_back_ < kWritebackChunk) return;
    sync_file_range(file_->request->fd, static_cast<off_t>(written_back_),
                    static_cast<off_t>(pos_ - written_back_), SYNC_FILE_RANGE_WRITE);
    written_back_ = pos_;  // best effort: memory files and some filesystems refuse it
  }

  void record_headers(const net::HttpResponse& response) {
    const net::Headers& hub =
        response.first_headers.items.empty() ? response.headers : response.first_headers;
    if (auto commit = hub.get("X-Repo-Commit")) file_->result->commit = *commit;
    auto linked_etag = hub.get("X-Linked-Etag");
    auto etag = linked_etag ? linked_etag : hub.get("ETag");
    const TreeEntry& expected = file_->request->expected;
    if (response.status < 200 || response.status >= 400) return;
    auto linked_size = hub.get("X-Linked-Size");
    const std::string& path = file_->request->path_in_repo;
    if (known_by_index_only(expected)) {
      // The Hub's own sha256 of an LFS file, or the git blob id of a regular one (compared with
      // the bytes once they are in).
      if (linked_etag && normalise_etag(*linked_etag) != expected.content_sha256) {
        fail(index_entry_wrong(path, "it says sha256 " + expected.content_sha256 +
                                         ", the Hub's file has sha256 " +
                                         normalise_etag(*linked_etag)));
      } else if (linked_size && *linked_size != std::to_string(expected.size)) {
        fail(index_entry_wrong(path, "it says " + std::to_string(expected.size) +
                                         " bytes, the Hub's file has " + *linked_size));
      } else if (etag && !linked_etag) {
        file_->hub_blob_id = normalise_etag(*etag);
      }
      check_served_size(response.status, response.headers);
      return;
    }
    if (etag && normalise_etag(*etag) != expected_hash(expected)) {
      fail(path + " changed on the Hub since it was listed (etag " + normalise_etag(*etag) +
           "): run the command again");
    } else if (linked_size && *linked_size != std::to_string(expected.size)) {
      fail(path + " changed on the Hub since it was listed (size " + *linked_size +
           "): run the command again");
    }
  }

  // A file the Hub serves at another size than its index entry says is never installed, whatever
  // its bytes hash to (a size 0 entry for a NEFF, a size cut short).
  void check_served_size(long status, const net::Headers& headers) {
    const TreeEntry& expected = file_->request->expected;
    if (!known_by_index_only(expected)) return;
    auto size = served_size(status, headers);
    if (size && *size != expected.size) {
      fail(index_entry_wrong(file_->request->path_in_repo,
                             "it says " + std::to_string(expected.size) +
                                 " bytes, the Hub's file has " + std::to_string(*size)));
    }
  }

  // Whether the bytes received are the Hub's regular file (its git blob id): then a sha256 that
  // differs from the index entry's is the entry's fault, and fetching again cannot help.
  bool received_hub_file() {
    const TreeEntry& expected = file_->request->expected;
    if (!known_by_index_only(expected) || file_->hub_blob_id.empty()) return false;
    Hasher blob(HashAlgorithm::Sha1);
    blob.update("blob " + std::to_string(expected.size) + std::string(1, '\0'));
    return hash_range(file_->request->fd, blob, 0, expected.size) &&
           blob.hex_digest() == file_->hub_blob_id;
  }

  std::optional<std::chrono::milliseconds> resume(const net::HttpResponse& response) {
    stalled_ = pos_ > last_pos_ ? 0 : stalled_ + 1;
    last_pos_ = pos_;
    if (stalled_ >= kMaxStalledResumes) {
      fail("downloading " + file_->request->path_in_repo + " keeps breaking (" + response.error +
           "): check the network");
      return std::nullopt;
    }
    return std::chrono::milliseconds(stalled_ == 0 ? 0 : 200 * stalled_);
  }

  std::optional<std::chrono::milliseconds> finish_part() {
    if (--file_->parts_left > 0) return std::nullopt;
    const TreeEntry& expected = file_->request->expected;
    std::string actual = whole_ ? hasher_->hex_digest() : file_->hasher->hex_digest();
    if (actual == expected_hash(expected)) {
      file_->result->ok = true;
      return std::nullopt;
    }
    if (received_hub_file()) {
      fail(index_entry_wrong(file_->request->path_in_repo,
                             "it says sha256 " + expected.content_sha256 +
                                 ", the Hub's file (git blob " + file_->hub_blob_id +
                                 ") has sha256 " + actual));
      return std::nullopt;
    }
    if (++corrupt_retries_ < 3) return fetch_whole_again();
    fail("the content of " + file_->request->path_in_repo + " does not match its checksum (" +
         actual + " instead of " + expected_hash(expected) + "): it was corrupted in transit");
    return std::nullopt;
  }

  // A checksum says that some byte went wrong, not which part holds it: the last part to finish
  // fetches the whole file again as one verified stream.
  std::chrono::milliseconds fetch_whole_again() {
    file_->parts_left = 1;
    whole_ = true;
    start_ = pos_ = last_pos_ = 0;
    end_ = file_->request->expected.size;
    stalled_ = 0;
    hasher_.emplace(new_hasher(file_->request->expected));
    return std::chrono::milliseconds(0);
  }

  void fail(const std::string& error) {
    if (!file_->failed) file_->result->error = error;
    file_->failed = true;
  }

  std::string url_;
  std::shared_ptr<FileState> file_;
  size_t part_;
  uint64_t start_, end_, pos_;
  uint64_t written_back_ = start_;
  bool whole_;
  net::RetryPolicy policy_;
  std::optional<Hasher> hasher_;
  bool asked_range_ = false;
  uint64_t skip_ = 0;
  uint64_t last_pos_ = 0;
  int stalled_ = 0;
  int attempts_ = 0;
  int corrupt_retries_ = 0;
};

}  // namespace

std::vector<DownloadResult> HubClient::download(const std::string& repo,
                                                const std::string& revision,
                                                std::vector<DownloadRequest>& requests) {
  check_repo(repo);
  check_online("downloading from " + repo);
  std::vector<DownloadResult> results(requests.size());
  std::vector<std::unique_ptr<RangeExchange>> exchanges;
  for (size_t i = 0; i < requests.size(); ++i) {
    DownloadRequest& request = requests[i];
    std::string url = resolve_url(repo, revision, request.path_in_repo);
    auto state = std::make_shared<FileState>();
    state->repo = repo;
    state->request = &request;
    state->result = &results[i];
    uint64_t size = request.expected.size;
    size_t parts =
        size > options_.part_size ? (size + options_.part_size - 1) / options_.part_size : 1;
    state->parts_left = parts;
    if (size == 0 && !known_by_index_only(request.expected)) {
      // Nothing to fetch: an empty file the listing says is empty only needs its hash checked.
      // One an index entry says is empty is asked for: the Hub's answer says its size.
      results[i].ok = new_hasher(request.expected).hex_digest() == expected_hash(request.expected);
      if (!results[i].ok) results[i].error = "empty file does not match its listed checksum";
      continue;
    }
    if (parts > 1) {
      state->hasher.emplace(new_hasher(request.expected));
      state->part_size = options_.part_size;
      for (size_t p = 0; p < parts; ++p) state->written.push_back(p * options_.part_size);
    }
    for (size_t p = 0; p < parts; ++p) {
      uint64_t start = p * options_.part_size;
      uint64_t end = parts == 1 ? size : std::min<uint64_t>(size, start + options_.part_size);
      exchanges.push_back(
          std::make_unique<RangeExchange>(url, state, p, start, end, parts == 1, options_.retry));
    }
  }
  std::vector<net::Exchange*> pointers;
  for (auto& e : exchanges) pointers.push_back(e.get());
  http_.run(pointers, options_.parallel);
  return results;
}

}  // namespace neuron_cache::hub
