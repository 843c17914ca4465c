#include "memory_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/forwarding_store.h"
#include "test_support.h"

namespace neuron_cache::testing {
namespace {

// A 40-hex revision, as the Hub's commit ids are (some paths check the shape).
std::string revision_id(size_t n) {
  char text[41];
  std::snprintf(text, sizeof text, "%040zx", n + 1);
  return text;
}

bool below(const std::string& path, const std::string& folder) {
  return folder.empty() || path.starts_with(folder + "/");
}

// Why a request met the outage, as libcurl says of a refused connection.
constexpr const char* kRefused = "Couldn't connect to server: an outage the test asked for";

}  // namespace

// One machine's way into the store. Its requests are counted by machine, and once one met the
// outage the handle is unreachable, as net::HttpEngine makes an HTTP store: nothing more is sent
// (each request fails at once, quoting why) until look_again(). The messages are worded as the
// Hub client's, so the run's outage warning (pipeline/outages.h) recognises them.
class MemoryStore::Handle : public storage::ForwardingStore {
 public:
  Handle(MemoryStore& store, std::string machine)
      : ForwardingStore(store), store_(store), machine_(std::move(machine)) {}

  std::string head() override {
    reach("reading the head of " + name());
    return ForwardingStore::head();
  }
  std::vector<storage::RemoteEntry> list(const std::string& path, bool recursive,
                                         const std::string& revision) override {
    reach("listing " + path);
    return ForwardingStore::list(path, recursive, revision);
  }
  std::vector<storage::RemoteEntry> stat(const std::vector<std::string>& paths,
                                         const std::string& revision) override {
    reach("asking for " + std::to_string(paths.size()) + " paths");
    return ForwardingStore::stat(paths, revision);
  }
  std::vector<storage::RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                               const std::string& revision) override {
    reach("asking when " + std::to_string(paths.size()) + " paths were written");
    return ForwardingStore::stat_times(paths, revision);
  }
  storage::SmallFile read_versioned(const std::string& path, const std::string& revision,
                                    uint64_t max_bytes) override {
    reach("reading " + path);
    return ForwardingStore::read_versioned(path, revision, max_bytes);
  }
  std::vector<storage::DownloadResult> download(
      const std::string& revision, std::vector<storage::DownloadRequest>& requests) override {
    reach("downloading " + std::to_string(requests.size()) + " files");
    return ForwardingStore::download(revision, requests);
  }
  storage::CommitResult commit(const std::vector<storage::CommitOperation>& operations,
                               const std::string& message,
                               const std::optional<std::string>& parent) override {
    reach("committing to " + name());
    return ForwardingStore::commit(operations, message, parent);
  }
  std::string squash_history(const std::string& message) override {
    reach("squashing the history of " + name());
    return ForwardingStore::squash_history(message);
  }
  bool has_revision(const std::string& revision) override {
    reach("looking for revision " + revision);
    return ForwardingStore::has_revision(revision);
  }
  std::string unreachable() const override {
    std::lock_guard lock(mutex_);
    return unreachable_;
  }
  void look_again() override {
    std::lock_guard lock(mutex_);
    unreachable_.clear();
  }

 private:
  // Before each request: fails at once while unreachable; otherwise the request is sent, and
  // one that meets the outage makes the handle unreachable.
  void reach(const std::string& what) {
    {
      std::lock_guard lock(mutex_);
      if (!unreachable_.empty()) {
        throw operational_error(what + " was not tried: " + unreachable_ +
                                " earlier in this run, so no further request is made");
      }
    }
    bool refused = store_.refused(machine_);
    if (refused) {
      std::lock_guard lock(mutex_);
      if (unreachable_.empty())
        unreachable_ = location() + " could not be reached (" + kRefused + ")";
    }
    store_.notify();
    if (refused) throw operational_error(what + " failed: no answer (" + kRefused + ")");
  }

  MemoryStore& store_;
  const std::string machine_;
  mutable std::mutex mutex_;
  std::string unreachable_;  // why, once a request met the outage; "" after look_again()
};

