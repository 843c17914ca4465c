// Compile leases in a cache store (format/lease.h): one compile of a configuration across the
// machines of a fleet. Before compiling a miss a machine claims the configuration's lease; the
// others see it live and wait for the result instead of compiling the same graphs; the holder
// renews it while it compiles and marks it done after its push, or released when it stops
// without a result. A lease whose holder stopped renewing (a killed runner) expires, and one
// waiter takes it over.
//
// Every write carries the version of the lease file read just before (SmallFile::expected), which
// the store enforces (the Hub's parent commit, a folder's lock, S3's If-Match / If-None-Match),
// so of two machines claiming one lease exactly one wins. On an S3-compatible
// server that ignores conditions the read-back check only narrows the race: leases are then
// advisory (enforced() is false) and reports say so.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "neuron_cache/fleet/lease_watch.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/sys/temp_file.h"

namespace neuron_cache::fleet {

struct LeaseOptions {
  // How long a lease lives without renewal; the holder renews it every third of that (on the
  // Hub: LeaseTimes).
  std::chrono::seconds ttl{600};
  std::string host;            // this machine's name, for the other machines' messages
  net::RetryPolicy conflicts;  // between claims that met another writer's commit
  // The clocks (tests move them; default: the system's). `wall_clock`, seconds since 1970, is
  // written into this machine's leases and read by nobody against another clock but to find
  // damaged leases; `monotonic` measures how long another machine's lease went unrenewed.
  std::function<int64_t()> wall_clock;
  MonotonicClock monotonic;
};

// How this machine judges another machine's lease (LeaseWatch): never by its own wall clock.
struct Verdict {
  bool waits = false;  // compiling, renewed within its life, not damaged, its holder not ended
  std::optional<std::string> damaged;  // why no live holder could have written it
  bool expired = false;                // compiling, but not renewed for longer than its life
  int64_t unrenewed = 0;  // seconds since its last renewal, as far as this machine can tell
  int64_t life = 0;       // the life its holder promised (lease::Record::promised_life)
};

// Another machine's lease as read now, and the verdict on it.
struct Observed {
  lease::Record record;
  Verdict verdict;
};

// On the Hub every claim, renewal and end of a lease is a commit, and the Hub limits a repo's
// commits per hour ("exceeded our hourly quotas for action: commit"): there a holder renews at
// most once per kHubRenewalSpacingSeconds.
inline constexpr int64_t kHubRenewalSpacingSeconds = 30 * 60;

// When one holder's leases expire and are renewed, in seconds since 1970. S3 and folders: a lease
// lives the ttl and is renewed every third of it. The Hub: a lease is claimed for the compile's
// expected time plus the ttl, and renewed only once the compile runs past that, for
// kHubRenewalSpacingSeconds plus the ttl; a lease claimed between two renewals lives until the
// next one may come, so one renewal (one commit) serves every lease the holder has.
struct LeaseTimes {
  storage::Kind kind = storage::Kind::Hub;
  std::chrono::seconds ttl{600};

  // The expiry of a lease claimed at `now` for a compile expected to take `expected_seconds`
  // (0: unknown), by a holder whose last renewal was at `last_renewal` (0: none yet).
  int64_t claimed_until(int64_t now, double expected_seconds, int64_t last_renewal) const;
  // The expiry a renewal at `now` gives.
  int64_t renewed_until(int64_t now) const;
  // Whether a holder whose earliest lease expires at `earliest_expiry` renews at `now`: with two
  // thirds of the ttl left, and on the Hub not sooner than kHubRenewalSpacingSeconds after its
  // last renewal.
  bool renewal_due(int64_t now, int64_t earliest_expiry, int64_t last_renewal) const;
};

// A configuration whose lease is claimed.
struct ClaimRequest {
  std::string compiler_version;
  std::string key;
  std::string configuration;
  double expected_seconds = 0;  // the holder's estimate of the compile (0: unknown)
};

// The holder's end of one lease.
struct LeaseEnd {
  std::string compiler_version;
  std::string key;
  lease::State state = lease::State::Done;  // Done after its push, Released otherwise
  std::string note;                         // with Released: why
};

// What claiming a lease found.
struct Claim {
  bool taken = false;      // this process holds the lease now
  bool took_over = false;  // ... from a holder that stopped without a result
  // When not taken: the live lease of another machine. When taken over: the one replaced.
  std::optional<lease::Record> other;
  Verdict verdict;  // on `other`
};

class Leases {
 public:
  // `store` outlives this object and is safe to call from two threads (the renewal runs on its
  // own).
  Leases(storage::Store& store, LeaseOptions options);
  // Stops renewing and releases every lease still held ("the process ended without a result"),
  // so waiters need not wait for the expiry. Failures there are only logged.
  ~Leases();
  Leases(const Leases&) = delete;
  Leases& operator=(const Leases&) = delete;

