#include "neuron_cache/net/ranged_download.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "neuron_cache/net/hash_worker.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/sys/fd.h"

namespace neuron_cache::net {
namespace {

// Resumes that receive nothing new before a file is given up.
constexpr int kMaxStalledResumes = 5;
// Whole-file refetches after a checksum mismatch before the file is given up.
constexpr int kMaxCorruptRetries = 2;
// The installer flushes every file before it becomes visible: asking the kernel to start writing
// each 16 MiB as it arrives lets the disk work during the download instead of after.
constexpr uint64_t kWritebackChunk = 16ull << 20;
// Files at least this large are hashed on the HashWorker, handed over in ranges of at least this
// much; smaller ones are hashed as they arrive (a hand-over would cost more than their hash).
constexpr uint64_t kHashChunk = 4ull << 20;
// Files are written in whole pages: a write that starts a page makes the kernel zero the rest
// of it before the next write copies over it (a third of the copy's cost, measured).
constexpr uint64_t kPage = 4096;

// Whether the worker can read the file back: a caller may hand a write-only descriptor for a
// file of one part, which is then hashed as it arrives.
bool readable(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_ACCMODE) != O_WRONLY;
}

// One file's download, shared by its parts. A ranged download is hashed in file order while its
// parts stream in: the HashWorker reads the bytes behind the frontier back from the page cache
// (bytes a later part wrote ahead of it, or an interrupted run left, once the frontier reaches
// them), so the hash is done when the last part is.
struct FileState {
  RangedFile* file = nullptr;
  RangedResult* result = nullptr;
  size_t parts_left = 0;
  bool failed = false;
  int corrupt_retries = 0;
  HashWorker* worker = nullptr;
  std::shared_ptr<HashWorker::Stream> stream;  // the parts' hash, none without a digest
  uint64_t frontier = 0;                       // bytes [0, frontier) are on disk
  uint64_t part_size = 0;                      // every part but the last is this long
  std::vector<uint64_t> written;               // per part: bytes [part start, written) are on disk
  uint64_t resumed = 0;                        // bytes of RangedFile::on_disk still counted on
  uint64_t on_disk = 0;                        // bytes in the `written` spans
  uint64_t reported = 0;                       // `on_disk` when on_progress was last told

  void fail(const std::string& error) {
    if (!failed) result->error = error;
    failed = true;
  }

  uint64_t part_start(size_t part) const { return part * part_size; }

  // Part `part` has bytes [its start, until) on disk.
  void record(size_t part, uint64_t until) {
    on_disk += until - written[part];
    written[part] = until;
    if (on_disk >= reported + kProgressStep) report();
  }

  // Moves the frontier over the bytes on disk that follow it; the worker gets them once a chunk
  // has gathered, or the file is whole.
  void move_frontier() {
    if (!stream) return;
    while (frontier < file->size) {
      uint64_t until = written[frontier / part_size];
      if (until <= frontier) break;
      frontier = until;
    }
    if (frontier - stream->handed_over >= kHashChunk || frontier == file->size) {
      worker->feed(stream, frontier);
    }
  }

  // The parts' digest once every part is on disk; nothing when a byte could not be read back.
  std::optional<std::string> digest_of_parts() {
    move_frontier();
    if (!worker->finish(*stream)) return std::nullopt;
    return stream->hasher.hex_digest();
  }

  // The file starts again from byte 0 as one stream: nothing on disk counts any more.
  void restart_whole() {
    HashWorker::drop(stream);
    stream.reset();
    written.assign(1, 0);
    on_disk = resumed = 0;
    if (reported > 0) report();  // a journal must not keep claiming bytes being rewritten
  }

  std::vector<ByteRange> spans() const {
    std::vector<ByteRange> out;
    for (size_t part = 0; part < written.size(); ++part) {
      if (written[part] <= part_start(part)) continue;
      if (!out.empty() && out.back().last + 1 == part_start(part)) {
        out.back().last = written[part] - 1;
      } else {
        out.push_back({part_start(part), written[part] - 1});
      }
    }
    return out;
  }

