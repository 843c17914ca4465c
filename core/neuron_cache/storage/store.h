// The storage seam: where a shared compile cache lives. The pipeline (plan, prefetch, compile,
// push) talks to a Store and nothing else; the Hugging Face Hub, an S3 bucket and a shared folder
// are backends of it, one file each, chosen by URL in one place (storage/open.h):
//   org/name or hf://org/name   a Hub cache repo (optimum-neuron's layout)
//   s3://bucket/prefix          an S3 or S3-compatible bucket (libneuronxla's layout)
//   file:///path                a shared folder (NFS, FSx; the same layout)
// Every backend holds the same tree below its root: neuronxcc-<v>/MODULE_<key>/..., the
// neuronxcc-<v>/0_REGISTRY/... files and the artifact index (format/artifact_index.h), so a file's
// path is the same in every store. Policies (read-only, a cache failure is a miss) are wrappers
// around any Store (storage/policies.h), not flags.
//
// Failures: every method throws neuron_cache::Error with what failed, why and what to do
// (CommitConflict when a publication lost a race); missing files are values (nothing, or left
// out of a listing), never errors. Consumers read through list_or_failure, stat_or_failure and
// read_small_or_failure: a policy that turns failures into misses (storage/policies.h) hands
// them a Failure there, never a fabricated "absent", so what they keep across runs (paths-info
// answers, registry scans) never records a failure as a miss.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/store_name.h"
#include "neuron_cache/net/byte_range.h"

namespace neuron_cache::storage {

// One file (or folder, in a listing that is not recursive) of a store.
struct RemoteEntry {
  std::string path;  // relative to the store's root, '/'-separated
  bool is_directory = false;
  uint64_t size = 0;
  // The store's id of this version of the content: the Hub's git blob id (of the LFS pointer for
  // LFS files), an S3 ETag, a folder file's sha256. Opaque outside the backend, except that two
  // versions with equal ids have equal content.
  std::string oid;
  // The sha256 of the content as the store lists it (Hub LFS files, S3 objects with the sha256
  // metadata), or empty when it lists none.
  std::string listed_sha256;
  // When the store lists no sha256 (a file known from an artifact index): the sha256 of its
  // content, which downloads verify instead.
  std::string content_sha256;
  // When this version was written, in seconds since 1970 as the store lists it (S3's
  // LastModified, a folder file's mtime), or 0 when the store lists none (the Hub's tree without
  // `expand`). What gc's grace period is measured against.
  int64_t modified = 0;
  // The git blob id of the content, sha1("blob <size>\0" + content), when the store lists one
  // (the Hub's regular files: their oid), else empty. huggingface_hub's file cache names the blob
  // of such a file by it.
  std::string git_blob_id = {};
  // The id a copy of this content is kept under: the listed sha256, else the store's oid.
  const std::string& content_id() const { return listed_sha256.empty() ? oid : listed_sha256; }
};

struct DownloadRequest {
  std::string path;      // relative to the store's root
  int fd = -1;           // destination, written from offset 0; the caller owns it
  RemoteEntry expected;  // from a listing or an index: size and ids to verify against
  // Spans `fd` already holds from an interrupted run (its journal): not asked for again, and
  // kept only if the whole file then verifies (net::RangedFile::on_disk). Stores that copy
  // (a folder) ignore them and write the whole file.
  std::vector<net::ByteRange> on_disk = {};
  // Told the spans of `fd` on disk as the download goes (net::RangedFile::on_progress).
  std::function<void(const std::vector<net::ByteRange>&)> on_progress = {};
};

struct DownloadResult {
  bool ok = false;
  std::string error;
  uint64_t bytes = 0;
  std::string revision;  // the revision that served it (Hub: X-Repo-Commit), or empty
  // Not 0 when writing the bytes to the local destination failed with an errno
  // sys::is_disk_refusal names: the local disk's failure, not the store's.
  int disk_errno = 0;
  // Bytes of DownloadRequest::on_disk the verified file kept: not downloaded (0 unless ok).
  uint64_t bytes_resumed = 0;
};

// What a write expects to find at its path: the version a reader saw, so that a writer who
// merged what it read never replaces what another writer published since. Artifacts, whose paths
// are content-addressed (two writers write the same bytes), expect anything.
struct Expected {
  enum class Kind { Anything, Absent, Version } kind = Kind::Anything;
  // SmallFile::version as the store gave it; with Absent, what the store knows of the absence
  // (the Hub: the revision it was read at), or "".
  std::string token = {};

