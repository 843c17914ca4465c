#include "neuron_cache/remote/leases.h"

#include "neuron_cache/error.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/remote/commit_on_head.h"
#include "neuron_cache/sys/random.h"
#include "neuron_cache/sys/temp_file.h"

namespace neuron_cache::remote {

Leases::Leases(storage::Store& store, LeaseOptions options)
    : store_(store), options_(std::move(options)), holder_(sys::random_hex(32)) {
  if (options_.ttl.count() < 3) options_.ttl = std::chrono::seconds(3);
  renewer_ = std::thread([this] { renew_loop(); });
}

Leases::~Leases() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  renewer_.join();
  std::vector<std::pair<std::string, Held>> left;
  {
    std::lock_guard lock(mutex_);
    left.assign(held_.begin(), held_.end());
  }
  for (const auto& [path, held] : left) {
    try {
      finish(held.compiler_version, held.record.key, lease::State::Released,
             "the process holding it ended without a result");
    } catch (const std::exception& error) {
      log::debug("lease",
                 "could not release " + path + ": " + error.what() + " (it expires by itself)");
    }
  }
}

int64_t Leases::now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Leases::enforced() {
  std::lock_guard lock(io_mutex_);
  return store_.checks_conditional_writes();
}

std::vector<std::string> Leases::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

lease::Record Leases::fresh(const std::string& key, const std::string& configuration,
                            double expected_seconds) const {
  lease::Record r;
  r.holder = holder_;
  r.host = options_.host;
  r.configuration = configuration;
  r.key = key;
  r.started = r.heartbeat = now();
  r.expires = r.started + options_.ttl.count();
  r.expected_seconds = expected_seconds;
  return r;
}

std::optional<lease::Record> Leases::update(
    const std::string& path, const std::string& what,
    const std::function<std::optional<lease::Record>(const std::optional<lease::Record>&)>&
        decide) {
  std::lock_guard lock(io_mutex_);  // one version read per path at a time
  std::optional<lease::Record> written;
  int attempts = 0;
  commit_on_head(store_, options_.conflicts, what, attempts, [&](const std::string& head) {
    written.reset();
    std::optional<std::string> text = store_.read_small(path, head, lease::kMaxLeaseBytes);
    std::optional<lease::Record> now = text ? lease::parse(*text) : std::nullopt;
    std::optional<lease::Record> next = decide(now);
    if (!next) return;
    sys::TempFile file(lease::serialize(*next));
    store_.commit({{storage::CommitOperation::Kind::Add, path, file.path()}},
                  "neuron-cache: lease of " + next->configuration + " (" +
                      std::string(lease::state_name(next->state)) + ")",
                  head);
    written = std::move(next);
  });
  return written;
}

Claim Leases::claim(const std::string& compiler_version, const std::string& key,
                    const std::string& configuration, double expected_seconds, bool over_done) {
  const std::string path = lease::remote_path(compiler_version, key);
  Claim claim;
  auto written = update(path, "claiming the lease of " + configuration,
                        [&](const std::optional<lease::Record>& now) {
                          claim = {};
                          bool done = now && now->state == lease::State::Done && !over_done;
                          if (now && now->holder != holder_ && (done || now->live(Leases::now()))) {
                            claim.other = now;
                            return std::optional<lease::Record>();
                          }
                          if (now && now->holder != holder_) {
                            claim.took_over = now->state != lease::State::Done;
                            claim.other = now;
                          }
                          return std::optional(fresh(key, configuration, expected_seconds));
                        });
  if (!written) return claim;
  claim.taken = true;
  std::lock_guard lock(mutex_);
  held_[path] = Held{compiler_version, configuration, *written};
  return claim;
}

std::optional<lease::Record> Leases::read(const std::string& compiler_version,
                                          const std::string& key) {
  std::lock_guard lock(io_mutex_);
  std::string head = store_.head();
  auto text =
      store_.read_small(lease::remote_path(compiler_version, key), head, lease::kMaxLeaseBytes);
  return text ? lease::parse(*text) : std::nullopt;
}

void Leases::finish(const std::string& compiler_version, const std::string& key, lease::State state,
                    const std::string& note) {
  const std::string path = lease::remote_path(compiler_version, key);
  {
    std::lock_guard lock(mutex_);
    if (held_.erase(path) == 0) return;
  }
  update(path, "releasing the lease of " + key, [&](const std::optional<lease::Record>& now) {
    if (!now || now->holder != holder_) return std::optional<lease::Record>();
    lease::Record next = *now;
    next.state = state;
    next.note = note;
    next.heartbeat = Leases::now();
    return std::optional(next);
  });
}

void Leases::renew_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.ttl / 3, [this] { return stopping_; });
    if (stopping_) return;
    std::vector<std::string> paths;
    for (const auto& [path, held] : held_) paths.push_back(path);
    lock.unlock();
    for (const auto& path : paths) renew(path);
    lock.lock();
  }
}

void Leases::renew(const std::string& path) {
  bool lost = false;
  try {
    update(path, "renewing the lease " + path, [&](const std::optional<lease::Record>& now) {
      lost = !now || now->holder != holder_ || now->state != lease::State::Compiling;
      if (lost) return std::optional<lease::Record>();
      lease::Record next = *now;
      next.heartbeat = Leases::now();
      next.expires = next.heartbeat + options_.ttl.count();
      return std::optional(next);
    });
  } catch (const std::exception& error) {
    // The next round tries again; the lease lasts three rounds.
    log::debug("lease", "could not renew " + path + ": " + error.what());
    return;
  }
  if (!lost) return;
  std::lock_guard lock(mutex_);
  if (held_.erase(path) > 0) lost_.push_back(path);
}

}  // namespace neuron_cache::remote