  void report() {
    reported = on_disk;
    if (file->on_progress) file->on_progress(spans());
  }
};

// One byte range [start, end) of a file, or the whole file when it is the only part.
class RangeExchange : public Exchange {
 public:
  // The part starts at `from`: bytes [start, from) are on disk from an interrupted run.
  RangeExchange(std::shared_ptr<FileState> state, size_t part, uint64_t start, uint64_t end,
                uint64_t from, bool whole, const RetryPolicy& policy)
      : state_(std::move(state)),
        file_(*state_->file),
        part_(part),
        start_(start),
        end_(end),
        pos_(from),
        whole_(whole),
        policy_(policy) {
    if (whole_ && pos_ > start_) hash_resumed_prefix();
  }

  HttpRequest request() override {
    asked_range_ = !whole_ || pos_ > start_;
    std::optional<ByteRange> range;
    if (asked_range_) range = ByteRange{pos_, end_ - 1};
    HttpRequest r = file_.source->request(range);
    r.headers.push_back("Accept-Encoding: identity");
    if (range) {
      r.headers.push_back("Range: bytes=" + std::to_string(range->first) + "-" +
                          std::to_string(range->last));
    }
    if (whole_ && pos_ == start_) restart_hash();
    skip_ = 0;
    return r;
  }

  bool streams_body() const override { return true; }
  // The last part is on disk and the file's digest is on the worker.
  bool awaiting_digest() const { return awaiting_digest_; }
  // Once the transfers are done: the digest the worker computed, checked; true when the file
  // must be fetched again.
  bool settle() {
    awaiting_digest_ = false;
    return check_digest().has_value();
  }
  // A file that failed (a part's answer said another size, a part gave up) asks nothing more:
  // requests follow the bytes that exist, not the size an entry claims.
  bool given_up() const override { return state_->failed; }

  void on_stream_start(long status, const Headers& headers) override {
    // A wrong entry or a changed file stops here, before its bytes come.
    if (auto error = file_.source->check_start(status, headers)) return state_->fail(*error);
    if (status != 200 || !asked_range_) return;
    // The server ignored Range: a whole file restarts from zero, a part skips to its range.
    if (!whole_) {
      skip_ = pos_;
      return;
    }
    pos_ = start_;
    held_.clear();
    restart_hash();
    state_->restart_whole();
    if (ftruncate(file_.fd, 0) != 0) {
      state_->fail("cannot truncate the destination of " + file_.name +
                   " to download it again from its start");
    }
  }

  bool on_body(std::string_view bytes) override {
    state_->result->bytes += bytes.size();
    if (state_->failed) return false;
    size_t skip = static_cast<size_t>(std::min<uint64_t>(skip_, bytes.size()));
    bytes.remove_prefix(skip);
    skip_ -= skip;
    if (bytes.size() > end_ - pos_) {
      if (whole_) {
        if (auto error = file_.source->too_large()) {
          state_->fail(*error);
          return false;
        }
      }
      bytes = bytes.substr(0, static_cast<size_t>(end_ - pos_));
    }
    if (!bytes.empty() && !write(bytes)) return false;
    return pos_ < end_ || whole_;
  }

  std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) override {
    if (auto revision = file_.source->revision(response)) state_->result->revision = *revision;
    if (auto error = file_.source->check_answer(response)) state_->fail(*error);
    if (state_->failed) return std::nullopt;
    bool success = response.status >= 200 && response.status < 300;
    if (success && pos_ >= end_) return finish_part();
    if (success || response.streamed_bytes > 0) return resume(response);
    if (auto delay = retry_delay(response, ++attempts_, policy_)) return delay;
    state_->fail(file_.source->failure(response, attempts_));
    return std::nullopt;
  }

 private:
  // The first byte not on disk: the bytes from it to pos_ are held.
  uint64_t on_disk_until() const { return pos_ - held_.size(); }