std::unique_ptr<storage::Store> MemoryStore::handle(const std::string& machine) {
  return std::make_unique<Handle>(*this, machine);
}

void MemoryStore::go_down() {
  std::lock_guard lock(mutex_);
  down_ = true;
}

void MemoryStore::come_back() {
  std::lock_guard lock(mutex_);
  down_ = false;
}

bool MemoryStore::refused(const std::string& machine) {
  std::lock_guard lock(mutex_);
  sent_[machine].push_back(std::chrono::steady_clock::now());
  if (!down_) return false;  // the request goes on (request() counts it)
  ++requests_;
  ++met_outage_[machine];
  return true;
}

int MemoryStore::sent(const std::string& machine,
                      std::chrono::steady_clock::time_point since) const {
  std::lock_guard lock(mutex_);
  auto it = sent_.find(machine);
  if (it == sent_.end()) return 0;
  return static_cast<int>(std::count_if(it->second.begin(), it->second.end(),
                                        [&](const auto& when) { return when >= since; }));
}

int MemoryStore::met_outage(const std::string& machine) const {
  std::lock_guard lock(mutex_);
  auto it = met_outage_.find(machine);
  return it == met_outage_.end() ? 0 : it->second;
}

std::vector<MemoryStore::Landed> MemoryStore::landed() const {
  std::lock_guard lock(mutex_);
  return landed_;
}

void MemoryStore::notify() const {
  if (observer_) observer_();
}

MemoryStore::MemoryStore(std::string repo) : repo_(std::move(repo)) {
  revisions_.emplace_back(revision_id(0), Files{});
}

void MemoryStore::put(const std::string& path, const std::string& content, int64_t when) {
  std::lock_guard lock(mutex_);
  Files files = revisions_.back().second;
  files[path] = {content, ++writes_};
  written_[path] = when != 0 ? when : now();
  add_revision(std::move(files));
}

std::string MemoryStore::content(const std::string& path) const {
  std::lock_guard lock(mutex_);
  const Files& files = revisions_.back().second;
  auto it = files.find(path);
  return it == files.end() ? "" : it->second.content;
}

bool MemoryStore::has(const std::string& path) const {
  std::lock_guard lock(mutex_);
  return revisions_.back().second.count(path) > 0;
}

std::vector<std::string> MemoryStore::paths() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [path, content] : revisions_.back().second) out.push_back(path);
  return out;
}

void MemoryStore::fail_reads(const std::string& prefix, int times) {
  std::lock_guard lock(mutex_);
  fail_prefix_ = prefix;
  fail_times_ = times;
}

void MemoryStore::lie_about_sizes(const std::string& prefix, uint64_t extra) {
  std::lock_guard lock(mutex_);
  lie_prefix_ = prefix;
  lie_extra_ = extra;
}

std::string MemoryStore::head() {
  request({});
  std::lock_guard lock(mutex_);
  return revisions_.back().first;
}

void MemoryStore::request(const std::vector<std::string>& paths) {
  ++requests_;
  if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
  std::lock_guard lock(mutex_);
  if (down_) {  // used directly: no handle to mark unreachable
    throw operational_error("the memory store could not be reached (" + std::string(kRefused) +
                            ")");
  }
  if (fail_times_ <= 0) return;
  for (const auto& path : paths) {
    if (!path.starts_with(fail_prefix_) && !fail_prefix_.starts_with(path)) continue;
    --fail_times_;
    ++failed_reads_;
    throw operational_error("the memory store answered 500 for " + path +
                            " (a fault the test asked for): try again later");
  }
}

const MemoryStore::Files& MemoryStore::at(const std::string& revision) const {
  if (revision.empty() || revision == "main") return revisions_.back().second;
  for (size_t i = squashed_below_; i < revisions_.size(); ++i) {
    if (revisions_[i].first == revision) return revisions_[i].second;
  }
  throw input_error("the memory store has no revision " + revision);
}

std::string MemoryStore::squash_history(const std::string& /*message*/) {
  request({});
  std::lock_guard lock(mutex_);
  add_revision(revisions_.back().second);
  squashed_below_ = revisions_.size() - 1;
  return revisions_.back().first;
}

