#include "neuron_cache/remote/prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/entry_install.h"

namespace neuron_cache::remote {
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

// model.done is the empty marker libneuronxla writes last: an entry listing it empty needs no
// request (any other file an entry says is empty is asked for, so the Hub's size is checked).
bool is_empty_marker(const ai::FileRecord& file) {
  static const std::string kEmpty = sha256_hex("");
  return file.name == layout::kDone && file.size == 0 && file.sha256 == kEmpty;
}

storage::RemoteEntry expected(const ai::FileRecord& file) {
  storage::RemoteEntry entry;
  entry.size = file.size;
  entry.content_sha256 = file.sha256;
  return entry;
}

std::vector<ModuleJob> modules_to_fetch(const std::vector<ai::Entry>& entries,
                                        const local::LocalIndex& local, PrefetchResult& result) {
  std::map<std::string, ModuleJob> jobs;
  std::set<std::string> present;
  for (const auto& entry : entries) {
    for (const auto& module : entry.modules) {
      std::string id = entry.compiler_dir() + "/" + module.name;
      if (present.count(id)) continue;
      if (!jobs.count(id) && local.module_complete(entry.compiler_dir(), module)) {
        present.insert(id);
        ++result.modules_present;
        continue;
      }
      ModuleJob& job = jobs[id];
      job.compiler_dir = entry.compiler_dir();
      job.record = &module;
      job.keys.push_back(entry.key);
    }
  }
  std::vector<ModuleJob> out;
  for (auto& [id, job] : jobs) out.push_back(std::move(job));
  // Largest first: the big NEFFs download (and their flush runs on the installer thread) while
  // the small folders follow, instead of one long batch that nothing overlaps at the end.
  std::stable_sort(out.begin(), out.end(), [](const ModuleJob& a, const ModuleJob& b) {
    return a.record->size() > b.record->size();
  });
  return out;
}

std::vector<local::EntryInstall::ExpectedFile> expected_files(const ai::ModuleRecord& record) {
  std::vector<local::EntryInstall::ExpectedFile> files;
  for (const auto& file : record.files) files.push_back({file.name, file.size, file.sha256});
  return files;
}

void fail_keys(const std::vector<std::string>& keys, const std::string& why,
               PrefetchResult& result) {
  for (const auto& key : keys) result.failed.emplace(key, why);
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

DownloadedBatch download_batch(storage::Store& store, const std::string& revision,
                               const local::LocalIndex& local, std::vector<ModuleJob*> batch,
                               const std::vector<std::string>& staging_folders,
                               PrefetchResult& result) {
  DownloadedBatch out;
  std::vector<Staged>& staged = out.staged;
  std::vector<storage::DownloadRequest> requests;
  for (ModuleJob* job : batch) {
    Staged s{job,
             std::make_unique<local::EntryInstall>(local.cache().root(), job->compiler_dir,
                                                   job->record->name),
             {},
             requests.size()};
    local::EntryInstall::Reused reused =
        s.install->reuse_abandoned(expected_files(*job->record), staging_folders);
    result.files_reused += reused.files.size();
    result.bytes_reused += reused.bytes;
    for (const auto& file : job->record->files) {
      if (std::find(reused.files.begin(), reused.files.end(), file.name) != reused.files.end())
        continue;
      s.fds.push_back(s.install->create_file(file.name));
      if (is_empty_marker(file)) continue;
      requests.push_back({job->compiler_dir + "/" + job->record->name + "/" + file.name,
                          s.fds.back().get(), expected(file)});
      ++s.requests;
    }
    staged.push_back(std::move(s));
  }
  std::vector<storage::DownloadResult> downloads = store.download(revision, requests);
  for (auto& s : staged) {
    std::string error;
    for (size_t i = 0; i < s.requests; ++i) {
      const storage::DownloadResult& d = downloads[s.first_request + i];
      if (!d.ok && error.empty()) error = d.error;
      result.bytes_downloaded += d.bytes;  // what moved, even when it was thrown away
      if (d.ok) ++result.files_downloaded;
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
    Installer installer(result);
    for (size_t start = 0; start < jobs.size(); start += kModulesPerBatch) {
      std::vector<ModuleJob*> batch;
      for (size_t i = start; i < std::min(jobs.size(), start + kModulesPerBatch); ++i)
        batch.push_back(&jobs[i]);
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

}  // namespace neuron_cache::remote