  // Writes `held` then `bytes` at `offset`, or returns the errno that stopped it: a short write
  // is followed by another, whose errno says why (ENOSPC, EFBIG), rather than guessed.
  int write_all(std::string_view held, std::string_view bytes, uint64_t offset) const {
    std::string_view left[2] = {held, bytes};
    while (!left[0].empty() || !left[1].empty()) {
      iovec iov[2];
      int count = 0;
      for (std::string_view piece : left) {
        if (!piece.empty()) iov[count++] = {const_cast<char*>(piece.data()), piece.size()};
      }
      ssize_t n = pwritev(file_.fd, iov, count, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return ENOSPC;
      offset += static_cast<uint64_t>(n);
      for (std::string_view& piece : left) {
        size_t done = std::min(piece.size(), static_cast<size_t>(n));
        piece.remove_prefix(done);
        n -= static_cast<ssize_t>(done);
      }
    }
    return 0;
  }

  // Received bytes go to disk up to the last whole page; the rest of that page is held until
  // its end arrives (held bytes are never part of a span on disk, so a resume or a journal never
  // counts them).
  bool write(std::string_view bytes) {
    uint64_t from = on_disk_until();
    uint64_t until = pos_ + bytes.size();
    uint64_t upto = until == end_ ? until : until & ~(kPage - 1);
    if (whole_ && hasher_) hasher_->update(bytes);
    if (upto <= from) {
      held_.append(bytes);
      pos_ = until;
      return true;
    }
    size_t now = static_cast<size_t>(upto - pos_);
    if (int error = write_all(held_, bytes.substr(0, now), from); error != 0) {
      if (sys::is_disk_refusal(error) && !state_->failed) state_->result->disk_errno = error;
      state_->fail("cannot write the downloaded bytes of " + file_.name + ": " +
                   std::strerror(error));
      return false;
    }
    held_.assign(bytes.substr(now));
    pos_ = until;
    state_->record(part_, upto);
    if (whole_ && stream_ && upto - stream_->handed_over >= kHashChunk) {
      state_->worker->feed(stream_, upto);
    }
    if (!whole_) state_->move_frontier();
    start_writeback();
    return !state_->failed;
  }

  // A whole file resumed at pos_: its hash starts with the bytes already on disk. Bytes that
  // cannot be read back are fetched again.
  void hash_resumed_prefix() {
    restart_hash();
    Hasher* hasher = stream_ ? &stream_->hasher : hasher_ ? &*hasher_ : nullptr;
    // Before any hand-over: the worker has nothing of this stream yet.
    if (!hasher || hash_range(file_.fd, *hasher, start_, pos_)) {
      if (stream_) stream_->handed_over = pos_;
      return;
    }
    pos_ = start_;
    state_->restart_whole();
  }

  // A whole file's hash from its first byte: on the worker when the file is large.
  void restart_hash() {
    HashWorker::drop(stream_);
    stream_.reset();
    hasher_ = new_hasher(file_.verify);
    if (hasher_ && file_.size >= kHashChunk && readable(file_.fd)) {
      stream_ = std::make_shared<HashWorker::Stream>(file_.fd, std::move(*hasher_));
      hasher_.reset();
    }
  }

  // The content's digest once every byte is on disk; nothing when one could not be read back.
  std::optional<std::string> digest() {
    if (!whole_) return state_->digest_of_parts();
    if (!stream_) return hasher_->hex_digest();
    state_->worker->feed(stream_, pos_);
    if (!state_->worker->finish(*stream_)) return std::nullopt;
    return stream_->hasher.hex_digest();
  }

  void start_writeback() {
    uint64_t until = on_disk_until();
    if (until < written_back_) written_back_ = start_;  // restarted from the beginning
    if (until - written_back_ < kWritebackChunk) return;
    sync_file_range(file_.fd, static_cast<off_t>(written_back_),
                    static_cast<off_t>(until - written_back_), SYNC_FILE_RANGE_WRITE);
    written_back_ = until;  // best effort: memory files and some filesystems refuse it
  }

  // A dropped connection resumes where it broke, at once after progress, a little later when
  // nothing new came; the transient-answer attempts start over after progress.
  std::optional<std::chrono::milliseconds> resume(const HttpResponse& response) {
    stalled_ = pos_ > last_pos_ ? 0 : stalled_ + 1;
    if (pos_ > last_pos_) attempts_ = 0;
    last_pos_ = pos_;
    if (stalled_ >= kMaxStalledResumes) {
      state_->fail("downloading " + file_.name + " keeps breaking (" + response.error +
                   "): check the network");
      return std::nullopt;
    }
    return std::chrono::milliseconds(stalled_ == 0 ? 0 : 200 * stalled_);
  }

  std::optional<std::chrono::milliseconds> finish_part() {
    if (--state_->parts_left > 0) return std::nullopt;
    if (file_.verify.algorithm && hashed_on_worker()) {
      // The worker may be behind: waiting here would stall every other transfer.
      if (whole_) {
        state_->worker->feed(stream_, pos_);
      } else {
        state_->move_frontier();
      }
      awaiting_digest_ = true;
      return std::nullopt;
    }
    return check_digest();
  }

  bool hashed_on_worker() const { return whole_ ? stream_ != nullptr : state_->stream != nullptr; }

  // The whole file is on disk: its digest against the expected one; a delay when it must be
  // fetched again.
  std::optional<std::chrono::milliseconds> check_digest() {
    const Verification& verify = file_.verify;
    std::string actual;
    if (verify.algorithm) {
      std::optional<std::string> hashed = digest();
      if (!hashed) {
        state_->fail("cannot read back the downloaded bytes of " + file_.name + " to verify them");
        return std::nullopt;
      }
      actual = *hashed;
    }
    if (!verify.algorithm || actual == verify.digest) {
      state_->result->ok = true;
      state_->result->bytes_resumed = state_->resumed;
      meter().add_file();
      return std::nullopt;
    }
    if (auto error = file_.source->explain_mismatch(actual)) {
      state_->fail(*error);
      return std::nullopt;
    }
    if (++state_->corrupt_retries <= kMaxCorruptRetries) return fetch_whole_again();
    state_->fail(file_.source->corrupt(actual));
    return std::nullopt;
  }

  // A checksum says that some byte went wrong, not which part holds it: the last part to finish
  // fetches the whole file again as one verified stream.
  std::chrono::milliseconds fetch_whole_again() {
    state_->parts_left = 1;
    state_->restart_whole();
    whole_ = true;
    part_ = 0;
    start_ = pos_ = last_pos_ = written_back_ = 0;
    held_.clear();
    end_ = file_.size;
    stalled_ = attempts_ = 0;
    return std::chrono::milliseconds(0);
  }

  std::shared_ptr<FileState> state_;
  RangedFile& file_;
  size_t part_;
  uint64_t start_, end_, pos_;
  uint64_t written_back_ = pos_;
  bool whole_;
  RetryPolicy policy_;
  std::optional<Hasher> hasher_;                // a whole small file's hash
  std::shared_ptr<HashWorker::Stream> stream_;  // a whole large file's hash
  std::string held_;  // received bytes of a page whose end has not arrived, from on_disk_until()
  bool awaiting_digest_ = false;  // the last part is on disk, its digest on the worker
  bool asked_range_ = false;
  uint64_t skip_ = 0;
  uint64_t last_pos_ = 0;
  int stalled_ = 0;
  int attempts_ = 0;
};

// Bytes [start, end) of a file, of which [start, from) are on disk from an interrupted run.
struct Part {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t from = 0;
};

// RangedFile::on_disk as its comment asks (sorted, disjoint, inside the file), and a digest to
// confirm those bytes: without one nothing on disk is trusted.
bool resumable(const RangedFile& file) {
  if (!file.verify.algorithm) return false;
  uint64_t next = 0;
  for (const ByteRange& span : file.on_disk) {
    if (span.first < next || span.last < span.first || span.last >= file.size) return false;
    next = span.last + 1;
  }
  return true;
}

// The parts of a file: one when it is at most part_size long. A part whose first byte is on
// disk starts where that span ends; bytes on disk further inside a part are fetched again.
std::vector<Part> plan_parts(const RangedFile& file, uint64_t part_size) {
  uint64_t size = file.size;
  size_t count = size > part_size ? static_cast<size_t>((size + part_size - 1) / part_size) : 1;
  bool resume = resumable(file);
  std::vector<Part> parts;
  for (size_t p = 0; p < count; ++p) {
    uint64_t start = p * part_size;
    uint64_t end = count == 1 ? size : std::min<uint64_t>(size, start + part_size);
    Part part{start, end, start};
    for (const ByteRange& span : file.on_disk) {
      if (resume && span.first <= start && start <= span.last) {
        part.from = std::min<uint64_t>(end, span.last + 1);
      }
    }
    parts.push_back(part);
  }
  return parts;
}

// Every byte of the file is on disk from an interrupted run: the digest alone says, without a
// request, whether it is the file. When it is not, every part starts from its first byte.
bool resumes_whole_file(RangedFile& file, std::vector<Part>& parts, RangedResult& result) {
  bool all = file.size > 0 && std::all_of(parts.begin(), parts.end(),
                                          [](const Part& part) { return part.from == part.end; });
  if (!all) return false;
  std::optional<Hasher> hasher = new_hasher(file.verify);
  if (hasher && hash_range(file.fd, *hasher, 0, file.size) &&
      hasher->hex_digest() == file.verify.digest) {
    result.ok = true;
    result.bytes_resumed = file.size;
    meter().add_file();
    return true;
  }
  for (Part& part : parts) part.from = part.start;
  if (file.on_progress) file.on_progress({});  // the journal's claim was wrong
  return false;
}

}  // namespace

