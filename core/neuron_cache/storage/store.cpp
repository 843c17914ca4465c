#include "neuron_cache/storage/store.h"

#include "neuron_cache/error.h"

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

bool Expected::met_by(const std::optional<std::string>& now) const {
  switch (kind) {
    case Kind::Anything:
      return true;
    case Kind::Absent:
      return !now;
    case Kind::Version:
      return now && *now == token;
  }
  return false;
}

CommitResult& operator+=(CommitResult& into, const CommitResult& later) {
  into.committed = into.committed || later.committed;
  if (!later.revision.empty()) into.revision = later.revision;
  if (!later.link.empty()) into.link = later.link;
  into.small_files += later.small_files;
  into.large_sent += later.large_sent;
  into.large_already_stored += later.large_already_stored;
  into.unchanged += later.unchanged;
  into.deleted += later.deleted;
  into.bytes_sent += later.bytes_sent;
  if (!later.landed_unanswered.empty())
    into.landed_unanswered +=
        (into.landed_unanswered.empty() ? "" : "; ") + later.landed_unanswered;
  into.uploads_aborted += later.uploads_aborted;
  into.warnings.insert(into.warnings.end(), later.warnings.begin(), later.warnings.end());
  return into;
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

std::string Store::squash_history(const std::string& /*message*/) {
  throw input_error(describe(kind(), location()) +
                    " keeps no history: a deletion frees its bytes at once, there is nothing to "
                    "squash; leave out --squash");
}

std::vector<RemoteEntry> Store::stat_times(const std::vector<std::string>& paths,
                                           const std::string& revision) {
  return stat(paths, revision);
}

std::string_view leftover_kind_name(Leftover::Kind kind) {
  switch (kind) {
    case Leftover::Kind::Copy:
      return "copy";
    case Leftover::Kind::EmptyFolder:
      return "empty folder";
    case Leftover::Kind::Upload:
      return "upload";
  }
  return "copy";
}

std::vector<Leftover> Store::leftovers(const LeftoverAges& /*ages*/) {
  return {};
}

LeftoverRemoval Store::remove_leftovers(const std::vector<Leftover>& found,
                                        const LeftoverAges& /*ages*/) {
  LeftoverRemoval out;
  for (const auto& item : found)
    out.kept.push_back(item.path + ": " + describe(kind(), location()) + " removes no leftovers");
  return out;
}

std::optional<StoreTimes> Store::write_times(const std::string& /*path*/,
                                             const std::string& /*revision*/) {
  return std::nullopt;
}

bool Store::has_revision(const std::string& /*revision*/) {
  return true;
}

bool Store::absorbs(const std::string& /*operation*/, const Error& /*error*/) {
  return false;
}

Kind kind_named(std::string_view name) {
  if (name == "s3") return Kind::S3;
  if (name == "folder") return Kind::Folder;
  return Kind::Hub;
}

std::string describe(Kind kind) {
  switch (kind) {
    case Kind::Hub:
      return "the Hub";
    case Kind::S3:
      return "S3";
    case Kind::Folder:
      return "the shared folder";
  }
  return "the store";
}

std::string describe(Kind kind, std::string_view location) {
  if (kind == Kind::Hub || location.empty()) return describe(kind);
  if (kind == Kind::S3) return std::string(location);
  std::string_view path = location;
  if (path.starts_with("file://")) path.remove_prefix(7);
  return describe(kind) + " " + std::string(path);
}

std::string on(Kind kind) {
  return (kind == Kind::Folder ? "in " : "on ") + describe(kind);
}

std::string describe_part(Kind kind, std::string_view location, std::string_view part) {
  if (kind == Kind::Hub) return "the Hub " + std::string(part);
  return "the " + std::string(part) + " in " + describe(kind, location);
}

std::string describe(const Store* store) {
  return store ? describe(store->kind(), store->location()) : describe(Kind::Hub);
}

std::string describe_part(const Store* store, std::string_view part) {
  return store ? describe_part(store->kind(), store->location(), part)
               : describe_part(Kind::Hub, "", part);
}

}  // namespace neuron_cache::storage
