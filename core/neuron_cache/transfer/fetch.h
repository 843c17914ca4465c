// Fetching MODULE_ folders a caller names from a cache store into the local cache, for when
// the names are known (a compile step whose folders optimum-neuron's hub proxy only symlinked
// into the Hugging Face file cache, a traced export named by its registry entry, a user who knows
// what they need). No index or registry is consulted: the store's listing of each folder is the
// manifest.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/store.h"
#include "neuron_cache/sys/fd.h"

namespace neuron_cache::transfer {

// A folder refused when its listing holds more files than this: a MODULE_ folder has a handful.
inline constexpr size_t kMaxFilesPerModule = 1000;

enum class FetchStatus {
  Installed,       // downloaded, verified and installed
  AlreadyPresent,  // complete locally (model.neff and model.done as regular files): kept as is
  NotInStore,      // the repo has no such folder
  Failed,          // refused listing, failed download or install: see `error`
};
std::string_view status_name(FetchStatus status);  // "installed", "already present", ...

// One named folder: what its listing in the store holds (nothing for NotInStore or a local hit).
struct ModulePlan {
  std::string name;
  FetchStatus status = FetchStatus::Installed;  // Installed: still to fetch
  std::string error;                            // why, for NotInStore and Failed
  std::vector<storage::RemoteEntry> files;      // paths relative to the folder
  uint64_t bytes() const;
};

struct ModuleFetch {
  std::string name;
  FetchStatus status = FetchStatus::Failed;
  std::string error;
  // For Installed folders: every file with its size and sha256, for an artifact index entry.
  std::optional<artifact_index::ModuleRecord> record;
};

struct FetchResult {
  std::vector<ModuleFetch> modules;  // in the order asked (duplicates once)
  size_t files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
  // Files taken from a LocalCandidate that matched the listing instead of downloaded (hard
  // links or local copies): not part of bytes_downloaded.
  size_t files_linked = 0;
  uint64_t bytes_linked = 0;
  uint64_t listing_requests = 0;
  bool ok() const;  // every folder Installed or AlreadyPresent
};

// What fetch_modules would do, without writing anything: folders complete locally cost no
// request, every other one costs one recursive listing. Refuses (Failed) a folder whose listing
// has more than kMaxFilesPerModule files or a path that is not a safe relative path inside it.
std::vector<ModulePlan> plan_modules(storage::Store& store, const std::string& revision,
                                     const local::LocalCache& cache,
                                     const std::string& compiler_dir,
                                     const std::vector<std::string>& module_names,
                                     uint64_t* listing_requests = nullptr);

// A copy of a file that may already be on this machine (what optimum-neuron's hub proxy
// fetched into the HF file cache): an open descriptor of it for the file `file` (its path
// relative to the folder) of the folder `module`, or an empty one. Never trusted: it is used
// only when its size and its sha256 (or, for a file the store lists by git blob id only, that id)
// are the ones the listing gives (EntryInstall::stage_verified, stage_verified_blob).
using LocalCandidate =
    std::function<sys::UniqueFd(const std::string& module, const storage::RemoteEntry& file)>;

// Installs the named MODULE_ folders of `compiler_dir` (e.g. "neuronxcc-2.21.33363.0+82129205")
// from `repo` into the local cache. Guarantees:
// - a folder complete locally is kept as it is and costs no request;
// - one recursive tree listing per other folder, refused as in plan_modules;
// - every file is downloaded verified against the listing (git blob id, or the LFS sha256) and
//   the folder is installed atomically through EntryInstall (model.done last): a failure never
//   leaves a partial folder that classifies as complete;
// - failures are values (NotInStore, Failed with the reason), one folder's failure does not stop
//   the others; only a failure to reach the store at all throws.
// - a file whose listing gives its sha256 or its git blob id is first asked of `local_copy`: a
//   candidate whose bytes hash to it is staged instead of downloaded (files_linked), any other is
//   ignored;
// Traced export folders (MODULE_<entry hash>, no model.neff/model.done) are fetched like the
// others; one is complete locally when it is TRACED from its regular files (layout.h).
FetchResult fetch_modules(storage::Store& store, const std::string& revision,
                          const local::LocalCache& cache, const std::string& compiler_dir,
                          const std::vector<std::string>& module_names,
                          const LocalCandidate& local_copy = {});

// The neuronxcc-* folders at the root of `repo` (one listing).
std::vector<std::string> list_compiler_dirs(storage::Store& store, const std::string& revision,
                                            uint64_t* listing_requests = nullptr);

// The one folder of `dirs` that `compiler_version` names: the exact neuronxcc-<version>, else
// the only one starting with it. Throws an input Error naming the candidates when there is none
// or more than one.
std::string pick_compiler_dir(const std::vector<std::string>& dirs,
                              const std::string& compiler_version, const std::string& repo);

// One registry entry file in the repo.
struct RegistryFile {
  std::string compiler_dir;
  storage::RemoteEntry entry;  // path relative to the compiler folder ("0_REGISTRY/...")
  std::string hash;  // the file stem: the entry hash, and MODULE_<hash> for traced exports
};

// The files of the registry entry `reference` names: a path in the repo
// ("neuronxcc-<v>/0_REGISTRY/.../<hash>.json": one paths-info request) or a 20-hex entry hash
// (one recursive listing of the 0_REGISTRY of each of `compiler_dirs`). Every file with that
// hash is returned: an alias and its primary file, or copies under several optimum-neuron
// versions. Throws an input Error for a reference that is neither.
std::vector<RegistryFile> find_registry_entry(storage::Store& store, const std::string& revision,
                                              const std::string& reference,
                                              const std::vector<std::string>& compiler_dirs,
                                              uint64_t* listing_requests = nullptr);

struct RegistryFetch {
  RegistryFile file;
  FetchStatus status = FetchStatus::Failed;  // Installed, AlreadyPresent or Failed
  std::string error;
};

// Installs registry entry files that are not in the local cache yet: each is downloaded
// verified against its listing, refused unless its name is the SHA-512 prefix of its text (a
// registry file is content-addressed), then written atomically.
std::vector<RegistryFetch> fetch_registry_files(storage::Store& store, const std::string& revision,
                                                const local::LocalCache& cache,
                                                const std::vector<RegistryFile>& files);

}  // namespace neuron_cache::transfer
