// Installing a MODULE_ entry into the local cache so that a reader never sees model.done next to
// an incomplete model.neff, and a writer killed at any point leaves nothing that classifies as
// SUCCESS. Files are staged under <root>/.cache/huggingface/neuron-cache-staging (same
// filesystem), flushed, then renamed into the entry under its lock. model.done is written by the
// installer alone, empty, last, and only for a staged folder holding model.neff: callers never
// stage it (what they stage under that name is replaced), and a folder without its NEFF is
// refused. Staging folder names are a digest of the module's, so they never grow with it.
// A traced export folder (MODULE_<entry hash>, layout::is_traced_module_name) has no model.done:
// its staged folder is renamed into place whole, so it appears under its name only with every
// file (sub-folders included) in place. It takes no lock file (one would make it LOCKED).
// A staging folder also holds the journals of its partly downloaded files (download_journal.h),
// which never go into the entry: a later run resumes those files from what they say.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neuron_cache/local/download_journal.h"
#include "neuron_cache/sys/file_lock.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {

// Exclusive locks of both kinds (an flock and a record lock, sys::try_lock_both_kinds) on
// <entry>/model.hlo_module.pb.lock, the file libneuronxla locks while it compiles an entry with a
// kind it does not document, so neuron-cache and the compiler never write one entry at once.
class EntryLock {
 public:
  static EntryLock acquire(const sys::SafeDir& entry_dir, std::chrono::milliseconds timeout);
  // One attempt, no wait: nothing when another process (or another EntryLock of this one) holds
  // it. Creates the lock file when missing, as acquire does.
  static std::optional<EntryLock> try_acquire(const sys::SafeDir& entry_dir);
  EntryLock(EntryLock&&) noexcept = default;
  ~EntryLock();
  // Deletes the lock file, then releases the lock: an entry left complete carries no lock file.
  void release_and_remove();

 private:
  EntryLock(sys::UniqueFd dir_fd, sys::UniqueFd fd)
      : dir_fd_(std::move(dir_fd)), fd_(std::move(fd)) {}
  sys::UniqueFd dir_fd_;
  sys::UniqueFd fd_;
};

enum class InstallOutcome { Installed, AlreadyComplete };

class EntryInstall {
 public:
  EntryInstall(const std::filesystem::path& cache_root, std::string compiler_dir,
               std::string module_name);
  ~EntryInstall();
  EntryInstall(const EntryInstall&) = delete;
  EntryInstall& operator=(const EntryInstall&) = delete;

  // A new staged file ('/'-separated path inside the entry); the caller streams into it.
  sys::UniqueFd create_file(std::string_view relative_path);
  void add_file(std::string_view relative_path, std::string_view content);
  // Stages the regular file `source` (never a symlink) as a hard link, or as a copy when it
  // cannot be linked (another filesystem, link limit, fs.protected_hardlinks).
  void link_file(std::string_view relative_path, const std::filesystem::path& source);

  // A file a staged-whole candidate must match to be reused.
  using ExpectedFile = local::ExpectedFile;
  // Stages the open regular file `fd` from another place (the HF file cache) as `file.name` when
  // it holds exactly `file.size` bytes hashing to `file.sha256`, verified now: hard-linked when it
  // is on this filesystem and nobody but this user may change it (the entry shares its inode),
  // else copied, the copy's own bytes hashed as they are written. False, with nothing staged,
  // when it does not match (the caller downloads the file instead).
  bool stage_verified(int fd, const ExpectedFile& file);
  // The same for a file the store knows by its git blob id, sha1("blob <size>\0" + content) (a
  // regular git file on the Hub, whose blob the HF file cache names by that id): staged when
  // its `size` bytes hash to `git_blob_id`. The content's sha256 (hashed on the same pass), or
  // nothing, with nothing staged, when it does not match.
  std::optional<std::string> stage_verified_blob(int fd, const std::string& name, uint64_t size,
                                                 const std::string& git_blob_id);
  // A file of `wanted` a killed prefetch had partly downloaded, now staged here under its name:
  // `fd` open for writing, `written` the spans its journal says are on disk (not verified: the
  // download's digest does that).
  struct Partial {
    std::string name;
    sys::UniqueFd fd;
    std::vector<Span> written;
  };
  struct Reused {
    std::vector<std::string> files;  // names staged whole from abandoned folders
    uint64_t bytes = 0;
    std::vector<Partial> partial;  // the caller resumes these instead of creating them
  };
  // Stages, from the staging folders of this module a killed writer left (their flock is free),
  // every file of `wanted` found there whole (same size and sha256, verified now, not trusted),
  // then every other one whose journal says part of it is there: a regular file linked nowhere
  // else, no longer than the file, holding every span its journal claims. Those folders are
  // deleted afterwards. The caller downloads only what was not reused, and resumes the partial
  // files. `staging_folders`: list_staging_folders() of the cache, listed once per run.
  Reused reuse_abandoned(const std::vector<ExpectedFile>& wanted,
                         const std::vector<std::string>& staging_folders);