std::optional<Hasher> new_hasher(const Verification& verify) {
  if (!verify.algorithm) return std::nullopt;
  Hasher hasher(*verify.algorithm);
  if (!verify.prefix.empty()) hasher.update(verify.prefix);
  return hasher;
}

std::vector<RangedResult> download_ranged(HttpEngine& http, std::vector<RangedFile>& files,
                                          const RangedOptions& options) {
  std::vector<RangedResult> results(files.size());
  HashWorker worker;
  std::vector<std::unique_ptr<RangeExchange>> exchanges;
  uint64_t bytes = 0;  // to fetch: the bytes on disk never come over the wire
  for (size_t i = 0; i < files.size(); ++i) {
    auto state = std::make_shared<FileState>();
    state->file = &files[i];
    state->result = &results[i];
    state->part_size = options.part_size;
    state->worker = &worker;
    std::vector<Part> parts = plan_parts(files[i], options.part_size);
    if (resumes_whole_file(files[i], parts, results[i])) continue;
    std::optional<Hasher> hasher = parts.size() > 1 ? new_hasher(files[i].verify) : std::nullopt;
    if (hasher)
      state->stream = std::make_shared<HashWorker::Stream>(files[i].fd, std::move(*hasher));
    for (const Part& part : parts) {
      state->written.push_back(part.from);
      state->resumed += part.from - part.start;
    }
    state->on_disk = state->reported = state->resumed;
    state->move_frontier();  // the resumed prefix, read back from disk
    bytes += files[i].size - state->resumed;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].from == parts[p].end && parts.size() > 1) continue;  // on disk already
      ++state->parts_left;
      exchanges.push_back(std::make_unique<RangeExchange>(
          state, p, parts[p].start, parts[p].end, parts[p].from, parts.size() == 1, options.retry));
    }
  }
  meter().expect(bytes, files.size());
  // Digests computed on the worker are checked once the transfers are done; a file that must
  // be fetched again runs in another round.
  std::vector<Exchange*> round;
  for (auto& e : exchanges) round.push_back(e.get());
  while (!round.empty()) {
    http.run(round, options.parallel);
    round.clear();
    for (auto& e : exchanges) {
      if (e->awaiting_digest() && e->settle()) round.push_back(e.get());
    }
  }
  return results;
}

}  // namespace neuron_cache::net
