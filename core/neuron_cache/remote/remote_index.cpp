#include "neuron_cache/remote/remote_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::remote {
namespace {

namespace ai = artifact_index;
namespace fs = std::filesystem;

// A kept answer: the entry in the memo's own shape (not any store's).
nlohmann::json entry_json(const storage::RemoteEntry& entry) {
  return {{"path", entry.path},
          {"directory", entry.is_directory},
          {"size", entry.size},
          {"oid", entry.oid},
          {"sha256", entry.listed_sha256}};
}

// An entry read back from the memo, or nothing when the memo is damaged (then the store is asked
// again).
std::optional<storage::RemoteEntry> entry_of(const nlohmann::json& item) {
  if (!item.is_object()) return std::nullopt;
  auto path = item.find("path"), directory = item.find("directory"), size = item.find("size");
  auto oid = item.find("oid"), sha256 = item.find("sha256");
  if (path == item.end() || !path->is_string() || directory == item.end() ||
      !directory->is_boolean() || size == item.end() || !size->is_number_integer() ||
      size->get<int64_t>() < 0 || oid == item.end() || !oid->is_string() || sha256 == item.end() ||
      !sha256->is_string())
    return std::nullopt;
  storage::RemoteEntry entry;
  entry.path = path->get<std::string>();
  entry.is_directory = directory->get<bool>();
  entry.size = size->get<uint64_t>();
  entry.oid = oid->get<std::string>();
  entry.listed_sha256 = sha256->get<std::string>();
  return entry;
}

// The answers kept at `revision`: {"revision", "paths": {path: entry or null}}; empty answers
// when none are kept for that revision.
nlohmann::json read_answers(const sys::RootedFile& file, const std::string& revision) {
  nlohmann::json empty = {{"revision", revision}, {"paths", nlohmann::json::object()}};
  nlohmann::json kept = pyjson::read_kept(file).value_or(nullptr);
  bool usable = kept.is_object() && kept.contains("revision") && kept["revision"] == revision &&
                kept.contains("paths") && kept["paths"].is_object();
  return usable ? kept : empty;
}

void keep_answers(const sys::RootedFile& file, const nlohmann::json& answers) {
  try {
    file.replace(answers.dump());
  } catch (const std::exception&) {
    // Kept answers only save a request next time.
  }
}

// paths-info at a commit never changes: with `copies`, the answers at the last head read are
// kept there (paths-info.json, each path asked with its entry or null), so a run against an
// unchanged repo asks only for the head commit. As trusted as the index copies beside it.
std::vector<storage::RemoteEntry> paths_info_at(storage::Store& store, const std::string& revision,
                                                const sys::RootedFile& copies,
                                                const std::vector<std::string>& paths) {
  // Without a revision (S3, folders) answers can change at any time: nothing is kept.
  sys::RootedFile file =
      copies.empty() || revision.empty() ? sys::RootedFile() : copies.child("paths-info.json");
  nlohmann::json answers = read_answers(file, revision);
  nlohmann::json& known = answers["paths"];
  bool all_known = std::all_of(paths.begin(), paths.end(),
                               [&](const std::string& path) { return known.contains(path); });
  std::vector<storage::RemoteEntry> found;
  if (all_known) {
    bool damaged = false;
    for (const auto& path : paths) {
      if (known[path].is_null()) continue;
      auto entry = entry_of(known[path]);
      damaged = damaged || !entry;
      if (entry) found.push_back(std::move(*entry));
    }
    if (!damaged) return found;
    found.clear();  // a damaged copy: ask the store again
  }
  storage::Read<std::vector<storage::RemoteEntry>> answer = store.stat_or_failure(paths, revision);
  // A failed stat is a miss for this run only: kept, it would hide these paths until the head
  // moves.
  if (answer.failed()) return {};
  found = answer.value();
  for (const auto& path : paths) known[path] = nullptr;
  for (const auto& entry : found) {
    if (known.contains(entry.path)) known[entry.path] = entry_json(entry);
  }
  keep_answers(file, answers);
  return found;
}

}  // namespace

RemoteIndex RemoteIndex::open(storage::Store& store, sys::RootedFile copies) {
  RemoteIndex index(store);
  if (!copies.empty()) {
    // One folder per store: "org~name" for a Hub repo, "s3~~~bucket~prefix" and so on.
    std::string folder = store.name();
    for (char& ch : folder)
      ch = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'
               ? ch
               : '~';
    if (folder.starts_with('.')) folder[0] = '~';  // never "." nor ".."
    index.copies_ = copies.child(folder);
  }
  return index;
}

RemoteIndex RemoteIndex::locked(storage::Store& store, const std::string& revision,
                                const std::vector<ai::Entry>& entries) {
  RemoteIndex index(store);
  index.locked_ = true;
  if (!revision.empty()) index.revision_ = revision;
  std::set<std::string> versions;
  for (const auto& entry : entries) {
    index.entries_[entry.inputs.compiler_version].emplace(entry.key, entry);
    versions.insert(entry.inputs.compiler_version);
  }
  index.versions_ = std::vector<std::string>(versions.begin(), versions.end());
  return index;
}

const std::string& RemoteIndex::revision() const {
  if (!revision_) revision_ = store_->head();
  return *revision_;
}