bool MemoryStore::has_revision(const std::string& revision) {
  request({});
  std::lock_guard lock(mutex_);
  for (size_t i = squashed_below_; i < revisions_.size(); ++i) {
    if (revisions_[i].first == revision) return true;
  }
  return false;
}

size_t MemoryStore::revisions() const {
  std::lock_guard lock(mutex_);
  return revisions_.size() - squashed_below_;
}

void MemoryStore::add_revision(Files files) {
  revisions_.emplace_back(revision_id(revisions_.size()), std::move(files));
}

storage::RemoteEntry MemoryStore::entry_of(const std::string& path,
                                           const std::string& content) const {
  storage::RemoteEntry entry;
  entry.path = path;
  entry.size = content.size();
  if (!lie_prefix_.empty() && path.starts_with(lie_prefix_)) entry.size += lie_extra_;
  entry.listed_sha256 = sha256_hex(content);
  entry.oid = entry.listed_sha256;
  return entry;
}

std::vector<storage::RemoteEntry> MemoryStore::list(const std::string& path, bool recursive,
                                                    const std::string& revision) {
  request({path});
  std::lock_guard lock(mutex_);
  std::vector<storage::RemoteEntry> out;
  std::set<std::string> folders;
  for (const auto& [name, file] : at(revision)) {
    if (!below(name, path)) continue;
    std::string rest = path.empty() ? name : name.substr(path.size() + 1);
    size_t slash = rest.find('/');
    if (recursive || slash == std::string::npos) {
      out.push_back(entry_of(name, file.content));
    } else if (folders.insert(rest.substr(0, slash)).second) {
      storage::RemoteEntry folder;
      folder.path = (path.empty() ? "" : path + "/") + rest.substr(0, slash);
      folder.is_directory = true;
      out.push_back(folder);
    }
  }
  return out;
}

std::vector<storage::RemoteEntry> MemoryStore::stat(const std::vector<std::string>& paths,
                                                    const std::string& revision) {
  request(paths);
  std::lock_guard lock(mutex_);
  const Files& files = at(revision);
  std::vector<storage::RemoteEntry> out;
  for (const auto& path : paths) {
    if (auto it = files.find(path); it != files.end())
      out.push_back(entry_of(path, it->second.content));
  }
  return out;
}

std::vector<storage::RemoteEntry> MemoryStore::stat_times(const std::vector<std::string>& paths,
                                                          const std::string& revision) {
  request(paths);
  if (fail_times_queries_)
    throw operational_error(
        "the memory store answered 500 to paths-info with expand (a fault "
        "the test asked for)");
  std::lock_guard lock(mutex_);
  const Files& files = at(revision);
  std::vector<storage::RemoteEntry> out;
  for (const auto& path : paths) {
    if (auto it = files.find(path); it != files.end()) {
      out.push_back(entry_of(path, it->second.content));
      out.back().modified = written_[path];
      continue;
    }
    storage::RemoteEntry folder;
    folder.path = path;
    folder.is_directory = true;
    for (auto it = files.lower_bound(path + "/"); it != files.end() && below(it->first, path); ++it)
      folder.modified = std::max(folder.modified, written_[it->first]);
    if (folder.modified != 0) out.push_back(folder);
  }
  return out;
}

// The version is the write counter of the file's last write: a rewrite of the same bytes is a
// new version, as on the Hub.
storage::SmallFile MemoryStore::read_versioned(const std::string& path, const std::string& revision,
                                               uint64_t max_bytes) {
  request({path});
  std::lock_guard lock(mutex_);
  const Files& files = at(revision);
  auto it = files.find(path);
  if (it == files.end()) return {};
  if (it->second.content.size() > max_bytes)
    throw input_error(path + " is too large to read whole");
  storage::SmallFile read{it->second.content, std::to_string(it->second.version)};
  if (auto when = written_.find(path); report_times_ && when != written_.end())
    read.times = storage::StoreTimes{when->second, now()};
  return read;
}

