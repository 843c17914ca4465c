// One store layout for the tests of `neuron-cache gc` (remote/gc.h), written into every kind of
// store with the modification times it lists, and what gc must decide on it:
//
// compiler V1 (neuron-cache's index, and one registry file an entry lists):
//   A  referenced by a fresh entry (llama bs1)           kept (referenced)
//   B  referenced only by an entry 200 days old          removed with --older-than 90d
//   C  referenced by an entry 200 days old, declared     kept (referenced)
//   R  MODULE_<h> of the registry file <h>.json          kept (referenced)
//   U  nothing references it, written 10 days ago        removed
//   Y  nothing references it, written 1 hour ago         kept (grace) where times are listed
// compiler V2 (no neuron-cache index: optimum-neuron's or libneuronxla's):
//   O  nothing references it, written 50 days ago        kept in auto mode
// lease files: a live compile (kept), one done 3 days ago (removed), one done 1 hour ago (kept),
// a damaged one written 5 days ago (removed where times are listed).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "index_samples.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/timestamp.h"
#include "usage_layout.h"

namespace neuron_cache::testing {

inline constexpr int64_t kGcHour = 3600, kGcDay = 86400;

struct GcLayout {
  std::map<std::string, std::string> files;  // path in the store: content
  std::map<std::string, int64_t> modified;   // path: modification time (seconds since 1970)
  std::string declared_key;                  // C's entry's key
  std::string dropped_key;                   // B's entry's key
  std::string fresh_key;                     // A's entry's key
  std::string v1_shard_mistral;              // the shard that holds only B's entry
  std::string lease_live, lease_done_old, lease_done_young, lease_damaged;

  // "neuronxcc-<v>/MODULE_<x>" of each letter.
  std::string folder(char letter) const { return folders.at(letter); }
  std::map<char, std::string> folders;
  // Bytes of the files below a folder or a path.
  uint64_t bytes_below(const std::string& prefix) const {
    uint64_t n = 0;
    for (const auto& [path, content] : files)
      if (path.starts_with(prefix)) n += content.size();
    return n;
  }
  size_t files_below(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& [path, content] : files) n += path.starts_with(prefix) ? 1 : 0;
    return n;
  }
};

inline void add_gc_module(GcLayout& layout, char letter, const std::string& version,
                          const std::string& module, size_t neff_bytes, int64_t modified) {
  UsageLayout usage;
  add_usage_module(usage, version, module, neff_bytes);
  for (auto& [path, content] : usage.files) {
    layout.files[path] = content;
    layout.modified[path] = modified;
  }
  layout.folders[letter] = "neuronxcc-" + version + "/" + module;
}

inline std::string gc_lease(lease::State state, const std::string& key, int64_t started,
                            int64_t heartbeat, int64_t expires) {
  lease::Record record;
  record.state = state;
  record.holder = std::string(32, 'a');
  record.host = "runner-7";
  record.configuration = "llama-bs1";
  record.key = key;
  record.started = started;
  record.heartbeat = heartbeat;
  record.expires = expires;
  return lease::serialize(record);
}

inline GcLayout gc_layout(int64_t now) {
  GcLayout l;
  const std::string v1 = kUsageV1, v2 = kUsageV2;
  const std::string stem = "0123456789abcdef0123";
  add_gc_module(l, 'A', v1, "MODULE_1001+e30acd3a", 1000, now - 100 * kGcDay);
  add_gc_module(l, 'B', v1, "MODULE_1002+e30acd3a", 2000, now - 200 * kGcDay);
  add_gc_module(l, 'C', v1, "MODULE_1003+e30acd3a", 3000, now - 200 * kGcDay);
  add_gc_module(l, 'R', v1, "MODULE_" + stem, 4000, now - 100 * kGcDay);
  add_gc_module(l, 'U', v1, "MODULE_1004+e30acd3a", 5000, now - 10 * kGcDay);
  add_gc_module(l, 'Y', v1, "MODULE_1005+e30acd3a", 6000, now - kGcHour);
  add_gc_module(l, 'O', v2, "MODULE_2001+d7517139", 7000, now - 50 * kGcDay);
  std::string registry = "neuronxcc-" + v1 + "/0_REGISTRY/0.4.5/llama/acme/llama/" + stem + ".json";
  l.files[registry] = std::string(250, 'r');
  l.modified[registry] = now - 100 * kGcDay;

  auto ago = [now](int64_t seconds) { return utc_text(now - seconds); };
  artifact_index::Entry fresh =
      usage_entry("acme/llama", v1, 1, ago(2 * kGcHour), {"MODULE_1001+e30acd3a"});
  fresh.registry = {{registry.substr(registry.find("0_REGISTRY")), 250, std::string(64, 'c')}};
  artifact_index::Entry declared =
      usage_entry("acme/llama", v1, 2, ago(200 * kGcDay), {"MODULE_1003+e30acd3a"});
  artifact_index::Entry dropped =
      usage_entry("acme/mistral", v1, 1, ago(200 * kGcDay), {"MODULE_1002+e30acd3a"});
  UsageLayout shards;
  add_usage_shard(shards, "acme/llama", v1, {fresh, declared});
  add_usage_shard(shards, "acme/mistral", v1, {dropped});
  for (auto& [path, content] : shards.files) {
    l.files[path] = content;
    l.modified[path] = now - 2 * kGcHour;
  }
  l.fresh_key = fresh.key;
  l.declared_key = declared.key;
  l.dropped_key = dropped.key;
  l.v1_shard_mistral = artifact_index::remote_shard_path(v1, "acme/mistral");

  l.lease_live = lease::remote_path(v1, std::string(32, '1'));
  l.lease_done_old = lease::remote_path(v1, std::string(32, '2'));
  l.lease_done_young = lease::remote_path(v1, std::string(32, '3'));
  l.lease_damaged = lease::remote_path(v1, std::string(32, '4'));
  l.files[l.lease_live] = gc_lease(lease::State::Compiling, std::string(32, '1'), now - 2 * kGcHour,
                                   now - 60, now + kGcHour);
  l.files[l.lease_done_old] = gc_lease(lease::State::Done, std::string(32, '2'), now - 4 * kGcDay,
                                       now - 3 * kGcDay, now - 3 * kGcDay);
  l.files[l.lease_done_young] =
      gc_lease(lease::State::Done, std::string(32, '3'), now - 2 * kGcHour, now - kGcHour, now);
  l.files[l.lease_damaged] = "{\"format\": 1, \"state\": \"compil";
  l.modified[l.lease_live] = now - 60;
  l.modified[l.lease_done_old] = now - 3 * kGcDay;
  l.modified[l.lease_done_young] = now - kGcHour;
  l.modified[l.lease_damaged] = now - 5 * kGcDay;
  return l;
}

// A push at `now` of `model`'s shard at V1 with one entry referencing `module`: {path, content}.
inline std::pair<std::string, std::string> gc_push(const std::string& model,
                                                   const std::string& module, int64_t now) {
  artifact_index::Entry entry = usage_entry(model, kUsageV1, 1, utc_text(now), {module});
  UsageLayout shard;
  add_usage_shard(shard, model, kUsageV1, {entry});
  return *shard.files.begin();
}

// The MODULE_ folders a plan removes, as letters.
template <typename Plan>
std::set<char> removed_letters(const Plan& plan, const GcLayout& layout) {
  std::set<char> out;
  for (const auto& folder : plan.removed) {
    for (const auto& [letter, path] : layout.folders)
      if (path == folder.path) out.insert(letter);
  }
  return out;
}

}  // namespace neuron_cache::testing