  // Takes the lease of `key` unless another machine holds a live one, or marked it done (its
  // result should be in the store) and `over_done` is false. `expected_seconds`: the holder's
  // estimate of the compile (0: unknown), shown to the machines that wait. Throws what the
  // store throws.
  Claim claim(const std::string& compiler_version, const std::string& key,
              const std::string& configuration, double expected_seconds, bool over_done = false);
  // The same for several configurations at once: one commit on the Hub, whatever their number.
  std::vector<Claim> claim(const std::vector<ClaimRequest>& requests, bool over_done = false);
  // The lease of `key` as the store holds it now, judged; nothing when there is none or its file
  // is not a lease. Throws what the store throws.
  std::optional<Observed> read(const std::string& compiler_version, const std::string& key);
  // The holder's end of a lease it holds: Done after its push, Released (with why) otherwise.
  // A lease this process no longer holds is left alone. Throws what the store throws; the leases
  // are then still held (a later call, or the destructor, tries again).
  void finish(const std::string& compiler_version, const std::string& key, lease::State state,
              const std::string& note);
  // The same for several leases at once: one commit on the Hub.
  void finish(const std::vector<LeaseEnd>& ends);
  // Seconds until the last of the leases of `ends` this process still holds expires, as it wrote
  // them (0 when none is held or all have expired): how long ending them still spares the
  // machines that wait for them.
  int64_t seconds_left(const std::vector<LeaseEnd>& ends) const;
  // The writes that mark "done" the leases of `keys` this process holds, for the commit on `head`
  // that publishes their results (transfer::AlsoCommit): the lease ends in the push's own commit.
  // Each write expects the version read, so a lease another machine took over is left alone.
  std::vector<storage::CommitOperation> done_in_commit(const std::string& head,
                                                       const std::vector<std::string>& keys);
  // After that commit: when it `landed`, those leases are no longer held (finish() skips them);
  // otherwise finish() ends them in a commit of their own.
  void after_commit(bool landed);
  // Whether the store refuses a conditional write itself: false makes leases advisory.
  bool enforced();
  // Leases another machine took over while this one held them (its renewals came too late).
  std::vector<std::string> lost() const;
  // Seconds since 1970 now on this machine's clock: what it writes in its leases and shows.
  static int64_t now();
  // Whether `lease` is compiling but its holder, a process of this machine, has ended.
  static bool holder_ended(const lease::Record& lease);

 private:
  struct Held {
    std::string compiler_version;
    std::string configuration;
    lease::Record record;
  };
  // What update() asks of each lease it read (with the verdict on another machine's): the
  // record to write, or nothing to leave it.
  using Decide = std::function<std::optional<lease::Record>(
      size_t index, const std::optional<lease::Record>&, const Verdict&)>;
  // Reads the leases at `paths` at the store's head and writes what `decide` makes of each, in
  // one commit conditional on the versions read, again from the new head while another writer
  // gets in between. Returns what was written, by index.
  std::vector<std::optional<lease::Record>> update(const std::vector<std::string>& paths,
                                                   const std::string& what, const Decide& decide);
  lease::Record fresh(const std::string& key, const std::string& configuration,
                      double expected_seconds) const;
  int64_t wall_now() const;
  // The verdict on `record`, another machine's lease read at `path` as `read` (at `revision`).
  Verdict judge(const std::string& path, const std::string& revision,
                const storage::SmallFile& read, const lease::Record& record);
  void renew_loop();
  // The paths of the held leases when their renewal is due now, else none (mutex_ held).
  std::vector<std::string> due_for_renewal() const;
  void renew(const std::vector<std::string>& paths);

  storage::Store& store_;
  LeaseOptions options_;
  std::string holder_;  // this process's random id
  LeaseWatch watch_;    // when each version of other machines' leases was first seen
  LeaseTimes times_;
  std::atomic<int64_t> last_renewal_ = 0;  // seconds since 1970; 0: none yet
  std::mutex io_mutex_;                    // store reads and writes of leases, one at a time
  mutable std::mutex mutex_;               // the fields below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, Held> held_;  // by path
  std::vector<std::string> lost_;
  // What the last done_in_commit() offered: the paths and the files the commit reads.
  std::vector<std::string> offered_;
  std::vector<std::unique_ptr<sys::TempFile>> offered_files_;
  std::thread renewer_;
};

}  // namespace neuron_cache::fleet