  static Expected anything() { return {}; }
  static Expected absent(std::string token = {}) { return {Kind::Absent, std::move(token)}; }
  static Expected at(std::string token) { return {Kind::Version, std::move(token)}; }
  bool conditional() const { return kind != Kind::Anything; }
  // Whether a file whose current version is `now` (nothing: absent) is as expected.
  bool met_by(const std::optional<std::string>& now) const;
};

// When the store wrote a file and when it answered, both read on the store's own clock (seconds
// since 1970): S3's Last-Modified and Date, a folder file's mtime and that of a file written just
// now beside it. Only their difference means something to another machine (its clock is not the
// store's); both are store text, bounded by whoever uses them.
struct StoreTimes {
  int64_t written = 0;
  int64_t now = 0;
};

// A small file (an index shard, a lease) as a reader saw it, with the version a write that
// replaces it expects. The version is opaque outside the backend: an S3 ETag, a folder file's
// sha256, the Hub's commit and git blob id, the in-memory store's write counter.
struct SmallFile {
  std::optional<std::string> content;  // nothing when there is no such file
  std::string version = {};            // of an absent file: "" or where it was seen absent
  // When the store's answer carried them at no cost (S3's Last-Modified and Date), else nothing.
  std::optional<StoreTimes> times = {};

  // What a write replacing what was read expects: this version, or the file still absent.
  Expected expected() const { return content ? Expected::at(version) : Expected::absent(version); }
};

struct CommitOperation {
  enum class Kind { Add, Delete } kind = Kind::Add;
  std::string path;             // relative to the store's root
  std::filesystem::path local;  // content to upload for Add
  // What the file must still be for the operation to land (else the store throws
  // CommitConflict): the version its writer read, or anything for an artifact.
  Expected expected = {};
};

struct CommitResult {
  bool committed = false;  // false when nothing changed: nothing was written
  std::string revision;    // the new revision (Hub: the commit id); stores without: empty
  std::string link;        // where a user can see it (Hub: the commit's page), or empty
  size_t small_files = 0;  // sent inline with the commit (Hub) or written as they are
  size_t large_sent = 0;   // large files sent (Hub LFS, S3 multipart or single PUT, copies)
  size_t large_already_stored = 0;  // large files the store already held, not sent
  size_t unchanged = 0;
  size_t deleted = 0;
  uint64_t bytes_sent = 0;
  // Set when the store's answer to the publication was lost (no answer, 5xx) but reading it
  // back showed every file in place: what happened, for the user.
  std::string landed_unanswered;
  // Housekeeping beside the publication (S3: abandoned multipart uploads aborted): what was
  // done, and what failed. A failure there never fails the publication.
  size_t uploads_aborted = 0;
  std::vector<std::string> warnings;
};
// Adds a later publication to `into`: counts add up, the later revision and link win (the newest
// commit is the store's head), messages accumulate.
CommitResult& operator+=(CommitResult& into, const CommitResult& later);

// What a killed writer left in a store that no publication will ever sweep: a folder store's
// temporary copies (".<name>.<12 hex>.tmp", and probes of the same shape) and empty MODULE_
// folders; an S3 multipart upload whose in-store record outlived it. Found by
// Store::leftovers, removed by Store::remove_leftovers (gc's dry run and --apply).
struct Leftover {
  enum class Kind { Copy, EmptyFolder, Upload } kind = Kind::Copy;
  std::string path;  // relative to the store's root: the file, folder or upload record
  uint64_t size = 0;
  int64_t age = 0;  // seconds since it was last written, on the store's clock
  // For reports: what it is and why no live writer owns it.
  std::string why = {};
  // Upload: the path the upload was writing (relative to the root) and its id; both empty for a
  // damaged record (only the record goes).
  std::string target = {};
  std::string upload_id = {};
};
std::string_view leftover_kind_name(Leftover::Kind kind);  // "copy", "empty folder", "upload"

// How old a leftover must be before no live writer can own it.
struct LeftoverAges {
  int64_t now = 0;          // seconds since 1970
  int64_t copy = 3600;      // a copy or probe takes seconds to write
  int64_t folder = 86'400;  // gc's grace: a writer makes its folder before its first file
  int64_t upload = 86'400;  // the largest NEFF goes up in minutes
};

// What remove_leftovers did: failures are values (housekeeping never fails gc).
struct LeftoverRemoval {
  size_t removed = 0;
  std::vector<std::string> kept;  // each: what was kept and why (young again, failed, refused)
};

// Why a read failed, as a value: what a policy hands consumers instead of throwing.
struct Failure {
  std::string message;  // what failed and why, as the store's error said it
  ErrorKind kind = ErrorKind::Operational;
};

// A read's answer or its failure (as ccache's expected<optional<T>, Failure> and sccache's
// Ok(Miss) vs Err): "absent" is an answer (an empty listing, nothing), a failure is not. A failed
// read may count as a miss for the run, but must never be kept as an answer.
template <class T>
class Read {
 public:
  Read(T answer) : state_(std::move(answer)) {}          // NOLINT: an answer converts implicitly
  Read(Failure failure) : state_(std::move(failure)) {}  // NOLINT: so does a failure

