#include "neuron_cache/transfer/push.h"

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/remote/commit_on_head.h"
#include "neuron_cache/remote/remote_index.h"
#include "neuron_cache/sys/safe_dir.h"
#include "neuron_cache/sys/temp_file.h"
#include "neuron_cache/trust/signing.h"

namespace neuron_cache::transfer {
namespace {

namespace ai = artifact_index;
namespace fs = std::filesystem;

// Why the local files no longer match the entry, or nothing when they do.
std::optional<std::string> check_local(const local::LocalIndex& local, const ai::Entry& entry) {
  for (const auto& module : entry.modules) {
    if (!local.module_complete(entry.compiler_dir(), module)) {
      return module.name + " is not complete in the local cache";
    }
    ai::ModuleRecord now = local.record_module(entry.compiler_dir(), module.name);
    for (const auto& file : module.files) {
      auto it = std::find_if(now.files.begin(), now.files.end(),
                             [&](const ai::FileRecord& f) { return f.name == file.name; });
      if (it == now.files.end() || it->sha256 != file.sha256) {
        return module.name + "/" + file.name + " changed since it was compiled";
      }
    }
  }
  for (const auto& file : entry.registry) {
    if (local.record_registry_file(entry.compiler_dir(), file.name).sha256 != file.sha256) {
      return file.name + " changed since it was compiled";
    }
  }
  return std::nullopt;
}

struct Attempt {
  std::vector<storage::CommitOperation> operations;
  std::set<std::string> paths;  // each file once, however many configurations share it
  std::vector<std::unique_ptr<sys::TempFile>> temp_files;
  std::vector<std::string> pushed;
  std::vector<std::string> already;
  std::vector<std::string> repaired;
  std::vector<std::string> cosigned;
  std::map<std::string, std::string> replaced;
  size_t modules_added = 0;

