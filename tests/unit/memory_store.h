// A storage::Store in memory for tests that drive the pipeline in-process: files by path, a
// head revision that changes on every commit (reads at an older revision see that snapshot), and
// CommitConflict on a stale parent, as the Hub behaves, or when a file is not at the version an
// operation expects (each write's number is its version). Fault hooks make reads fail, answer
// slowly or list wrong sizes, or take the whole store down for a while (an outage), without a
// server.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::testing {

class MemoryStore : public storage::Store {
 public:
  // `repo`: the name messages give it ("acme/neuron-cache"); it presents itself as a Hub repo.
  explicit MemoryStore(std::string repo = "acme/neuron-cache");

  // Test hooks --------------------------------------------------------------------------------
  // Adds or replaces a file in a new revision (as a commit would), written at `when` (seconds
  // since 1970; 0: now), which stat_times() gives as the Hub gives a path's last commit.
  void put(const std::string& path, const std::string& content, int64_t when = 0);
  // The content of `path` at the head, or "" when there is none; whether it exists.
  std::string content(const std::string& path) const;
  bool has(const std::string& path) const;
  // Every path at the head.
  std::vector<std::string> paths() const;
  // The next `times` reads (list, stat, read_small, download) that touch a path starting with
  // `prefix` ("" for any) throw an operational Error, as a store answering 500 does.
  void fail_reads(const std::string& prefix, int times);
  // Reads that failed because of fail_reads so far.
  int failed_reads() const { return failed_reads_; }
  // stat_times() throws an operational Error, as a Hub refusing `expand` would.
  void fail_time_queries() { fail_times_queries_ = true; }
  // Every request waits this long first, as a slow store does.
  void answer_slowly(std::chrono::milliseconds delay) { delay_ = delay; }
  // list and stat report the size of files below `prefix` `extra` bytes larger than it is.
  void lie_about_sizes(const std::string& prefix, uint64_t extra);
  // The next `times` commits land, then throw CommitConflict: a commit whose answer was lost and
  // whose retry met the head it had moved itself.
  void lose_commit_answers(int times) { lost_answers_ = times; }
  // Revisions that still resolve (a squash leaves one).
  size_t revisions() const;
  // Commits made so far.
  int commits() const { return commits_.load(); }
  // The store's own clock (seconds since 1970; default the system's): the time of each write and
  // of each answer. Set before the store is used.
  void set_clock(std::function<int64_t()> clock) { clock_ = std::move(clock); }
  // read_versioned() gives the file's write time and the store's now (SmallFile::times), as S3's
  // Last-Modified and Date do; by default it gives none, as the Hub's resolve does not.
  void report_times(bool on) { report_times_ = on; }
  // A Store that forwards to this one, for a pipeline to own (Remotes::open_store) while the
  // test keeps the files across runs. `machine` names the process it stands for: the outage's
  // accounting below is by machine, and a handle that met the outage is unreachable on its own.
  std::unique_ptr<storage::Store> handle(const std::string& machine = "");

  // An outage ------------------------------------------------------------------------------
  // From go_down() to come_back() the store cannot be reached: every request (head, list, stat,
  // read, download, commit) fails as a refused connection does. A handle that met the outage is
  // then unreachable (unreachable() says why) and sends nothing more, each request failing at
  // once with "... was not tried: ...", until look_again(): as the HTTP stores are
  // (net::HttpEngine), the Hub's and S3's, each process on its own.
  void go_down();
  void come_back();
  // Requests `machine`'s handles sent at or after `since` (those that met the outage included;
  // none is sent while a handle is unreachable), and how many met the outage.
  int sent(const std::string& machine, std::chrono::steady_clock::time_point since = {}) const;
  int met_outage(const std::string& machine) const;
  // A commit that landed: when, and the paths it wrote or deleted.
  struct Landed {
    std::chrono::steady_clock::time_point when;
    std::vector<std::string> paths;
  };
  std::vector<Landed> landed() const;
  // Called after each request and each commit, on the thread that made it, with no lock of the
  // store held (a test awaits conditions on the store with it). Set before the store is used.
  void on_event(std::function<void()> observer) { observer_ = std::move(observer); }

