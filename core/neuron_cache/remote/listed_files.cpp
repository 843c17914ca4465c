#include "neuron_cache/remote/listed_files.h"

#include <sys/mman.h>

#include <algorithm>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/fd.h"

namespace neuron_cache::remote {
namespace {

void read_batch(storage::Store& store, const std::string& revision,
                const std::vector<storage::RemoteEntry>& files, size_t first, size_t end,
                std::vector<storage::Read<std::string>>& out) {
  std::vector<sys::UniqueFd> fds;
  std::vector<storage::DownloadRequest> requests;
  for (size_t i = first; i < end; ++i) {
    fds.emplace_back(memfd_create("neuron-cache-listed", MFD_CLOEXEC));
    if (!fds.back()) throw operational_error("cannot create a memory file to read a store file");
    requests.push_back({files[i].path, fds.back().get(), files[i]});
  }
  std::vector<storage::DownloadResult> results = store.download(revision, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i >= results.size() || !results[i].ok) {
      out.emplace_back(storage::Failure{i < results.size() ? results[i].error : "no answer"});
    } else {
      out.emplace_back(sys::read_whole_fd(fds[i].get()));
    }
  }
}

}  // namespace

std::vector<storage::Read<std::string>> read_listed_files(
    storage::Store& store, const std::string& revision,
    const std::vector<storage::RemoteEntry>& files) {
  std::vector<storage::Read<std::string>> out;
  out.reserve(files.size());
  for (size_t first = 0; first < files.size(); first += kListedFilesBatch)
    read_batch(store, revision, files, first, std::min(files.size(), first + kListedFilesBatch),
               out);
  return out;
}

}  // namespace neuron_cache::remote
