#include "neuron_cache/fleet/leases.h"

#include <algorithm>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/process/identity.h"
#include "neuron_cache/remote/commit_on_head.h"
#include "neuron_cache/sys/random.h"
#include "neuron_cache/sys/temp_file.h"

namespace neuron_cache::fleet {

using Record = lease::Record;

int64_t LeaseTimes::claimed_until(int64_t now, double expected_seconds,
                                  int64_t last_renewal) const {
  if (kind != storage::Kind::Hub) return now + ttl.count();
  int64_t until =
      lease::add_seconds(now, lease::expected_whole_seconds(expected_seconds) + ttl.count());
  if (last_renewal > 0) until = std::max(until, renewed_until(last_renewal));
  // Longer reads as damaged to the other machines (lease::damaged).
  return std::min(until, now + lease::kMaxLifeSeconds);
}

int64_t LeaseTimes::renewed_until(int64_t now) const {
  if (kind != storage::Kind::Hub) return now + ttl.count();
  return now + kHubRenewalSpacingSeconds + ttl.count();
}

bool LeaseTimes::renewal_due(int64_t now, int64_t earliest_expiry, int64_t last_renewal) const {
  if (kind != storage::Kind::Hub) return true;  // every look, a third of the ttl apart
  int64_t lead = ttl.count() - ttl.count() / 3;
  bool spaced = last_renewal == 0 || now >= last_renewal + kHubRenewalSpacingSeconds;
  return spaced && now >= earliest_expiry - lead;
}

Leases::Leases(storage::Store& store, LeaseOptions options)
    : store_(store),
      options_(std::move(options)),
      holder_(sys::random_hex(32)),
      watch_(options_.monotonic) {
  if (options_.ttl.count() < 3) options_.ttl = std::chrono::seconds(3);
  // Longer reads as damaged to the other machines (lease::damaged).
  options_.ttl = std::min(options_.ttl, std::chrono::seconds(lease::kMaxTtlSeconds));
  times_ = {store_.kind(), options_.ttl};
  renewer_ = std::thread([this] { renew_loop(); });
}

Leases::~Leases() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  renewer_.join();
  std::vector<LeaseEnd> ends;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [path, held] : held_)
      ends.push_back({held.compiler_version, held.record.key, lease::State::Released,
                      "the process holding it ended without a result"});
  }
  try {
    finish(ends);
  } catch (const std::exception& error) {
    log::debug("lease", std::string("could not release the leases still held: ") + error.what() +
                            " (they expire by themselves)");
  }
}

int64_t Leases::now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t Leases::wall_now() const {
  return options_.wall_clock ? options_.wall_clock() : now();
}

bool Leases::holder_ended(const Record& lease) {
  return lease.state == lease::State::Compiling && process::ended(lease.process);
}

Verdict Leases::judge(const std::string& path, const std::string& revision,
                      const storage::SmallFile& read, const Record& record) {
  LeaseWatch::Sight sight = watch_.seen(path, read.content.value_or(""), [&] {
    // S3 gives its times with the read; a folder writes a probe (only for a new version).
    return read.times ? read.times : store_.write_times(path, revision);
  });
  Verdict v;
  // The heartbeat against the store's clock when the store said when it wrote it (the holder's
  // skew alone), else against this machine's: kMaxAheadSeconds covers both clocks' skews.
  v.damaged = sight.store_written
                  ? lease::damaged(record, *sight.store_written, "the store's clock")
                  : lease::damaged(record, wall_now());
  v.life = record.promised_life();
  v.unrenewed = sight.age;
  bool compiling = record.state == lease::State::Compiling;
  v.expired = compiling && sight.age > v.life + kExpiryGraceSeconds;
  v.waits = compiling && !v.damaged && !v.expired && !holder_ended(record);
  return v;
}

bool Leases::enforced() {
  std::lock_guard lock(io_mutex_);
  return store_.checks_conditional_writes();
}

std::vector<std::string> Leases::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

Record Leases::fresh(const std::string& key, const std::string& configuration,
                     double expected_seconds) const {
  Record r;
  r.holder = holder_;
  r.host = options_.host;
  r.configuration = configuration;
  r.key = key;
  r.started = r.heartbeat = wall_now();
  r.expires = times_.claimed_until(r.started, expected_seconds, last_renewal_);
  r.expected_seconds = expected_seconds;
  r.process = process::this_process();
  return r;
}

