#include "neuron_cache/transfer/prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/sys/fd.h"

namespace neuron_cache::transfer {
namespace {

namespace ai = artifact_index;

// Modules per batch: bounds the open files while keeping many transfers in flight.
constexpr size_t kModulesPerBatch = 32;

struct ModuleJob {
  std::string compiler_dir;
  const ai::ModuleRecord* record = nullptr;
  std::vector<std::string> keys;  // entries that need it
};

struct Staged {
  ModuleJob* job;
  std::unique_ptr<local::EntryInstall> install;
  std::vector<sys::UniqueFd> fds;
  size_t first_request = 0;
  size_t requests = 0;
};

storage::RemoteEntry expected(const ai::FileRecord& file) {
  storage::RemoteEntry entry;
  entry.size = file.size;
  entry.content_sha256 = file.sha256;
  return entry;
}

bool same_files(const ai::ModuleRecord& a, const ai::ModuleRecord& b) {
  auto sorted = [](const ai::ModuleRecord& m) {
    std::vector<std::tuple<std::string, uint64_t, std::string>> files;
    for (const auto& f : m.files) files.emplace_back(f.name, f.size, f.sha256);
    std::sort(files.begin(), files.end());
    return files;
  };
  return sorted(a) == sorted(b);
}

std::string disagreement(const std::string& id, const std::vector<std::string>& keys) {
  std::string names;
  for (const auto& key : keys) names += (names.empty() ? "" : ", ") + key;
  return "the store's index entries " + names + " disagree about the files of " + id +
         ", so none of them is trusted for it (the index is wrong, not the transfer): it is "
         "compiled; push these configurations again from a machine that has them";
}

void fail_keys(const std::vector<std::string>& keys, const std::string& why,
               PrefetchResult& result) {
  for (const auto& key : keys) result.failed.emplace(key, why);
}

// One job per module, whatever number of entries need it, and one verdict for it: entries
// that describe it differently all miss it (run after run), the others share its fate.
std::vector<ModuleJob> modules_to_fetch(const std::vector<ai::Entry>& entries,
                                        const local::LocalIndex& local, PrefetchResult& result) {
  std::map<std::string, ModuleJob> jobs;
  std::set<std::string> disputed;
  for (const auto& entry : entries) {
    for (const auto& module : entry.modules) {
      std::string id = entry.compiler_dir() + "/" + module.name;
      ModuleJob& job = jobs[id];
      if (!job.record) {
        job.compiler_dir = entry.compiler_dir();
        job.record = &module;
      } else if (!same_files(*job.record, module)) {
        disputed.insert(id);
      }
      job.keys.push_back(entry.key);
    }
  }
  std::vector<ModuleJob> out;
  for (auto& [id, job] : jobs) {
    if (disputed.count(id)) {
      fail_keys(job.keys, disagreement(id, job.keys), result);
    } else if (local.module_complete(job.compiler_dir, *job.record)) {
      ++result.modules_present;
    } else {
      out.push_back(std::move(job));
    }
  }
  // Largest first: the big NEFFs download (and their flush runs on the installer thread) while
  // the small folders follow, instead of one long batch that nothing overlaps at the end.
  std::stable_sort(out.begin(), out.end(), [](const ModuleJob& a, const ModuleJob& b) {
    return a.record->size() > b.record->size();
  });
  return out;
}

// model.done: EntryInstall writes it, last, once model.neff is staged; never downloaded.
bool is_installer_written(const ai::FileRecord& file) {
  return file.name == layout::kDone;
}

std::vector<local::EntryInstall::ExpectedFile> expected_files(const ai::ModuleRecord& record) {
  std::vector<local::EntryInstall::ExpectedFile> files;
  for (const auto& file : record.files) {
    if (!is_installer_written(file)) files.push_back({file.name, file.size, file.sha256});
  }
  return files;
}

// A batch whose files are downloaded and verified, waiting to be installed.
struct DownloadedBatch {
  std::vector<Staged> staged;  // owns the staged folders
  std::vector<local::EntryInstall::BatchItem> ready;
  std::vector<const std::vector<std::string>*> keys_of;  // per ready item
  PrefetchResult installed;  // what installing it did, merged by the caller
};

// The downloaded folders of a batch go in together: one flush of the filesystem per phase.
void install_all(DownloadedBatch& batch) {
  try {
    local::EntryInstall::commit_all(batch.ready);
  } catch (const Error& e) {
    rethrow_local_disk(e);
    for (auto& item : batch.ready) {
      if (!item.outcome && item.error.empty()) item.error = e.what();
    }
  } catch (const std::exception& e) {
    for (auto& item : batch.ready) {
      if (!item.outcome && item.error.empty()) item.error = e.what();
    }
  }
  for (size_t i = 0; i < batch.ready.size(); ++i) {
    if (batch.ready[i].outcome) {
      ++batch.installed.modules_installed;
    } else {
      fail_keys(*batch.keys_of[i], batch.ready[i].error, batch.installed);
    }
  }
}

// Whether some entry that needs the module has not failed yet: an entry stops at its first
// failed folder, so one that lists thousands of missing folders costs a batch of requests, not
// one per folder.
bool wanted(const ModuleJob& job, const PrefetchResult& result) {
  return std::any_of(job.keys.begin(), job.keys.end(),
                     [&](const std::string& key) { return result.failed.count(key) == 0; });
}

std::vector<net::ByteRange> to_ranges(const std::vector<local::Span>& spans) {
  std::vector<net::ByteRange> ranges;
  for (const auto& span : spans) ranges.push_back({span.start, span.end - 1});
  return ranges;
}

std::vector<local::Span> to_spans(const std::vector<net::ByteRange>& ranges) {
  std::vector<local::Span> spans;
  for (const auto& range : ranges) spans.push_back({range.first, range.last + 1});
  return spans;
}

// The download of `file` into the staging of `install`: resumed from what a killed prefetch left
// when `reused` holds part of it, and journaled as it goes so that a kill now loses little.
storage::DownloadRequest download_request(const ModuleJob& job, const ai::FileRecord& file,
                                          local::EntryInstall& install,
                                          local::EntryInstall::Reused& reused,
                                          std::vector<sys::UniqueFd>& fds) {
  storage::DownloadRequest request{job.compiler_dir + "/" + job.record->name + "/" + file.name, -1,
                                   expected(file)};
  auto partial = std::find_if(reused.partial.begin(), reused.partial.end(),
                              [&](const auto& p) { return p.name == file.name; });
  if (partial != reused.partial.end()) {
    fds.push_back(std::move(partial->fd));
    request.on_disk = to_ranges(partial->written);
  } else {
    fds.push_back(install.create_file(file.name));
  }
  request.fd = fds.back().get();
  request.on_progress = [&install,
                         journaled = local::ExpectedFile{file.name, file.size, file.sha256}](
                            const std::vector<net::ByteRange>& on_disk) {
    install.record_progress(journaled, to_spans(on_disk));
  };
  return request;
}

// The staged folder of one job, with a download request per file not reused from a killed
// prefetch's staging.
Staged stage(ModuleJob& job, const local::LocalIndex& local,
             const std::vector<std::string>& staging_folders,
             std::vector<storage::DownloadRequest>& requests, PrefetchResult& result) {
  Staged s{&job,
           std::make_unique<local::EntryInstall>(local.cache().root(), job.compiler_dir,
                                                 job.record->name),
           {},
           requests.size()};
  local::EntryInstall::Reused reused =
      s.install->reuse_abandoned(expected_files(*job.record), staging_folders);
  std::vector<storage::DownloadRequest> mine;  // appended whole: a throw leaves `requests` as is
  for (const auto& file : job.record->files) {
    if (is_installer_written(file) ||
        std::find(reused.files.begin(), reused.files.end(), file.name) != reused.files.end())
      continue;
    mine.push_back(download_request(job, file, *s.install, reused, s.fds));
  }
  result.files_reused += reused.files.size();
  result.bytes_reused += reused.bytes;
  s.requests = mine.size();
  requests.insert(requests.end(), mine.begin(), mine.end());
  return s;
}

DownloadedBatch download_batch(storage::Store& store, const std::string& revision,
                               const local::LocalIndex& local, std::vector<ModuleJob*> batch,
                               const std::vector<std::string>& staging_folders,
                               PrefetchResult& result) {
  DownloadedBatch out;
  std::vector<Staged>& staged = out.staged;
  std::vector<storage::DownloadRequest> requests;
  for (ModuleJob* job : batch) {
    // One folder that cannot be staged (its cache folder refused, a full disk) fails the entries
    // that need it, never the batch.
    try {
      staged.push_back(stage(*job, local, staging_folders, requests, result));
    } catch (const Error& error) {
      rethrow_local_disk(error);  // fails every folder alike: one message, not one per entry
      fail_keys(job->keys, job->compiler_dir + "/" + job->record->name + ": " + error.what(),
                result);
    }
  }
  std::vector<storage::DownloadResult> downloads = store.download(revision, requests);
  for (auto& s : staged) {
    std::string error;
    for (size_t i = 0; i < s.requests; ++i) {
      const storage::DownloadResult& d = downloads[s.first_request + i];
      if (d.disk_errno != 0) {
        throw sys::io_failure("cannot write " + requests[s.first_request + i].path + " into",
                              local.cache().root(), d.disk_errno);
      }
      if (!d.ok && error.empty()) error = d.error;
      result.bytes_downloaded += d.bytes;  // what moved, even when it was thrown away
      if (d.ok) ++result.files_downloaded;
      if (d.ok && d.bytes_resumed > 0) {
        ++result.files_resumed;
        result.bytes_resumed += d.bytes_resumed;
      }
    }
    s.fds.clear();
    if (!error.empty()) {
      fail_keys(s.job->keys, s.job->compiler_dir + "/" + s.job->record->name + ": " + error,
                result);
      continue;
    }
    out.ready.push_back({s.install.get(), std::nullopt, ""});
    out.keys_of.push_back(&s.job->keys);
  }
  return out;
}

// Installs each batch on a thread while the next one downloads: the flushes and renames of one
// batch overlap the transfers of the next.
class Installer {
 public:
  explicit Installer(PrefetchResult& result) : result_(result) {}
  ~Installer() {
    if (thread_.joinable()) thread_.join();  // leaving early on an exception: only stop
  }
  void start(DownloadedBatch batch) {
    wait();
    pending_.emplace(std::move(batch));
    thread_ = std::thread([this] {
      try {
        install_all(*pending_);
      } catch (...) {
        failure_ = std::current_exception();  // wait() rethrows it on the caller's thread
      }
    });
  }
  // Waits for the batch being installed and adds what it did to the result.
  void wait() {
    if (!thread_.joinable()) return;
    thread_.join();
    if (std::exception_ptr failure = std::exchange(failure_, nullptr)) {
      pending_.reset();
      std::rethrow_exception(failure);
    }
    result_.modules_installed += pending_->installed.modules_installed;
    result_.failed.insert(pending_->installed.failed.begin(), pending_->installed.failed.end());
    pending_.reset();
  }