  void add(const std::string& path, const fs::path& local, storage::Expected expected = {}) {
    if (paths.insert(path).second)
      operations.push_back({storage::CommitOperation::Kind::Add, path, local, std::move(expected)});
  }
};

template <typename Record>
bool listed(const std::vector<Record>& records, const std::string& name) {
  return std::any_of(records.begin(), records.end(),
                     [&](const Record& record) { return record.name == name; });
}

// The files of `entry`, except those of the modules and registry files the Hub's entry of the
// same key (`on_hub`, when there is one) already lists: a grown entry sends only what it added.
void add_entry_files(const local::LocalIndex& local, const ai::Entry& entry,
                     const ai::Entry* on_hub, Attempt& attempt) {
  fs::path compiler = local.cache().root() / entry.compiler_dir();
  for (const auto& module : entry.modules) {
    if (on_hub && listed(on_hub->modules, module.name)) continue;
    ++attempt.modules_added;
    for (const auto& file : module.files) {
      attempt.add(entry.compiler_dir() + "/" + module.name + "/" + file.name,
                  local.cache().file_to_read(compiler / module.name / file.name));
    }
  }
  for (const auto& file : entry.registry) {
    if (on_hub && listed(on_hub->registry, file.name)) continue;
    // An entry recorded before temporary files were left out may still list one.
    if (layout::is_temporary_file(file.name.substr(file.name.rfind('/') + 1))) continue;
    attempt.add(entry.compiler_dir() + "/" + file.name,
                local.cache().file_to_read(compiler / file.name));
  }
}

// Reads the shard at `path` on `head` (an empty one when there is none) and checks it is the
// shard of `inputs`' model or profile; `expected` is what its rewrite expects to replace.
ai::IndexFile read_shard(storage::Store& store, const std::string& head, const std::string& path,
                         const cache_key::KeyInputs& inputs, storage::Expected& expected,
                         std::vector<std::string>& repaired) {
  const std::string repo = store.name();
  storage::SmallFile read = store.read_versioned(path, head, remote::kMaxIndexFileBytes);
  expected = read.expected();
  if (!read.content) return ai::shard_for(inputs);
  ai::IndexFile index;
  try {
    index = ai::parse_index(*read.content, repo + "/" + path);
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::Input || ai::is_newer_index(*read.content)) throw;
    // A damaged file (bytes changed on their way, a writer cut short) is no dead end for every
    // later push: rewritten over exactly the version read, with what this push adds.
    repaired.push_back(repo + "/" + path + " could not be read (" + error.what() +
                       "): rewritten with the configurations of this push; the ones it listed "
                       "besides are pushed again by the machines that have them");
    return ai::shard_for(inputs);
  }
  if (!ai::is_shard_for(index, inputs)) {
    throw input_error(repo + "/" + path + " is not the index shard of " +
                      cache_key::owner_of(inputs) + ": fix or delete that file");
  }
  return index;
}

// What the shard says of `entry` after the push: the Hub's records of the folders it has (their
// files are what the Hub serves, whatever this cache holds), then the ones this push adds.
ai::Entry grown(const ai::Entry* on_hub, const ai::Entry& entry) {
  if (!on_hub) return entry;
  ai::Entry out = ai::merged(*on_hub, entry);
  out.configuration = entry.configuration;
  out.compile_seconds = std::max(on_hub->compile_seconds, entry.compile_seconds);
  out.tool = entry.tool;
  out.created_at = entry.created_at;
  return out;
}

// What a signing push keeps of the store's entry of the same key (PushOptions::signer).
enum class Kept { All, SameFiles, Nothing };

Kept kept_by_signer(const ai::Entry& on_hub, const ai::Entry& entry,
                    const trust::SecretKey& signer) {
  trust::TrustedKeys own;
  own.add(signer.public_key());  // derived once, when the key was read
  if (trust::verify_entry(on_hub, own).trusted()) return Kept::All;
  if (trust::canonical_statement(on_hub) == trust::canonical_statement(entry))
    return Kept::SameFiles;
  return Kept::Nothing;
}

// One entry of a signing push: the store's entry (`on_hub`, or null) kept, grown, co-signed or
// replaced, and signed. Returns false when the store already has it as this key signed it.
bool prepare_signed(const local::LocalIndex& local, const ai::Entry& entry, const ai::Entry* on_hub,
                    const trust::SecretKey& signer, ai::IndexFile& index, Attempt& attempt) {
  if (on_hub && already_stored(*on_hub, entry, &signer)) return false;
  Kept kept = on_hub ? kept_by_signer(*on_hub, entry, signer) : Kept::Nothing;
  ai::Entry out;
  if (kept == Kept::SameFiles) {
    out = *on_hub;
    attempt.cosigned.push_back(entry.key);
  } else {
    if (on_hub && kept == Kept::Nothing) {
      attempt.replaced.emplace(entry.key, "its entry in the store was not signed by " +
                                              signer.name() +
                                              " and listed other files: replaced by this "
                                              "machine's, signed");
      on_hub = nullptr;  // every file is sent again: the store's may be other bytes
    }
    add_entry_files(local, entry, on_hub, attempt);
    out = grown(on_hub, entry);
  }
  trust::add_signature(out, trust::sign_entry(out, signer));
  index.entries.insert_or_assign(entry.key, std::move(out));
  return true;
}

// Only the shards of the pushed configurations' models are read and rewritten: the index data
// a push sends does not grow with the repo.
Attempt prepare(storage::Store& store, const std::string& head, const local::LocalIndex& local,
                const std::vector<const ai::Entry*>& entries, const trust::SecretKey* signer) {
  Attempt attempt;
  std::map<std::string, std::vector<const ai::Entry*>> by_shard;
  for (const ai::Entry* entry : entries) {
    by_shard[ai::remote_shard_path(entry->inputs)].push_back(entry);
  }
  for (const auto& [path, list] : by_shard) {
    storage::Expected expected;
    ai::IndexFile index =
        read_shard(store, head, path, list.front()->inputs, expected, attempt.repaired);
    bool changed = false;
    for (const ai::Entry* entry : list) {
      auto it = index.entries.find(entry->key);
      const ai::Entry* on_hub = it == index.entries.end() ? nullptr : &it->second;
      if (signer) {
        if (prepare_signed(local, *entry, on_hub, *signer, index, attempt)) {
          attempt.pushed.push_back(entry->key);
          changed = true;
        } else {
          attempt.already.push_back(entry->key);
        }
        continue;
      }
      if (on_hub && ai::covers(*on_hub, *entry)) {
        attempt.already.push_back(entry->key);
        continue;
      }
      add_entry_files(local, *entry, on_hub, attempt);
      index.entries.insert_or_assign(entry->key, grown(on_hub, *entry));
      attempt.pushed.push_back(entry->key);
      changed = true;
    }
    if (!changed) continue;
    attempt.temp_files.push_back(std::make_unique<sys::TempFile>(ai::serialize_index(index)));
    attempt.add(path, attempt.temp_files.back()->path(), expected);  // the merge's base
  }
  return attempt;
}

// A retry that finds everything it offered already stored: the earlier attempt landed though its
// answer was lost (or another machine pushed the same bytes meanwhile). Either way they are in the
// store because of this push's offer: counted as pushed, never as "pushed 0".
void note_landed_earlier(PushResult& result, const std::set<std::string>& offered) {
  if (result.pushed.empty() || offered.empty()) return;
  result.commit.committed = true;
  result.commit.landed_unanswered =
      std::to_string(result.pushed.size()) +
      " configurations of an earlier attempt of this push were found in the store when it was "
      "retried: that commit landed though its answer was lost (or another machine pushed the "
      "same files meanwhile)";
}

constexpr const char* kModulesCommitMessage = "neuron-cache: add compiled graphs";

}  // namespace

