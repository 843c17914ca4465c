// Builds locked to exact bytes (format/lockfile.h): `lock` takes the store's own index entries of
// the manifest's configurations; `prefetch --locked` installs exactly those files, without the
// index, the registry or the plan.
#include <chrono>

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

PrefetchStep Pipeline::prefetch_locked(const lockfile::Lock& lock,
                                       const std::vector<const lockfile::Locked*>& selected) {
  auto start = std::chrono::steady_clock::now();
  storage::Store* store = online_store();
  if (store == nullptr) {
    throw operational_error(repo_.empty() ? "no cache store is set: give --repo"
                                          : storage::describe(store_) +
                                                " cannot be read (offline or not opened)");
  }
  std::vector<artifact_index::Entry> entries;
  for (const auto* locked : selected) entries.push_back(locked->entry);
  // The lock's revision on the lock's store; another store (a mirror) at its head: the bytes
  // are checked against the lock's sha256 either way.
  bool same = store->location() == lock.store && !lock.revision.empty();
  std::string revision = same ? lock.revision : store->head();
  log::debug("decide", "prefetch --locked: " + std::to_string(entries.size()) +
                           " configurations from " + store->location() + " at " +
                           (revision.empty() ? "its latest state" : revision));
  PrefetchStep step;
  step.result =
      remote::prefetch(*store, revision, *local_index_, entries, [this](const std::string& line) {
        if (on_progress) on_progress(line);
      });
  step.hits = step.result.completed.size();
  step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return step;
}

}  // namespace neuron_cache::pipeline
