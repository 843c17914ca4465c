#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Hub:
      return "hub";
    case Kind::S3:
      return "s3";
    case Kind::Folder:
      return "folder";
  }
  return "unknown";
}

// Failures the policy does not absorb propagate: without a policy (--strict) a failed read
// fails the run.
Read<std::vector<RemoteEntry>> Store::list_or_failure(const std::string& path, bool recursive,
                                                      const std::string& revision) {
  try {
    return list(path, recursive, revision);
  } catch (const Error& error) {
    if (!absorbs("list", error)) throw;
    return Failure{error.what(), error.kind()};
  }
}

Read<std::vector<RemoteEntry>> Store::stat_or_failure(const std::vector<std::string>& paths,
                                                      const std::string& revision) {
  try {
    return stat(paths, revision);
  } catch (const Error& error) {
    if (!absorbs("stat", error)) throw;
    return Failure{error.what(), error.kind()};
  }
}

Read<std::optional<std::string>> Store::read_small_or_failure(const std::string& path,
                                                              const std::string& revision,
                                                              uint64_t max_bytes) {
  try {
    return read_small(path, revision, max_bytes);
  } catch (const Error& error) {
    if (!absorbs("read", error)) throw;
    return Failure{error.what(), error.kind()};
  }
}

bool Store::absorbs(const std::string& /*operation*/, const Error& /*error*/) {
  return false;
}

}  // namespace neuron_cache::storage
