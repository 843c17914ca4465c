// Builds locked to exact bytes (format/lockfile.h): `lock` takes the store's own index entries of
// the manifest's configurations; `prefetch --locked` installs exactly those files, without the
// index, the registry or the plan.
#include <chrono>

#include "neuron_cache/error.h"
#include "neuron_cache/remote/remote_index.h"

#include "neuron_cache/log/log.h"
#include "neuron_cache/pipeline/pipeline.h"

namespace neuron_cache::pipeline {

LockStep Pipeline::lock(const plan::Plan& plan) {
  if (!remote_) {
    throw operational_error("cannot lock: " +
                            (plan.hub_problem.empty() ? std::string("no cache store could be read")
                                                      : plan.hub_problem) +
                            "; a lock names what the store holds: run it when the store can be "
                            "read");
  }
  std::vector<const plan::Target*> keyed;
  for (const auto& row : plan.rows)
    if (row.target.unkeyed.empty()) keyed.push_back(&row.target);
  remote_->load(plan::shards_of(keyed));
  LockStep step;
  step.lock.store = store_->location();
  step.lock.revision = remote_->revision();
  for (const auto& row : plan.rows) {
    const std::string& name = row.target.configuration.name;
    if (!row.target.unkeyed.empty()) {
      step.missing.push_back(name + ": its cache key is unknown (" + row.target.unkeyed + ")");
      continue;
    }
    const auto* entry = remote_->find(row.target.inputs.compiler_version, row.target.key);
    if (entry == nullptr) {
      step.missing.push_back(name + ": not in " + repo_ +
                             " (compile and push it first: neuron-cache ci)");
      continue;
    }
    step.lock.configurations.push_back({name, *entry});
  }
  return step;
}

void Pipeline::use_lock(lockfile::Lock lock) {
  for (const auto& configuration : manifest_.configurations) {
    if (lock.find(configuration.name) == nullptr)
      throw input_error("the lock does not lock " + configuration.name +
                        ": run `neuron-cache lock " + options_.manifest.string() + "` again");
  }
  options_.strict = true;
  lock_ = std::move(lock);
}

std::vector<plan::Target> Pipeline::locked_targets() const {
  std::vector<plan::Target> targets;
  for (const auto& configuration : manifest_.configurations) {
    const artifact_index::Entry& entry = lock_->find(configuration.name)->entry;
    targets.push_back({configuration, entry.inputs, entry.key, ""});
  }
  return targets;
}

std::unique_ptr<remote::RemoteIndex> Pipeline::locked_index() {
  std::vector<artifact_index::Entry> entries;
  for (const auto& locked : lock_->configurations) entries.push_back(locked.entry);
  // The lock's revision on the lock's store; another store (a mirror) at its head: the bytes are
  // checked against the lock's sha256 either way.
  bool same = store_->location() == lock_->store;
  log::debug("decide", std::string("locked: ") + std::to_string(entries.size()) +
                           " entries from the lock, read from " + store_->location() +
                           (same ? " at the locked revision" : " (a mirror) at its head"));
  return std::make_unique<remote::RemoteIndex>(
      remote::RemoteIndex::locked(*store_, same ? lock_->revision : "", entries));
}

}  // namespace neuron_cache::pipeline
