#include "neuron_cache/transfer/fetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/registry.h"
#include "neuron_cache/local/entry_install.h"
#include "neuron_cache/local/local_index.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::transfer {
namespace {

namespace ai = artifact_index;

// Bounds the files open at once while keeping many transfers in flight.
constexpr size_t kRequestsPerBatch = 256;
constexpr size_t kModulesPerBatch = 32;

std::string folder_path(const std::string& compiler_dir, const std::string& name) {
  return compiler_dir + "/" + name;
}

// EntryInstall's rule for a complete folder (SUCCESS, or a TRACED export), from regular files
// alone: a folder whose files are symlinks into the Hugging Face file cache is not complete, and
// fetching it replaces the links by files.
bool complete_locally(const local::LocalCache& cache, const std::string& compiler_dir,
                      const std::string& name) {
  if (!cache.exists()) return false;
  auto compiler = sys::SafeDir::open(cache.root()).open_subdir(compiler_dir);
  auto module = compiler ? compiler->open_subdir(name) : std::nullopt;
  return module && layout::is_complete(local::state_of_written_folder(*module, name));
}

bool is_module_name(const std::string& name) {
  return name.find('/') == std::string::npos && layout::parse_module_name(name).has_value();
}

// Keeps the files of one folder's listing, paths made relative to the folder. Lock files are
// left out (a compiler's lock, never content); anything else unexpected refuses the folder.
void take_listing(const std::vector<storage::RemoteEntry>& listing, const std::string& prefix,
                  ModulePlan& plan) {
  for (const auto& entry : listing) {
    if (entry.is_directory) continue;
    std::string relative =
        entry.path.starts_with(prefix) ? entry.path.substr(prefix.size()) : std::string();
    std::string base = relative.substr(relative.rfind('/') + 1);
    if (!relative.empty() && layout::is_lock_file(base)) continue;
    if (!ai::is_safe_relative_path(relative)) {
      plan.status = FetchStatus::Failed;
      plan.error = "the Hub listing holds \"" + entry.path +
                   "\", which is not a safe path inside " + prefix +
                   ": refused; check the repo's content";
      plan.files.clear();
      return;
    }
    storage::RemoteEntry file = entry;
    file.path = relative;
    plan.files.push_back(std::move(file));
  }
  if (plan.files.size() > kMaxFilesPerModule) {
    plan.status = FetchStatus::Failed;
    plan.error = prefix + " holds " + std::to_string(plan.files.size()) +
                 " files on the Hub (at most " + std::to_string(kMaxFilesPerModule) +
                 " expected in a MODULE_ folder): refused";
    plan.files.clear();
  }
}

// Judged by the rule index entries are (artifact_index::incomplete_module_problem).
std::optional<std::string> incomplete_on_store(const ModulePlan& plan) {
  ai::ModuleRecord listed{plan.name, {}};
  for (const auto& file : plan.files) listed.files.push_back({file.path, file.size, ""});
  return ai::incomplete_module_problem(listed);
}

ModulePlan plan_one(storage::Store& store, const std::string& revision,
                    const local::LocalCache& cache, const std::string& compiler_dir,
                    const std::string& name, uint64_t& listing_requests) {
  ModulePlan plan{name, FetchStatus::Installed, "", {}};
  if (!is_module_name(name)) {
    plan.status = FetchStatus::Failed;
    plan.error = "\"" + name +
                 "\" is not a MODULE_ folder name (MODULE_<graph key>+<flags key> "
                 "or MODULE_<entry hash>)";
    return plan;
  }
  if (complete_locally(cache, compiler_dir, name)) {
    plan.status = FetchStatus::AlreadyPresent;
    return plan;
  }
  const std::string folder = folder_path(compiler_dir, name);
  std::vector<storage::RemoteEntry> listing;
  try {
    uint64_t before = store.requests();
    listing = store.list(folder, true, revision);
    listing_requests += store.requests() - before;
  } catch (const Error& error) {
    plan.status = FetchStatus::Failed;
    plan.error = "cannot list " + folder + " in " + store.name() + ": " + error.what();
    return plan;
  }
  take_listing(listing, folder + "/", plan);
  if (plan.status == FetchStatus::Installed && plan.files.empty()) {
    plan.status = FetchStatus::NotInStore;
    plan.error = folder + " is not in " + store.name() + " (revision " +
                 (revision.empty() ? std::string("latest") : revision) +
                 "): check the name and the compiler version, e.g. with `neuron-cache lookup` "
                 "or the repo's file browser";
  } else if (auto problem =
                 plan.status == FetchStatus::Installed ? incomplete_on_store(plan) : std::nullopt) {
    plan.status = FetchStatus::NotInStore;
    plan.error = folder + " in " + store.name() + " is not complete: it " + *problem +
                 "; it is not installed";
    plan.files.clear();
  }
  return plan;
}

std::string sha256_of_fd(int fd, const std::string& what) {
  Hasher hasher(HashAlgorithm::Sha256);
  std::vector<char> buffer(1 << 20);
  for (off_t offset = 0;;) {
    ssize_t n = pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw operational_error("cannot read back " + what + ": " + std::strerror(errno));
    if (n == 0) return hasher.hex_digest();
    hasher.update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    offset += n;
  }
}

// One folder being downloaded: its staged install and what it has become so far.
struct Job {
  const ModulePlan* plan = nullptr;
  ModuleFetch* out = nullptr;
  std::unique_ptr<local::EntryInstall> install;
  ai::ModuleRecord record;
  std::string error;
};

// Downloads `files` (job, file index) into their staged folders, a bounded number at a time.
void download_files(storage::Store& store, const std::string& revision,
                    const std::string& compiler_dir, std::vector<std::pair<Job*, size_t>>& files,
                    FetchResult& result) {
  for (size_t start = 0; start < files.size(); start += kRequestsPerBatch) {
    size_t end = std::min(files.size(), start + kRequestsPerBatch);
    std::vector<sys::UniqueFd> fds;
    std::vector<storage::DownloadRequest> requests;
    for (size_t i = start; i < end; ++i) {
      auto [job, index] = files[i];
      const storage::RemoteEntry& file = job->plan->files[index];
      fds.push_back(job->install->create_file(file.path));
      requests.push_back(
          {folder_path(compiler_dir, job->plan->name) + "/" + file.path, fds.back().get(), file});
    }
    std::vector<storage::DownloadResult> downloads = store.download(revision, requests);
    for (size_t i = start; i < end; ++i) {
      auto [job, index] = files[i];
      const storage::RemoteEntry& file = job->plan->files[index];
      const storage::DownloadResult& d = downloads[i - start];
      result.bytes_downloaded += d.bytes;
      if (!d.ok) {
        if (job->error.empty()) job->error = requests[i - start].path + ": " + d.error;
        continue;
      }
      ++result.files_downloaded;
      std::string sha256 = !file.listed_sha256.empty()
                               ? file.listed_sha256
                               : sha256_of_fd(fds[i - start].get(), requests[i - start].path);
      job->record.files.push_back({file.path, file.size, sha256});
    }
  }
}

// Stages `file` of `job` from `local_copy` when it has a candidate matching the listing: by the
// sha256 the store lists, else by the git blob id it lists (a regular git file on the Hub).
bool take_local_copy(Job& job, const storage::RemoteEntry& file, const LocalCandidate& local_copy,
                     FetchResult& result) {
  if (!local_copy || (file.listed_sha256.empty() && file.git_blob_id.empty())) return false;
  sys::UniqueFd fd = local_copy(job.plan->name, file);
  if (!fd) return false;
  std::optional<std::string> sha256;
  if (!file.listed_sha256.empty()) {
    if (job.install->stage_verified(fd.get(), {file.path, file.size, file.listed_sha256}))
      sha256 = file.listed_sha256;
  } else {
    sha256 = job.install->stage_verified_blob(fd.get(), file.path, file.size, file.git_blob_id);
  }
  if (!sha256) return false;
  job.record.files.push_back({file.path, file.size, *sha256});
  ++result.files_linked;
  result.bytes_linked += file.size;
  return true;
}

// Downloads then installs one batch of folders (commit_all: one flush per phase for the batch).
void fetch_batch(storage::Store& store, const std::string& revision, const local::LocalCache& cache,
                 const std::string& compiler_dir, std::vector<Job>& jobs,
                 const LocalCandidate& local_copy, FetchResult& result) {
  std::vector<std::pair<Job*, size_t>> files;
  for (auto& job : jobs) {
    job.record.name = job.plan->name;
    try {
      job.install =
          std::make_unique<local::EntryInstall>(cache.root(), compiler_dir, job.plan->name);
    } catch (const Error& error) {
      job.error = folder_path(compiler_dir, job.plan->name) + ": cannot be staged: " + error.what();
      continue;
    }
    for (size_t i = 0; i < job.plan->files.size(); ++i) {
      if (job.plan->files[i].path == layout::kDone) {
        // EntryInstall writes it, empty and last; the listing said it is empty.
        job.record.files.push_back({std::string(layout::kDone), 0, sha256_hex("")});
        continue;
      }
      if (!take_local_copy(job, job.plan->files[i], local_copy, result))
        files.emplace_back(&job, i);
    }
  }
  download_files(store, revision, compiler_dir, files, result);
  std::vector<local::EntryInstall::BatchItem> ready;
  std::vector<Job*> ready_jobs;
  for (auto& job : jobs) {
    if (!job.error.empty()) {
      job.out->status = FetchStatus::Failed;
      job.out->error = job.error;
      continue;
    }
    ready.push_back({job.install.get(), std::nullopt, ""});
    ready_jobs.push_back(&job);
  }
  try {
    local::EntryInstall::commit_all(ready);
  } catch (const std::exception& e) {
    for (auto& item : ready) {
      if (!item.outcome && item.error.empty()) item.error = e.what();
    }
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    ModuleFetch& out = *ready_jobs[i]->out;
    if (!ready[i].outcome) {
      out.status = FetchStatus::Failed;
      out.error = "cannot install " + folder_path(compiler_dir, out.name) + ": " + ready[i].error;
    } else if (*ready[i].outcome == local::InstallOutcome::AlreadyComplete) {
      out.status = FetchStatus::AlreadyPresent;  // another writer finished it meanwhile
    } else {
      out.status = FetchStatus::Installed;
      out.record = std::move(ready_jobs[i]->record);
    }
  }
}

}  // namespace