void RemoteIndex::load(const std::set<std::pair<std::string, std::string>>& versions_and_shards) {
  if (locked_) return;  // the lock's entries are the whole index
  std::vector<std::string> paths;
  auto ask = [&](const std::string& path) {
    if (asked_.insert(path).second) paths.push_back(path);
  };
  for (const auto& [version, shard] : versions_and_shards) {
    ask(ai::remote_index_path(version));
    ask(shard);
  }
  if (paths.empty()) return;
  std::map<std::string, std::string> texts;
  // Without revisions (S3, folders) another writer may replace a file between its listing and
  // its download: a file that did not arrive as listed is listed and fetched again.
  for (int round = 0; !paths.empty(); ++round) {
    std::vector<storage::RemoteEntry> found = listed(paths);
    bool last = round == kRewriteRetries || !revision().empty();
    paths = fetch(found, texts, last);
    if (last) break;
  }
  for (const auto& [path, text] : texts) {
    try {
      add(ai::parse_index(text, repo_ + "/" + path));
    } catch (const Error& error) {
      problems_.push_back(std::string("skipped a whole index file: ") + error.what());
    }
  }
}

std::vector<storage::RemoteEntry> RemoteIndex::listed(const std::vector<std::string>& paths) {
  std::vector<storage::RemoteEntry> found;
  for (auto& file : paths_info_at(*store_, revision(), copies_, paths)) {
    // paths-info answers only for paths that exist; anything else it sends is ignored.
    if (file.is_directory || !std::count(paths.begin(), paths.end(), file.path)) continue;
    if (file.size > kMaxIndexFileBytes) {
      problems_.push_back(repo_ + "/" + file.path + " is " + std::to_string(file.size) +
                          " bytes: too large for an index file, ignored");
      continue;
    }
    found.push_back(std::move(file));
  }
  return found;
}

// The content of each file into `texts`, from the kept copies or downloaded in parallel. Returns
// the paths of the files that did not arrive intact; on the `last` try each is a problem (its
// configurations are then compiled) and the index is incomplete.
std::vector<std::string> RemoteIndex::fetch(const std::vector<storage::RemoteEntry>& files,
                                            std::map<std::string, std::string>& texts, bool last) {
  std::vector<storage::DownloadRequest> requests;
  std::vector<sys::UniqueFd> fds;
  for (const auto& file : files) {
    if (auto copy = read_copy(file)) {
      texts.insert_or_assign(file.path, std::move(*copy));
      continue;
    }
    fds.emplace_back(memfd_create("neuron-cache-index", MFD_CLOEXEC));
    if (!fds.back()) throw operational_error("cannot create a memory file for an index file");
    requests.push_back({file.path, fds.back().get(), file});
  }
  std::vector<std::string> failed;
  if (requests.empty()) return failed;
  std::vector<storage::DownloadResult> results = store_->download(revision(), requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const storage::RemoteEntry& file = requests[i].expected;
    if (!results[i].ok) {
      failed.push_back(file.path);
      if (!last) continue;
      incomplete_ = "the index file " + repo_ + "/" + file.path + " could not be fetched intact (" +
                    results[i].error + ")";
      problems_.push_back(incomplete_ + ": its configurations count as not cached");
      continue;
    }
    std::string text = sys::read_whole_fd(fds[i].get());
    keep_copy(file, text);
    texts.insert_or_assign(file.path, std::move(text));
  }
  return failed;
}

void RemoteIndex::add(const ai::IndexFile& file) {
  for (const auto& problem : file.problems)
    problems_.push_back("skipped an index entry: " + problem);
  for (const auto& [key, entry] : file.entries) {
    entries_[entry.inputs.compiler_version].emplace(key, entry);
  }
}

const std::vector<std::string>& RemoteIndex::compiler_versions() {
  if (versions_) return *versions_;
  std::set<std::string> versions;
  // A failed listing lists nothing for this run (versions_ lives only as long as the run).
  auto listing = store_->list_or_failure(std::string(ai::kRemoteDir), false, revision());
  for (const auto& item : listing.or_miss()) {
    std::string name = item.path.substr(item.path.rfind('/') + 1);
    if (!item.is_directory && name.ends_with(".json")) name.resize(name.size() - 5);
    if (auto version = layout::compiler_version_of(name)) versions.insert(*version);
  }
  versions_.emplace(versions.begin(), versions.end());
  return *versions_;
}

const ai::Entry* RemoteIndex::find(const std::string& compiler_version,
                                   const std::string& key) const {
  auto version = entries_.find(compiler_version);
  if (version == entries_.end()) return nullptr;
  auto it = version->second.find(key);
  return it == version->second.end() ? nullptr : &it->second;
}

std::vector<const ai::Entry*> RemoteIndex::entries_of(const cache_key::KeyInputs& inputs) const {
  std::vector<const ai::Entry*> out;
  for (const auto& [version, entries] : entries_) {
    for (const auto& [key, entry] : entries) {
      if (cache_key::same_owner(entry.inputs, inputs)) out.push_back(&entry);
    }
  }
  return out;
}

std::optional<std::string> RemoteIndex::read_copy(const storage::RemoteEntry& file) const {
  if (copies_.empty() || file.content_id().empty()) return std::nullopt;
  std::optional<std::string> text;
  try {
    text = copies_.child(file.path + "/" + file.content_id() + ".json").read(kMaxIndexFileBytes);
  } catch (const Error&) {
    return std::nullopt;  // a name no copy can have
  }
  if (!text || !store_->content_matches(file, *text)) return std::nullopt;  // fetch it again
  return text;
}

void RemoteIndex::keep_copy(const storage::RemoteEntry& file, const std::string& text) const {
  if (copies_.empty() || file.content_id().empty() || !store_->content_matches(file, text)) return;
  try {
    sys::RootedFile dir = copies_.child(file.path);
    dir.remove();  // older copies of this file are outdated
    dir.child(file.content_id() + ".json").replace(text);
  } catch (const std::exception&) {
    // A copy only saves a download next time.
  }
}

}  // namespace neuron_cache::remote