PushResult& operator+=(PushResult& into, const PushResult& later) {
  into.pushed.insert(into.pushed.end(), later.pushed.begin(), later.pushed.end());
  into.already_stored.insert(into.already_stored.end(), later.already_stored.begin(),
                             later.already_stored.end());
  into.modules_added += later.modules_added;
  for (const auto& [key, why] : later.skipped) into.skipped[key] = why;
  into.repaired.insert(into.repaired.end(), later.repaired.begin(), later.repaired.end());
  into.cosigned.insert(into.cosigned.end(), later.cosigned.begin(), later.cosigned.end());
  for (const auto& [key, why] : later.replaced) into.replaced[key] = why;
  into.commit += later.commit;
  into.attempts += later.attempts;
  return into;
}

bool already_stored(const ai::Entry& on_hub, const ai::Entry& local,
                    const trust::SecretKey* signer) {
  if (!ai::covers(on_hub, local)) return false;
  return !signer || kept_by_signer(on_hub, local, *signer) == Kept::All;
}

std::string push_commit_message(size_t configurations) {
  return "neuron-cache: add compiled artifacts of " + std::to_string(configurations) +
         (configurations == 1 ? " configuration" : " configurations");
}

PushResult push(storage::Store& store, const local::LocalIndex& local,
                const std::vector<ai::Entry>& entries, const PushOptions& options,
                const AlsoCommit& also) {
  PushResult result;
  std::vector<const ai::Entry*> ready;
  std::set<std::string> seen;
  for (const auto& entry : entries) {
    if (seen.count(entry.key)) continue;
    if (auto problem = check_local(local, entry)) {
      result.skipped.emplace(entry.key, *problem);
    } else {
      seen.insert(entry.key);
      result.skipped.erase(entry.key);
      ready.push_back(&entry);
    }
  }
  if (ready.empty()) return result;
  std::set<std::string> offered;  // keys an earlier attempt's commit carried
  remote::commit_on_head(
      store, options.conflicts, "pushing", result.attempts, [&](const std::string& head) {
        Attempt attempt = prepare(store, head, local, ready, options.signer);
        result.pushed = attempt.pushed;
        result.repaired = attempt.repaired;
        result.cosigned = attempt.cosigned;
        result.replaced = attempt.replaced;
        result.already_stored.clear();
        if (!attempt.pushed.empty()) result.modules_added = attempt.modules_added;
        for (const std::string& key : attempt.already)
          (offered.count(key) ? result.pushed : result.already_stored).push_back(key);
        if (attempt.pushed.empty()) return note_landed_earlier(result, offered);
        offered.insert(attempt.pushed.begin(), attempt.pushed.end());
        if (also) {
          for (auto& op : also(head, attempt.pushed)) attempt.operations.push_back(std::move(op));
        }
        net::TransferPhase phase("Uploading");
        result.commit =
            store.commit(attempt.operations, push_commit_message(attempt.pushed.size()), head);
      });
  return result;
}

PushResult push_modules(storage::Store& store, const local::LocalIndex& local,
                        const std::vector<std::string>& modules, const PushOptions& options) {
  PushResult result;
  std::vector<storage::CommitOperation> operations;
  for (const auto& id : modules) {
    size_t slash = id.find('/');
    std::string compiler_dir = id.substr(0, slash);
    std::string name = slash == std::string::npos ? "" : id.substr(slash + 1);
    try {
      ai::ModuleRecord record = local.record_module(compiler_dir, name);
      for (const auto& file : record.files) {
        operations.push_back(
            {storage::CommitOperation::Kind::Add, id + "/" + file.name,
             local.cache().file_to_read(local.cache().root() / compiler_dir / name / file.name)});
      }
      result.pushed.push_back(id);
    } catch (const Error& error) {
      result.skipped.emplace(id, error.what());
    }
  }
  if (operations.empty()) return result;
  remote::commit_on_head(store, options.conflicts, "pushing", result.attempts,
                         [&](const std::string& head) {
                           net::TransferPhase phase("Uploading");
                           result.commit = store.commit(operations, kModulesCommitMessage, head);
                         });
  return result;
}

}  // namespace neuron_cache::transfer