  // storage::Store ----------------------------------------------------------------------------
  storage::Kind kind() const override { return storage::Kind::Hub; }
  std::string location() const override { return "hf://" + repo_; }
  std::string name() const override { return repo_; }
  std::string head() override;
  std::vector<storage::RemoteEntry> list(const std::string& path, bool recursive,
                                         const std::string& revision) override;
  std::vector<storage::RemoteEntry> stat(const std::vector<std::string>& paths,
                                         const std::string& revision) override;
  storage::SmallFile read_versioned(const std::string& path, const std::string& revision,
                                    uint64_t max_bytes) override;
  std::vector<storage::DownloadResult> download(
      const std::string& revision, std::vector<storage::DownloadRequest>& requests) override;
  bool content_matches(const storage::RemoteEntry& entry, std::string_view content) const override;
  storage::CommitResult commit(const std::vector<storage::CommitOperation>& operations,
                               const std::string& message,
                               const std::optional<std::string>& parent) override;
  // As the Hub's super-squash: one new revision of the head's files; older ones stop resolving.
  std::string squash_history(const std::string& message) override;
  bool has_revision(const std::string& revision) override;
  // As the Hub's paths-info with `expand`: a folder's time is its newest file's.
  std::vector<storage::RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                               const std::string& revision) override;
  std::string why_not_writable() override { return ""; }
  bool checks_conditional_writes() override { return true; }
  Url download_url(const std::string&, const std::string&) const override { return {}; }
  uint64_t requests() const override { return requests_; }
  // A MemoryStore used directly is never unreachable: its handles are (handle()).
  std::string unreachable() const override { return ""; }
  bool offline() const override { return false; }

 private:
  class Handle;  // handle(): one machine's way in (memory_store.cpp)

  struct File {
    std::string content;
    uint64_t version = 0;  // the write that left it: what read_versioned gives
  };
  using Files = std::map<std::string, File>;  // by path

  // Counts a request, waits as asked and throws when a fault hook says so.
  void request(const std::vector<std::string>& paths);
  // A request of `machine` (through its handle) is sent: true when it meets the outage.
  bool refused(const std::string& machine);
  void notify() const;
  const Files& at(const std::string& revision) const;  // locked
  void add_revision(Files files);                      // locked
  storage::RemoteEntry entry_of(const std::string& path, const std::string& content) const;
  // CommitConflict when a file of `head` is not as an operation expects.
  void check_expected(const Files& head,
                      const std::vector<storage::CommitOperation>& operations) const;

  std::string repo_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, Files>> revisions_;  // oldest first; the last is the head
  std::map<std::string, int64_t> written_;                // path -> when it was last written
  std::string fail_prefix_;
  int fail_times_ = 0;
  std::atomic<int> failed_reads_{0};
  std::chrono::milliseconds delay_{0};
  std::string lie_prefix_;
  uint64_t lie_extra_ = 0;
  std::atomic<uint64_t> requests_{0};
  std::atomic<int> commits_ = 0;  // read by tests while a renewal thread commits
  uint64_t writes_ = 0;           // files written so far: each write's version
  size_t squashed_below_ = 0;
  int lost_answers_ = 0;
  std::atomic<bool> fail_times_queries_{false};
  std::function<int64_t()> clock_;
  std::atomic<bool> report_times_{false};
  bool down_ = false;
  std::map<std::string, std::vector<std::chrono::steady_clock::time_point>> sent_;  // by machine
  std::map<std::string, int> met_outage_;                                           // by machine
  std::vector<Landed> landed_;
  std::function<void()> observer_;
  int64_t now() const;
};

}  // namespace neuron_cache::testing