  bool failed() const { return std::holds_alternative<Failure>(state_); }
  // Only when failed().
  const Failure& failure() const { return std::get<Failure>(state_); }
  // The answer; throws the failure as an Error when there is none.
  const T& value() const {
    if (failed()) throw Error(failure().kind, failure().message);
    return std::get<T>(state_);
  }
  // The answer, or what a miss gives (T{}) for this run only: never keep it when failed().
  T or_miss() const { return failed() ? T{} : std::get<T>(state_); }

 private:
  std::variant<T, Failure> state_;
};

// A store's kind is the kind of the name that opens it (one enum for both).
using Kind = store_name::StoreKind;
std::string_view kind_name(Kind kind);  // "hub", "s3", "folder"
// The kind kind_name gives `name`; "" (no store) reads as the Hub, optimum-neuron's default.
Kind kind_named(std::string_view name);

// How every message names a store. The Hub keeps the words optimum-cli users know; other stores
// must not be called the Hub. "the Hub", "S3", "the shared folder".
std::string describe(Kind kind);
// Which one, for messages about this store: "the Hub", "s3://bucket/prefix", "the shared folder
// /path" (`location` as Store::location gives it).
std::string describe(Kind kind, std::string_view location);
// "on the Hub", "on S3", "in the shared folder".
std::string on(Kind kind);
// A part of the store ("cache", "index"): "the Hub cache", "the index in s3://bucket/prefix".
std::string describe_part(Kind kind, std::string_view location, std::string_view part);

class Store {
 public:
  virtual ~Store() = default;

  // Which backend, and where, without secrets: "hf://org/name", "s3://bucket/prefix",
  // "file:///path". What reports name.
  virtual Kind kind() const = 0;
  virtual std::string location() const = 0;
  // How messages name it: a Hub store by its repo id (as optimum-cli does, and what
  // optimum-neuron's CUSTOM_CACHE_REPO takes), other stores by their location.
  virtual std::string name() const { return location(); }