std::string_view status_name(FetchStatus status) {
  switch (status) {
    case FetchStatus::Installed:
      return "installed";
    case FetchStatus::AlreadyPresent:
      return "already present";
    case FetchStatus::NotInStore:
      return "not on the Hub";
    case FetchStatus::Failed:
      return "failed";
  }
  return "";
}

uint64_t ModulePlan::bytes() const {
  uint64_t total = 0;
  for (const auto& file : files) total += file.size;
  return total;
}

bool FetchResult::ok() const {
  for (const auto& module : modules) {
    if (module.status != FetchStatus::Installed && module.status != FetchStatus::AlreadyPresent)
      return false;
  }
  return true;
}

std::vector<ModulePlan> plan_modules(storage::Store& store, const std::string& revision,
                                     const local::LocalCache& cache,
                                     const std::string& compiler_dir,
                                     const std::vector<std::string>& module_names,
                                     uint64_t* listing_requests) {
  if (!compiler_dir.starts_with(layout::kCompilerDirPrefix) ||
      compiler_dir.find('/') != std::string::npos || compiler_dir.find("..") != std::string::npos) {
    throw input_error("\"" + compiler_dir +
                      "\" is not a compiler folder name (neuronxcc-<version>)");
  }
  uint64_t listings = 0;
  std::vector<ModulePlan> plans;
  std::set<std::string> seen;
  for (const auto& name : module_names) {
    if (!seen.insert(name).second) continue;
    plans.push_back(plan_one(store, revision, cache, compiler_dir, name, listings));
  }
  if (listing_requests) *listing_requests += listings;
  return plans;
}