std::vector<std::optional<Record>> Leases::update(const std::vector<std::string>& paths,
                                                  const std::string& what, const Decide& decide) {
  std::vector<std::optional<Record>> written(paths.size());
  if (paths.empty()) return written;
  std::lock_guard lock(io_mutex_);  // the renewal thread and the callers, one at a time
  int attempts = 0;
  remote::commit_on_head(store_, options_.conflicts, what, attempts, [&](const std::string& head) {
    std::vector<std::optional<Record>> next(paths.size());
    std::vector<std::unique_ptr<sys::TempFile>> files;
    std::vector<storage::CommitOperation> operations;
    for (size_t i = 0; i < paths.size(); ++i) {
      storage::SmallFile read = store_.read_versioned(paths[i], head, lease::kMaxLeaseBytes);
      std::optional<Record> record = read.content ? lease::parse(*read.content) : std::nullopt;
      Verdict verdict;
      if (record && record->holder != holder_) verdict = judge(paths[i], head, read, *record);
      next[i] = decide(i, record, verdict);
      if (!next[i]) continue;
      files.push_back(std::make_unique<sys::TempFile>(lease::serialize(*next[i])));
      // Lands only on the version decided on: of two claimers, one wins.
      operations.push_back(
          {storage::CommitOperation::Kind::Add, paths[i], files.back()->path(), read.expected()});
    }
    if (!operations.empty()) store_.commit(operations, "neuron-cache: " + what, head);
    written = std::move(next);
  });
  return written;
}

Claim Leases::claim(const std::string& compiler_version, const std::string& key,
                    const std::string& configuration, double expected_seconds, bool over_done) {
  return claim({{compiler_version, key, configuration, expected_seconds}}, over_done).front();
}

std::vector<Claim> Leases::claim(const std::vector<ClaimRequest>& requests, bool over_done) {
  std::vector<std::string> paths;
  for (const auto& r : requests) paths.push_back(lease::remote_path(r.compiler_version, r.key));
  std::vector<Claim> claims(requests.size());
  auto decide = [&](size_t i, const std::optional<Record>& now,
                    const Verdict& verdict) -> std::optional<Record> {
    Claim& claim = claims[i];
    claim = {};
    if (now && now->holder != holder_) {
      // A lease no live holder wrote (lease::damaged) protects nothing, done or not.
      bool damaged = verdict.damaged.has_value();
      bool done = now->state == lease::State::Done && !over_done && !damaged;
      claim.other = now;
      claim.verdict = verdict;
      if (done || verdict.waits) return std::nullopt;
      claim.took_over = now->state != lease::State::Done || damaged;
    }
    const ClaimRequest& r = requests[i];
    return fresh(r.key, r.configuration, r.expected_seconds);
  };
  std::string what = requests.size() == 1 ? "lease of " + requests[0].configuration
                                          : std::to_string(requests.size()) + " compile leases";
  std::vector<std::optional<Record>> written = update(paths, "claiming the " + what, decide);
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!written[i]) continue;
    claims[i].taken = true;
    held_[paths[i]] = Held{requests[i].compiler_version, requests[i].configuration, *written[i]};
  }
  return claims;
}

std::optional<Observed> Leases::read(const std::string& compiler_version, const std::string& key) {
  std::lock_guard lock(io_mutex_);
  std::string head = store_.head();
  std::string path = lease::remote_path(compiler_version, key);
  storage::SmallFile read = store_.read_versioned(path, head, lease::kMaxLeaseBytes);
  std::optional<Record> record = read.content ? lease::parse(*read.content) : std::nullopt;
  if (!record) return std::nullopt;
  if (record->holder == holder_) return Observed{*record, {}};  // not a lease to wait for
  return Observed{*record, judge(path, head, read, *record)};
}

void Leases::finish(const std::string& compiler_version, const std::string& key, lease::State state,
                    const std::string& note) {
  finish(std::vector<LeaseEnd>{{compiler_version, key, state, note}});
}

void Leases::finish(const std::vector<LeaseEnd>& ends) {
  std::vector<std::string> paths;
  std::vector<const LeaseEnd*> mine;
  std::map<std::string, Held> ending;
  {
    std::lock_guard lock(mutex_);
    for (const LeaseEnd& end : ends) {
      std::string path = lease::remote_path(end.compiler_version, end.key);
      auto held = held_.find(path);
      if (held == held_.end()) continue;  // not held (any more) by this process
      ending.insert(held_.extract(held));
      paths.push_back(path);
      mine.push_back(&end);
    }
  }
  try {
    update(
        paths, "ending " + std::to_string(paths.size()) + " compile lease(s)",
        [&](size_t i, const std::optional<Record>& now, const Verdict&) -> std::optional<Record> {
          if (!now || now->holder != holder_) return std::nullopt;
          Record next = *now;
          next.state = mine[i]->state;
          next.note = mine[i]->note;
          next.heartbeat = wall_now();
          return next;
        });
  } catch (...) {
    // Still held, so that a later finish() (or the destructor) can end them: the machines that
    // wait for them would otherwise wait until they expire.
    std::lock_guard lock(mutex_);
    held_.merge(ending);
    throw;
  }
}