  // Notes in this staging folder's journal that the staged `file` holds `written` (sorted,
  // disjoint), for a run that resumes it after a kill. Best effort and never throws: a journal
  // that cannot be written only loses that resume.
  void record_progress(const ExpectedFile& file, const std::vector<Span>& written) noexcept;

  // Moves the staged content into the entry. An entry that is already SUCCESS (or TRACED) is
  // kept as it is.
  InstallOutcome commit(std::chrono::milliseconds lock_timeout = std::chrono::minutes(30));

  struct BatchItem {
    EntryInstall* install = nullptr;
    std::optional<InstallOutcome> outcome;  // set when it went in (or was already complete)
    std::string error;                      // set when it did not
  };
  // commit() for many staged entries at once, with the same guarantees (nothing looks complete
  // before its content is durable, model.done last) but three flushes of the filesystem in all
  // (before the renames, after them, after the model.done renames) instead of an fsync per file
  // and folder: a prefetch of 836 files spent 41% of its syscall time in 1,730 fsyncs.
  static void commit_all(std::vector<BatchItem>& items,
                         std::chrono::milliseconds lock_timeout = std::chrono::minutes(30));

  // Called at each step of commit(); tests use it to kill a writer at every point.
  std::function<void(std::string_view step)> on_step;

 private:
  struct Locked;
  // Stages `fd` as `path` when its `size` bytes hash to `sha256`, or (sha256 empty) to
  // `git_blob_id`: their sha256, else nothing staged.
  std::optional<std::string> stage_matching(int fd, const std::string& path, uint64_t size,
                                            const std::string& sha256,
                                            const std::string& git_blob_id);
  void step(std::string_view name);
  bool is_traced() const;
  InstallOutcome rename_traced_into_place();
  void sync_staged(const sys::SafeDir& dir);
  // The entry folder under its lock, or nothing when the entry is already SUCCESS.
  std::optional<Locked> lock_entry(std::chrono::milliseconds lock_timeout);
  // Renames every staged item but model.done and the journals into the entry.
  void move_content(const sys::SafeDir& entry);
  // The staging folders of this module a killed writer left, flock-ed until they are deleted.
  std::vector<std::pair<std::string, sys::SafeDir>> lock_abandoned(
      const std::vector<std::string>& staging_folders);
  // Stages the `file` of the abandoned staging folder `dir` when it is whole there.
  bool reuse_whole(const sys::SafeDir& dir, const ExpectedFile& file);
  // The `file` of the abandoned staging folder `dir`, staged here when its journal lets it resume.
  std::optional<Partial> adopt_partial(const sys::SafeDir& dir, const ExpectedFile& file,
                                       std::vector<Span> written);
  void stage_done_marker();

  std::filesystem::path root_;
  std::string compiler_dir_;
  std::string module_name_;
  std::string staging_name_;
  std::optional<sys::SafeDir> staging_area_;
  std::optional<sys::SafeDir> staging_;
  sys::UniqueFd staging_lock_;
  std::optional<sys::SafeDir> journals_;  // made by the first record_progress
  bool committed_ = false;
};

// Held by a prefetch for its whole run over one cache root (an flock on
// <root>/.cache/huggingface/neuron-cache-prefetch.lock): a second prefetch into the same cache
// waits, then finds installed what the first downloaded instead of downloading it again. A
// prefetch killed with -9 holds nothing: the kernel drops its flock with the process. The wait is
// bounded: the lock only saves downloads (each entry is installed under its own EntryLock), so
// past `wait` the second prefetch goes on beside the first.
inline constexpr std::chrono::minutes kPrefetchLockWait{30};
class PrefetchLock {
 public:
  // `on_wait` is called with a sentence naming the holder when another process holds it, and
  // again if the wait ends at its bound.
  static PrefetchLock acquire(const std::filesystem::path& cache_root,
                              const std::function<void(const std::string&)>& on_wait,
                              std::chrono::milliseconds wait = kPrefetchLockWait);
  PrefetchLock(PrefetchLock&&) noexcept = default;
  // Whether this prefetch holds the lock (false: it went on beside another one).
  bool held() const { return lock_.has_value(); }

 private:
  explicit PrefetchLock(std::optional<sys::FileLock> lock) : lock_(std::move(lock)) {}
  std::optional<sys::FileLock> lock_;
};

// What the staging folder names of one module start with ("<stem>.<pid>.<12 random>"): a digest,
// so a name never grows with the module's (up to 255 bytes) and two modules of different
// compiler folders never share one.
std::string staging_stem(std::string_view compiler_dir, std::string_view module);

// Refuses to write into a root anyone may rename entries in (world-writable without sticky bit).
void check_root_is_safe(const std::filesystem::path& root);

// The names in <root>/.cache/huggingface/neuron-cache-staging now (none when it is missing).
std::vector<std::string> list_staging_folders(const std::filesystem::path& cache_root);

// Deletes staging folders whose writer is gone (their flock is free). Returns bytes freed.
uint64_t remove_abandoned_staging(const std::filesystem::path& cache_root, bool dry_run,
                                  int* removed_count);

}  // namespace neuron_cache::local