FetchResult fetch_modules(storage::Store& store, const std::string& revision,
                          const local::LocalCache& cache, const std::string& compiler_dir,
                          const std::vector<std::string>& module_names,
                          const LocalCandidate& local_copy) {
  FetchResult result;
  std::vector<ModulePlan> plans =
      plan_modules(store, revision, cache, compiler_dir, module_names, &result.listing_requests);
  result.modules.reserve(plans.size());
  std::vector<Job> pending;
  size_t pending_files = 0;
  net::TransferPhase phase("Downloading");
  auto flush = [&] {
    if (!pending.empty())
      fetch_batch(store, revision, cache, compiler_dir, pending, local_copy, result);
    pending.clear();
    pending_files = 0;
  };
  for (const auto& plan : plans) {
    result.modules.push_back({plan.name, plan.status, plan.error, std::nullopt});
    if (plan.status != FetchStatus::Installed) continue;
    if (pending.size() >= kModulesPerBatch || pending_files >= kRequestsPerBatch) flush();
    pending.push_back({&plan, &result.modules.back(), nullptr, {}, ""});
    pending_files += plan.files.size();
  }
  flush();
  return result;
}

namespace {

bool is_entry_hash(const std::string& text) {
  return text.size() == 20 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

const std::string kRegistryPrefix = std::string(layout::kRegistryDir) + "/";

// "neuronxcc-<v>/0_REGISTRY/<...>/<hash>.json" split into its compiler folder and the rest, or
// nothing when the path is not a registry entry.
std::optional<RegistryFile> registry_file_of(const std::string& path) {
  size_t slash = path.find('/');
  if (slash == std::string::npos || !ai::is_safe_relative_path(path)) return std::nullopt;
  std::string compiler_dir = path.substr(0, slash);
  std::string relative = path.substr(slash + 1);
  if (!compiler_dir.starts_with(layout::kCompilerDirPrefix) ||
      !relative.starts_with(kRegistryPrefix)) {
    return std::nullopt;
  }
  auto where = registry::locate(relative.substr(kRegistryPrefix.size()));
  if (!where) return std::nullopt;
  RegistryFile file;
  file.compiler_dir = compiler_dir;
  file.entry.path = relative;
  file.hash = where->hash;
  return file;
}

template <typename F>
auto counted(storage::Store& store, uint64_t* requests, F call) {
  uint64_t before = store.requests();
  auto result = call();
  if (requests) *requests += store.requests() - before;
  return result;
}

std::vector<RegistryFile> find_by_path(storage::Store& store, const std::string& revision,
                                       const std::string& path, uint64_t* requests) {
  auto file = registry_file_of(path);
  if (!file) {
    throw input_error("\"" + path +
                      "\" is not the path of a registry entry "
                      "(neuronxcc-<version>/0_REGISTRY/<optimum-neuron version>/.../<hash>.json)");
  }
  auto found = counted(store, requests, [&] { return store.stat({path}, revision); });
  std::vector<RegistryFile> files;
  for (const auto& entry : found) {
    if (entry.is_directory || entry.path != path) continue;
    file->entry = entry;
    file->entry.path = path.substr(file->compiler_dir.size() + 1);
    files.push_back(*file);
  }
  return files;
}

std::vector<RegistryFile> find_by_hash(storage::Store& store, const std::string& revision,
                                       const std::string& hash,
                                       const std::vector<std::string>& compiler_dirs,
                                       uint64_t* requests) {
  std::vector<RegistryFile> files;
  for (const auto& dir : compiler_dirs) {
    std::string registry_dir = dir + "/" + std::string(layout::kRegistryDir);
    auto listing =
        counted(store, requests, [&] { return store.list(registry_dir, true, revision); });
    for (const auto& entry : listing) {
      if (entry.is_directory) continue;
      auto file = registry_file_of(entry.path);
      if (!file || file->compiler_dir != dir || file->hash != hash) continue;
      std::string relative = file->entry.path;
      file->entry = entry;
      file->entry.path = relative;
      files.push_back(*file);
    }
  }
  return files;
}

}  // namespace

std::vector<std::string> list_compiler_dirs(storage::Store& store, const std::string& revision,
                                            uint64_t* listing_requests) {
  auto root = counted(store, listing_requests, [&] { return store.list("", false, revision); });
  std::vector<std::string> dirs;
  for (const auto& entry : root) {
    if (entry.is_directory && entry.path.starts_with(layout::kCompilerDirPrefix))
      dirs.push_back(entry.path);
  }
  return dirs;
}

std::string pick_compiler_dir(const std::vector<std::string>& dirs,
                              const std::string& compiler_version, const std::string& repo) {
  std::string exact = layout::compiler_dir_name(compiler_version);
  std::vector<std::string> matching;
  for (const auto& dir : dirs) {
    if (dir == exact) return dir;
    if (layout::is_current_compiler_dir(dir, compiler_version)) matching.push_back(dir);
  }
  if (matching.size() == 1) return matching.front();
  std::string names;
  for (const auto& dir : matching.empty() ? dirs : matching)
    names += (names.empty() ? "" : ", ") + dir;
  if (matching.empty()) {
    throw input_error(repo + " has no compiler folder " + exact + "*" +
                      (names.empty() ? std::string(": it has none") : "; it has: " + names));
  }
  throw input_error("--compiler-version " + compiler_version + " matches several folders in " +
                    repo + " (" + names + "): pass the full version");
}

std::vector<RegistryFile> find_registry_entry(storage::Store& store, const std::string& revision,
                                              const std::string& reference,
                                              const std::vector<std::string>& compiler_dirs,
                                              uint64_t* listing_requests) {
  if (reference.find('/') != std::string::npos) {
    return find_by_path(store, revision, reference, listing_requests);
  }
  std::string hash =
      reference.ends_with(".json") ? reference.substr(0, reference.size() - 5) : reference;
  if (!is_entry_hash(hash)) {
    throw input_error("\"" + reference +
                      "\" is neither a registry entry path in the repo nor an entry hash (20 "
                      "lowercase hex digits, the file name of the entry)");
  }
  return find_by_hash(store, revision, hash, compiler_dirs, listing_requests);
}

std::vector<RegistryFetch> fetch_registry_files(storage::Store& store, const std::string& revision,
                                                const local::LocalCache& cache,
                                                const std::vector<RegistryFile>& files) {
  local::LocalIndex local(cache);
  std::vector<RegistryFetch> out;
  for (const auto& file : files) {
    RegistryFetch fetch{file, FetchStatus::Failed, ""};
    const std::string path = file.compiler_dir + "/" + file.entry.path;
    try {
      if (local.registry_file_present(file.compiler_dir, {file.entry.path, file.entry.size, ""})) {
        fetch.status = FetchStatus::AlreadyPresent;
        out.push_back(fetch);
        continue;
      }
      sys::UniqueFd fd(memfd_create("registry", MFD_CLOEXEC));
      if (!fd) throw operational_error("cannot create a memory file for " + path);
      std::vector<storage::DownloadRequest> request{{path, fd.get(), file.entry}};
      storage::DownloadResult d = store.download(revision, request).front();
      if (!d.ok) throw operational_error(d.error);
      std::string text = sys::read_whole_fd(fd.get());
      if (registry::entry_hash(text) != file.hash) {
        throw input_error("its text does not hash to its name (SHA-512 prefix " +
                          registry::entry_hash(text) + "): not a registry entry, refused");
      }
      local.install_registry_file(file.compiler_dir, file.entry.path, text);
      fetch.status = FetchStatus::Installed;
    } catch (const Error& error) {
      fetch.error = path + ": " + error.what();
    }
    out.push_back(fetch);
  }
  return out;
}

}  // namespace neuron_cache::transfer