int64_t Leases::seconds_left(const std::vector<LeaseEnd>& ends) const {
  std::lock_guard lock(mutex_);
  int64_t left = 0;
  for (const LeaseEnd& end : ends) {
    auto held = held_.find(lease::remote_path(end.compiler_version, end.key));
    if (held != held_.end())
      left = std::max(left, lease::add_seconds(held->second.record.expires, -wall_now()));
  }
  return left;
}

std::vector<storage::CommitOperation> Leases::done_in_commit(const std::string& head,
                                                             const std::vector<std::string>& keys) {
  std::set<std::string> wanted(keys.begin(), keys.end());
  std::vector<std::string> paths;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [path, held] : held_)
      if (wanted.count(held.record.key)) paths.push_back(path);
  }
  std::lock_guard io(io_mutex_);
  offered_.clear();
  offered_files_.clear();
  std::vector<storage::CommitOperation> operations;
  for (const std::string& path : paths) {
    storage::SmallFile read = store_.read_versioned(path, head, lease::kMaxLeaseBytes);
    std::optional<Record> now = read.content ? lease::parse(*read.content) : std::nullopt;
    if (!now || now->holder != holder_) continue;  // taken over meanwhile: not ours to end
    Record next = *now;
    next.state = lease::State::Done;
    next.note.clear();
    next.heartbeat = wall_now();
    offered_files_.push_back(std::make_unique<sys::TempFile>(lease::serialize(next)));
    operations.push_back({storage::CommitOperation::Kind::Add, path, offered_files_.back()->path(),
                          read.expected()});
    offered_.push_back(path);
  }
  return operations;
}

void Leases::after_commit(bool landed) {
  std::lock_guard io(io_mutex_);
  if (landed) {
    std::lock_guard lock(mutex_);
    for (const std::string& path : offered_) held_.erase(path);
  }
  offered_.clear();
  offered_files_.clear();
}

void Leases::renew_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.ttl / 3, [this] { return stopping_; });
    if (stopping_) return;
    std::vector<std::string> paths = due_for_renewal();
    if (paths.empty()) continue;
    lock.unlock();
    renew(paths);
    lock.lock();
  }
}

std::vector<std::string> Leases::due_for_renewal() const {
  if (held_.empty()) return {};
  int64_t earliest = held_.begin()->second.record.expires;
  for (const auto& [path, held] : held_) earliest = std::min(earliest, held.record.expires);
  if (!times_.renewal_due(wall_now(), earliest, last_renewal_)) return {};
  // All of them: on the Hub one commit renews any number.
  std::vector<std::string> paths;
  for (const auto& [path, held] : held_) paths.push_back(path);
  return paths;
}

void Leases::renew(const std::vector<std::string>& paths) {
  std::vector<bool> lost(paths.size(), false);
  std::vector<std::optional<Record>> written;
  int64_t at = wall_now();
  // A renewal is the holder's poll of the store, and an outage changes nothing about it: one that
  // met the outage (and marked the store unreachable for the run) must not keep the next ones
  // from being sent, or the lease expires under a compile that runs on and is taken over.
  store_.look_again();
  try {
    written = update(
        paths, "renewing " + std::to_string(paths.size()) + " compile lease(s)",
        [&](size_t i, const std::optional<Record>& now, const Verdict&) -> std::optional<Record> {
          lost[i] = !now || now->holder != holder_ || now->state != lease::State::Compiling;
          if (lost[i]) return std::nullopt;
          Record next = *now;
          next.heartbeat = wall_now();
          next.expires = times_.renewed_until(next.heartbeat);
          return next;
        });
  } catch (const std::exception& error) {
    // The next round tries again; a lease lasts three rounds.
    log::debug("lease", std::string("could not renew the compile leases: ") + error.what());
    return;
  }
  if (std::any_of(written.begin(), written.end(), [](const auto& w) { return w.has_value(); }))
    last_renewal_ = at;
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < paths.size(); ++i) {
    if (lost[i] && held_.erase(paths[i]) > 0) lost_.push_back(paths[i]);
    auto held = held_.find(paths[i]);
    if (written[i] && held != held_.end()) held->second.record = *written[i];
  }
}

}  // namespace neuron_cache::fleet