  // The revision later reads are pinned to: the Hub's head commit. Stores without snapshots
  // return "" and every read sees the latest state.
  virtual std::string head() = 0;
  // Files below `path` ("" for the root), following every page; `recursive` false lists one
  // level, folders included. A missing folder gives nothing.
  virtual std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                        const std::string& revision) = 0;
  // The entries of these exact paths that exist (missing ones are left out).
  virtual std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                        const std::string& revision) = 0;
  // stat() with each entry's `modified` (0 when the store cannot say), for a store whose
  // listings carry no times: the Hub's last commit touching each path, files or folders (costly
  // there: ask for few). Stores whose listings carry times: stat().
  virtual std::vector<RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                              const std::string& revision);
  // A small file (an index shard, a lease, a registry file) with the version read, which a
  // write replacing it carries (SmallFile::expected) so that it lands only on that version.
  // Refuses files larger than max_bytes. The store keeps nothing of the read.
  virtual SmallFile read_versioned(const std::string& path, const std::string& revision,
                                   uint64_t max_bytes) = 0;
  // When the store wrote `path` and its time now, on its own clock, for a reader that must judge
  // a file's age without trusting its own clock nor the writer's (compile leases): nothing when
  // the store cannot say or the file is absent. The folder store writes and removes a probe file
  // beside it; the default asks nothing.
  virtual std::optional<StoreTimes> write_times(const std::string& path,
                                                const std::string& revision);
  // read_versioned's content, or nothing when there is no such file: for readers that do not
  // write it back.
  std::optional<std::string> read_small(const std::string& path, const std::string& revision,
                                        uint64_t max_bytes) {
    return read_versioned(path, revision, max_bytes).content;
  }
  // Downloads every request in parallel into its descriptor; each file is verified while it
  // streams against the request's expected size and ids and resumed after a dropped connection.
  // Failures are values, one per request.
  virtual std::vector<DownloadResult> download(const std::string& revision,
                                               std::vector<DownloadRequest>& requests) = 0;
  // The reads consumers use: as list(), stat() and read_small(), except that a failure the
  // store's policy absorbs (absorbs()) is a Failure value; any other failure throws.
  Read<std::vector<RemoteEntry>> list_or_failure(const std::string& path, bool recursive,
                                                 const std::string& revision);
  Read<std::vector<RemoteEntry>> stat_or_failure(const std::vector<std::string>& paths,
                                                 const std::string& revision);
  Read<std::optional<std::string>> read_small_or_failure(const std::string& path,
                                                         const std::string& revision,
                                                         uint64_t max_bytes);
  // Whether a failed read (`operation`: "list", "stat", "read") is handed to the consumer as a
  // Failure instead of thrown; a policy may record it. Backends absorb nothing.
  virtual bool absorbs(const std::string& operation, const Error& error);

  // Whether `content` is the content `entry` lists (by its ids); true when it lists none.
  virtual bool content_matches(const RemoteEntry& entry, std::string_view content) const = 0;

  // Publishes every operation: the Hub makes ONE commit on top of `parent` (its head()); S3 and
  // folders write the unconditional operations (artifacts) first and the conditional ones (index
  // files, leases) last. Each operation with an expectation lands only if its file is still as
  // expected, which the store itself checks (the Hub: at the parent, which the commit requires;
  // S3: If-Match / If-None-Match and a read-back; a folder: under its lock; memory: compared).
  // Throws CommitConflict when the store moved; files it already holds with the same content are
  // not sent again.
  virtual CommitResult commit(const std::vector<CommitOperation>& operations,
                              const std::string& message,
                              const std::optional<std::string>& parent) = 0;
  // What killed writers left (see Leftover) that is older than `ages` says; the Hub (one commit
  // lands whole) and the default have none. Throws the store's Error when it cannot be read.
  virtual std::vector<Leftover> leftovers(const LeftoverAges& ages);
  // Removes `found` (from leftovers()), each checked again first: the same shape, still that
  // old, never through a symlink. Nothing outside the store's root is touched.
  virtual LeftoverRemoval remove_leftovers(const std::vector<Leftover>& found,
                                           const LeftoverAges& ages);
  // Replaces the store's history with one revision of its current files and returns it (the
  // Hub's super-squash of main: how it frees the storage of deleted files). Irreversible. Stores
  // without history (S3, folders: a deletion frees its bytes at once) throw an input Error.
  virtual std::string squash_history(const std::string& message);
  // Whether `revision` still resolves: a squashed history forgets its old commits. Stores without
  // snapshots: always. Throws when the store cannot say.
  virtual bool has_revision(const std::string& revision);
  // Why nothing may be written (read-only policy, a read-only Hub token), or "" when writes may
  // be tried. Asked before a push so that nothing is sent in vain.
  virtual std::string why_not_writable() = 0;
  // Whether the store itself refuses a commit() whose expectation (CommitOperation::expected) no
  // longer holds (the Hub's parent commit, a folder's lock, S3's If-Match / If-None-Match). False
  // for an S3-compatible server that ignores conditions (probed once): its writers check by reading
  // back, which narrows a race but cannot close it, so what relies on it (compile leases) is
  // advisory.
  virtual bool checks_conditional_writes() = 0;

  // A URL a plain downloader (Bazel's, curl) can read `path` from at `revision` without this
  // tool, or "" when there is none (S3: requests must be signed). `needs_token` says whether it
  // must carry the Hub token.
  struct Url {
    std::string url;
    bool needs_token = false;
  };
  virtual Url download_url(const std::string& revision, const std::string& path) const = 0;

  // Requests sent so far (for reports and tests), and why the store was found unreachable in
  // this run (no further request is made), or "".
  virtual uint64_t requests() const = 0;
  virtual std::string unreachable() const = 0;
  // After the store was found unreachable: send requests to it again (one attempt; a failure
  // marks it unreachable again at once). Machines waiting on the store call it before each poll:
  // an outage changes nothing about waiting.
  virtual void look_again() {}
  // Offline mode (HF_HUB_OFFLINE): nothing is asked of a remote store.
  virtual bool offline() const = 0;
};

// describe(kind, location) and describe_part of a store; none (no shared cache) reads as the Hub.
std::string describe(const Store* store);
std::string describe_part(const Store* store, std::string_view part);

}  // namespace neuron_cache::storage
