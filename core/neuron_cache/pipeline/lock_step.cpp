// Builds locked to exact bytes (format/lockfile.h): `lock` takes the store's own index entries of
// the manifest's configurations; locked mode (`--locked`) plans from those entries alone, so a
// run installs exactly their files without reading the index, the registry or the model repos.
#include <filesystem>
#include <fstream>

#include "neuron_cache/error.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/pipeline/lock_step.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::pipeline {

std::filesystem::path lock_path(const std::filesystem::path& manifest, const std::string& given) {
  if (!given.empty()) return given;
  return manifest.parent_path() / std::string(lockfile::kFileName);
}

std::optional<lockfile::Lock> read_lock(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  if (!std::filesystem::is_regular_file(path, ec))
    throw input_error(path.string() + " is not a file: give the lockfile's path");
  if (std::filesystem::file_size(path, ec) > lockfile::kMaxLockBytes)
    throw input_error(path.string() + " is larger than a lockfile may be (64 MiB)");
  // Bounded while it is read too: a file that grew since its size was asked stops there.
  std::ifstream in(path, std::ios::binary);
  std::string text(lockfile::kMaxLockBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw operational_error("cannot read " + path.string());
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > lockfile::kMaxLockBytes)
    throw input_error(path.string() + " is larger than a lockfile may be (64 MiB)");
  return lockfile::parse(text, path.string());
}

lockfile::Lock require_lock(const std::filesystem::path& path, const std::string& manifest) {
  std::optional<lockfile::Lock> lock = read_lock(path);
  if (!lock) {
    throw input_error("no lockfile " + path.string() + ": write it with `neuron-cache lock " +
                      manifest + "`");
  }
  return *lock;
}

// What a manifest declares that the lock does not cover, or a changed manifest: "" when the
// lock covers `names` of this very manifest.
std::string lock_problem(const lockfile::Lock& lock, const manifest::Manifest& manifest,
                         const std::vector<std::string>& names, const std::filesystem::path& path) {
  std::string redo = "; run `neuron-cache lock " + manifest.path + "` again";
  if (lock.manifest_sha256 != manifest.text_sha256)
    return manifest.path + " changed since " + path.string() + " was written" + redo;
  std::string missing;
  for (const auto& name : names) {
    if (lock.find(name) == nullptr) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) return path.string() + " does not lock " + missing + redo;
  return "";
}

void LockedMode::use_lockfile(const std::string& given) {
  std::filesystem::path path = lock_path(run_.manifest.path, given);
  lockfile::Lock lock = require_lock(path, run_.manifest.path);
  std::vector<std::string> names;
  for (const auto& c : run_.manifest.configurations) names.push_back(c.name);
  if (std::string problem = lock_problem(lock, run_.manifest, names, path); !problem.empty())
    throw input_error(problem);
  use_lock(std::move(lock));
}

LockStep LockedMode::lock(const plan::Plan& plan) {
  if (!run_.remote) {
    throw operational_error("cannot lock: " +
                            (plan.hub_problem.empty() ? std::string("no cache store could be read")
                                                      : plan.hub_problem) +
                            "; a lock names what the store holds: run it when the store can be "
                            "read");
  }
  std::vector<const plan::Target*> keyed;
  for (const auto& row : plan.rows)
    if (row.target.unkeyed.empty()) keyed.push_back(&row.target);
  run_.remote->load(plan::shards_of(keyed));
  LockStep step;
  step.lock.store = run_.store->location();
  step.lock.revision = run_.remote->revision();
  for (const auto& row : plan.rows) {
    const std::string& name = row.target.configuration.name;
    if (!row.target.unkeyed.empty()) {
      step.missing.push_back(name + ": its cache key is unknown (" + row.target.unkeyed + ")");
      continue;
    }
    const auto* entry = run_.remote->find(row.target.inputs.compiler_version, row.target.key);
    if (entry == nullptr) {
      step.missing.push_back(name + ": not in " + run_.repo +
                             " (compile and push it first: neuron-cache ci)");
      continue;
    }
    std::vector<std::string> signed_by;
    if (auto why = plan::refusal(*entry, run_.trust, &signed_by)) {
      step.missing.push_back(name + ": its entry in " + run_.repo + " is not trusted (" + *why +
                             "): push it again with a trusted signing key (neuron-cache ci)");
      continue;
    }
    step.lock.configurations.push_back({name, *entry, signed_by});
  }
  return step;
}

void LockedMode::use_lock(lockfile::Lock lock) {
  for (const auto& configuration : run_.manifest.configurations) {
    if (lock.find(configuration.name) == nullptr)
      throw input_error("the lock does not lock " + configuration.name +
                        ": run `neuron-cache lock " + run_.options.manifest.string() + "` again");
  }
  run_.options.strict = true;
  run_.lock = std::move(lock);
}

std::vector<plan::Target> LockedMode::locked_targets() const {
  std::vector<plan::Target> targets;
  for (const auto& configuration : run_.manifest.configurations) {
    const artifact_index::Entry& entry = run_.lock->find(configuration.name)->entry;
    targets.push_back({configuration, entry.inputs, entry.key, ""});
  }
  return targets;
}

void LockedMode::refetch_locked_at_head(const std::vector<artifact_index::Entry>& entries,
                                        transfer::PrefetchResult& result) {
  if (run_.lock->revision.empty() || run_.store->location() != run_.lock->store)
    return;  // read at the head
  try {
    if (run_.store->has_revision(run_.lock->revision))
      return;  // the failures are the store's, not this
  } catch (const Error& error) {
    rethrow_local_disk(error);
    log::debug("lock",
               std::string("could not ask whether the locked commit exists: ") + error.what());
    return;
  }
  run_.note(true, "the locked commit " + run_.lock->revision + " is gone from " + run_.repo +
                      " (its history was squashed, as `neuron-cache gc --squash` does): the locked "
                      "files are read at the head instead, each still checked against the lock's "
                      "sha256; run `neuron-cache lock " +
                      run_.options.manifest.string() + "` to pin the new commit");
  std::vector<artifact_index::Entry> failed;
  for (const auto& entry : entries) {
    if (result.failed.count(entry.key) > 0) failed.push_back(entry);
  }
  try {
    run_.remote = locked_index(true);
    result += transfer::prefetch(*run_.store, run_.remote->revision(), *run_.local_index, failed,
                                 [this](const std::string& line) { run_.progress(line); });
  } catch (const Error& error) {
    rethrow_local_disk(error);
    for (const auto& entry : failed) result.failed[entry.key] = error.what();
  }
}

std::unique_ptr<remote::RemoteIndex> LockedMode::locked_index(bool at_head) {
  std::vector<artifact_index::Entry> entries;
  for (const auto& locked : run_.lock->configurations) entries.push_back(locked.entry);
  // The lock's revision on the lock's store; another store (a mirror) at its head: the bytes are
  // checked against the lock's sha256 either way.
  bool same = run_.store->location() == run_.lock->store && !at_head;
  log::debug("decide", std::string("locked: ") + std::to_string(entries.size()) +
                           " entries from the lock, read from " + run_.store->location() +
                           (same ? " at the locked revision" : " (a mirror) at its head"));
  return std::make_unique<remote::RemoteIndex>(
      remote::RemoteIndex::locked(*run_.store, same ? run_.lock->revision : "", entries));
}

}  // namespace neuron_cache::pipeline