int64_t MemoryStore::now() const {
  return clock_ ? clock_() : static_cast<int64_t>(std::time(nullptr));
}

// Writes the content, then verifies it against what the request expects, as the real backends
// do while streaming: a mismatch is a failed result, whatever was written.
std::vector<storage::DownloadResult> MemoryStore::download(
    const std::string& revision, std::vector<storage::DownloadRequest>& requests) {
  std::vector<std::string> paths;
  for (const auto& r : requests) paths.push_back(r.path);
  request(paths);
  std::lock_guard lock(mutex_);
  const Files& files = at(revision);
  std::vector<storage::DownloadResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    storage::DownloadResult& result = results[i];
    result.revision = revision;
    auto it = files.find(requests[i].path);
    if (it == files.end()) {
      result.error = requests[i].path + " is not in the memory store";
      continue;
    }
    const std::string& data = it->second.content;
    if (::pwrite(requests[i].fd, data.data(), data.size(), 0) !=
        static_cast<ssize_t>(data.size())) {
      result.error = "cannot write " + requests[i].path;
      continue;
    }
    result.bytes = data.size();
    if (data.size() != requests[i].expected.size) {
      result.error = requests[i].path + ": got " + std::to_string(data.size()) +
                     " bytes, the listing said " + std::to_string(requests[i].expected.size);
    } else if (!content_matches(requests[i].expected, data)) {
      result.error = requests[i].path + ": the content does not match its listed sha256";
    } else {
      result.ok = true;
    }
  }
  return results;
}

bool MemoryStore::content_matches(const storage::RemoteEntry& entry,
                                  std::string_view content) const {
  const std::string& sha = entry.listed_sha256.empty() ? entry.content_sha256 : entry.listed_sha256;
  if (!sha.empty()) return sha256_hex(content) == sha;
  return entry.oid.empty() || sha256_hex(content) == entry.oid;
}

void MemoryStore::check_expected(const Files& head,
                                 const std::vector<storage::CommitOperation>& operations) const {
  for (const auto& op : operations) {
    std::optional<std::string> now;
    if (auto it = head.find(op.path); it != head.end()) now = std::to_string(it->second.version);
    if (op.expected.met_by(now)) continue;
    throw CommitConflict(op.path +
                         " changed in the memory store since it was read: read it "
                         "again, merge and commit again");
  }
}

storage::CommitResult MemoryStore::commit(const std::vector<storage::CommitOperation>& operations,
                                          const std::string& /*message*/,
                                          const std::optional<std::string>& parent) {
  request({});
  storage::CommitResult result;
  bool lost = false;
  {
    std::lock_guard lock(mutex_);
    if (parent && !parent->empty() && *parent != revisions_.back().first) {
      throw CommitConflict("the memory store moved from " + *parent + " to " +
                           revisions_.back().first + ": read the head again and retry");
    }
    Files files = revisions_.back().second;
    check_expected(files, operations);
    Landed landed{std::chrono::steady_clock::now(), {}};
    for (const auto& op : operations) {
      if (op.kind == storage::CommitOperation::Kind::Delete) {
        size_t erased = files.erase(op.path);
        result.deleted += erased;
        if (erased > 0) landed.paths.push_back(op.path);
        continue;
      }
      std::string data = read_file(op.local);
      if (auto it = files.find(op.path); it != files.end() && it->second.content == data) {
        ++result.unchanged;
        continue;
      }
      files[op.path] = {data, ++writes_};
      written_[op.path] = now();
      landed.paths.push_back(op.path);
      ++result.large_sent;
      result.bytes_sent += data.size();
    }
    if (result.large_sent == 0 && result.deleted == 0) return result;
    add_revision(std::move(files));
    landed_.push_back(std::move(landed));
    ++commits_;
    lost = lost_answers_ > 0 && lost_answers_--;
    result.revision = revisions_.back().first;
  }
  notify();  // without the lock: the observer may ask the store
  if (lost) throw CommitConflict("the commit's answer was lost and its retry met a moved head");
  result.committed = true;
  return result;
}

}  // namespace neuron_cache::testing