 private:
  PrefetchResult& result_;
  std::optional<DownloadedBatch> pending_;
  std::thread thread_;
  std::exception_ptr failure_;
};

void fetch_registry(storage::Store& store, const std::string& revision,
                    const local::LocalIndex& local, const ai::Entry& entry,
                    PrefetchResult& result) {
  for (const auto& file : entry.registry) {
    if (local.registry_file_present(entry.compiler_dir(), file)) continue;
    sys::UniqueFd fd(memfd_create("registry", MFD_CLOEXEC));
    if (!fd) throw operational_error("cannot create a memory file for a registry entry");
    std::vector<storage::DownloadRequest> request{
        {entry.compiler_dir() + "/" + file.name, fd.get(), expected(file)}};
    storage::DownloadResult d = store.download(revision, request).front();
    result.bytes_downloaded += d.bytes;
    if (!d.ok) {
      result.failed.emplace(entry.key, file.name + ": " + d.error);
      return;
    }
    local.install_registry_file(entry.compiler_dir(), file.name, sys::read_whole_fd(fd.get()));
    ++result.files_downloaded;
  }
}

}  // namespace

PrefetchResult& operator+=(PrefetchResult& into, const PrefetchResult& later) {
  into.modules_installed += later.modules_installed;
  into.modules_present += later.modules_present;
  into.files_downloaded += later.files_downloaded;
  into.bytes_downloaded += later.bytes_downloaded;
  into.files_reused += later.files_reused;
  into.bytes_reused += later.bytes_reused;
  into.files_resumed += later.files_resumed;
  into.bytes_resumed += later.bytes_resumed;
  into.staging_reclaimed += later.staging_reclaimed;
  for (const auto& key : later.completed) {
    into.failed.erase(key);
    if (std::find(into.completed.begin(), into.completed.end(), key) == into.completed.end())
      into.completed.push_back(key);
  }
  for (const auto& [key, why] : later.failed) into.failed[key] = why;
  return into;
}

PrefetchResult prefetch(storage::Store& store, const std::string& revision,
                        const local::LocalIndex& local, const std::vector<ai::Entry>& entries,
                        const std::function<void(const std::string&)>& on_wait) {
  PrefetchResult result;
  // Before looking at what is missing: after a wait, what the other prefetch installed is there.
  local::PrefetchLock lock = local::PrefetchLock::acquire(local.cache().root(), on_wait);
  std::vector<ModuleJob> jobs = modules_to_fetch(entries, local, result);
  // What killed prefetches left, listed once: the modules of this run look there by name. Only
  // saves downloads, so a folder that cannot be listed is as good as empty.
  std::vector<std::string> staging_folders;
  try {
    if (!jobs.empty()) staging_folders = local::list_staging_folders(local.cache().root());
  } catch (const Error&) {
  }
  {
    // The module files are what a user waits for; the registry files after them are a few KiB.
    std::optional<net::TransferPhase> phase;
    if (!jobs.empty()) phase.emplace("Downloading");
    Installer installer(result);
    for (size_t next = 0; next < jobs.size();) {
      std::vector<ModuleJob*> batch;
      for (; next < jobs.size() && batch.size() < kModulesPerBatch; ++next) {
        if (!wanted(jobs[next], result)) continue;
        batch.push_back(&jobs[next]);
      }
      if (batch.empty()) continue;
      installer.start(download_batch(store, revision, local, batch, staging_folders, result));
    }
    installer.wait();
  }
  // Staging no live writer holds (what killed prefetches left and nothing above reused) would
  // only fill the disk.
  try {
    local::remove_abandoned_staging(local.cache().root(), false, &result.staging_reclaimed);
  } catch (const Error&) {
    // Nothing installed depends on it; `neuron-cache cleanup` tries again.
  }
  for (const auto& entry : entries) {
    if (result.failed.count(entry.key)) continue;
    try {
      fetch_registry(store, revision, local, entry, result);
    } catch (const Error& e) {
      result.failed.emplace(entry.key, e.what());
    }
    if (result.failed.count(entry.key)) continue;
    local.write(entry);
    result.completed.push_back(entry.key);
  }
  return result;
}

}  // namespace neuron_cache::transfer
