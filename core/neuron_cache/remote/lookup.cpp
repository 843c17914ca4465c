#include "neuron_cache/remote/lookup.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <tuple>

#include "neuron_cache/format/cache_key.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/manifest/manifest.h"
#include "neuron_cache/remote/registry_match.h"

namespace neuron_cache::remote {
namespace {

using registry::Json;

std::string text_of(const Json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// The first of `keys` present (and not null) in `neuron`, or null.
Json first_value(const Json& neuron, std::initializer_list<const char*> keys) {
  if (!neuron.is_object()) return Json();
  for (const char* key : keys) {
    auto it = neuron.find(key);
    if (it != neuron.end() && !it->is_null()) return *it;
  }
  return Json();
}

std::string first_of(const Json& neuron, std::initializer_list<const char*> keys) {
  return text_of(first_value(neuron, keys));
}

bool is_integer_text(const std::string& text) {
  size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == start || text.size() - start > 18) return false;
  return std::all_of(text.begin() + static_cast<long>(start), text.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Legacy entries stored some numbers as text ("4"): shown as the number they mean.
Json as_number_if_numeric(const Json& value) {
  if (value.is_string() && is_integer_text(value.get<std::string>())) {
    return Json(std::stoll(value.get<std::string>()));
  }
  return value;
}

Json number_of(const Json& neuron, std::initializer_list<const char*> keys) {
  return as_number_if_numeric(first_value(neuron, keys));
}

LookupRow row_of(const registry::Record& record, const std::string& compiler_dir,
                 const std::string& path) {
  const Json& n = record.neuron;
  LookupRow row;
  row.task = record.task.value_or(first_of(n, {"task"}));
  row.batch_size = number_of(n, {"batch_size", "static_batch_size"});
  row.sequence_length = number_of(n, {"sequence_length", "static_sequence_length"});
  row.tensor_parallel = number_of(n, {"tp_degree", "tensor_parallel_size", "num_cores"});
  row.dtype =
      canonical_dtype(first_of(n, {"torch_dtype", "dtype", "auto_cast_type", "float_dtype"}));
  row.instance_type = first_of(n, {"target", "instance_type"});
  row.compiler_version = first_of(n, {"neuronxcc_version", "compiler_version"});
  if (row.compiler_version.empty()) {
    row.compiler_version = layout::compiler_version_of(compiler_dir).value_or("");
  }
  row.optimum_version = record.location.optimum_version;
  // Only 0.0.19-0.1.x wrote a mode folder; training runs write no entry since 0.2.0.
  row.mode = record.location.mode.empty() ? "inference" : record.location.mode;
  row.checkpoint_revision = first_of(n, {"checkpoint_revision"});
  row.path = path;
  return row;
}

// Numbers first in numeric order, then text, then missing values.
std::tuple<int, double, std::string> number_key(const Json& value) {
  if (value.is_number()) return {0, value.get<double>(), ""};
  if (value.is_null()) return {2, 0, ""};
  return {1, 0, text_of(value)};
}

// "0.0.20" < "0.1.0" < "0.4.6.dev4" < "0.10.0": digit runs compare as numbers.
std::vector<std::pair<long, std::string>> version_key(const std::string& version) {
  std::vector<std::pair<long, std::string>> parts;
  for (size_t i = 0; i < version.size();) {
    size_t j = i;
    bool digits = std::isdigit(static_cast<unsigned char>(version[i])) != 0;
    while (j < version.size() &&
           (std::isdigit(static_cast<unsigned char>(version[j])) != 0) == digits && j - i < 18) {
      ++j;
    }
    std::string part = version.substr(i, j - i);
    parts.emplace_back(digits ? std::stol(part) : -1, digits ? "" : part);
    i = j;
  }
  return parts;
}

// A registry file that may hold an entry of a requested model.
struct Candidate {
  std::string compiler_dir;
  storage::RemoteEntry entry;
  registry::Location where;
};

// Hub repo ids are unique whatever their case, and the Hub resolves any case to the repo:
// "meta-llama/meta-llama-3-8b" is meta-llama/Meta-Llama-3-8B, whose entries and aliases name it
// in its own case.
bool same_repo(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The requested models by their lowercase id.
std::map<std::string, std::string> by_lowercase(const ScanModels& models) {
  std::map<std::string, std::string> out;
  for (const auto& [id, by_task] : models) out.emplace(lowercase(id), id);
  return out;
}

// What makes one entry: an alias and its primary file share it, the same bytes under two
// optimum-neuron versions (or modes) do not.
using EntryKey = std::tuple<std::string, std::string, std::string>;

// By model id: the digest folders that hold one of the model's own aliased entries.
using LinkedFolders = std::map<std::string, std::set<std::string>>;

EntryKey key_of(const registry::Location& where) {
  return {where.optimum_version, where.mode, where.hash};
}

// Every architecture digest the models may have, whatever the task.
std::set<std::string> digests_of(const ScanModels& models) {
  std::set<std::string> digests;
  for (const auto& [id, by_task] : models) {
    for (const auto& [task, architecture] : by_task) {
      digests.insert(architecture.digests.begin(), architecture.digests.end());
    }
  }
  return digests;
}

bool holds(const std::map<std::string, TaskArchitecture>& by_task, const std::string& digest) {
  return std::any_of(by_task.begin(), by_task.end(),
                     [&](const auto& item) { return item.second.digests.count(digest) > 0; });
}

// Registry files that may belong to `models`: alias paths and older generations name their
// model; a digest folder holding an alias's hash holds that model's other entries (optimum-neuron
// writes an alias only for a model's first entry), and a model's own digest folders hold its
// entries whatever the aliases say. Those folders also hold other models of the same
// architecture: the file content tells them apart once downloaded.
std::vector<Candidate> candidate_files(const std::vector<storage::RemoteEntry>& listing,
                                       const std::string& compiler_dir, const ScanModels& models,
                                       LinkedFolders& linked) {
  const std::string prefix = compiler_dir + "/" + std::string(layout::kRegistryDir) + "/";
  const std::set<std::string> digests = digests_of(models);
  std::map<EntryKey, Candidate> chosen;
  std::map<EntryKey, std::string> named;  // the model each named file is of
  std::map<std::pair<std::string, std::string>, std::vector<Candidate>> arch_folders;
  const std::map<std::string, std::string> requested = by_lowercase(models);
  for (const auto& entry : listing) {
    if (entry.is_directory || !entry.path.starts_with(prefix)) continue;
    auto where = registry::locate(entry.path.substr(prefix.size()));
    if (!where) continue;
    Candidate candidate{compiler_dir, entry, *where};
    if (where->shape == registry::PathShape::ByArch) {
      arch_folders[{where->optimum_version, where->arch_digest}].push_back(candidate);
    } else if (auto model = requested.find(lowercase(where->model_id)); model != requested.end()) {
      named.emplace(key_of(*where), model->second);
      chosen.emplace(key_of(*where), candidate);
    }
  }
  for (const auto& [folder, files] : arch_folders) {
    bool related = digests.count(folder.second) > 0;
    for (const auto& file : files) {
      auto alias = named.find(key_of(file.where));
      if (alias == named.end()) continue;
      related = true;
      linked[alias->second].insert(folder.second);
    }
    if (!related) continue;
    for (const auto& file : files) chosen.insert_or_assign(key_of(file.where), file);  // primary
  }
  std::vector<Candidate> files;
  for (auto& [key, candidate] : chosen) files.push_back(std::move(candidate));
  return files;
}

// Encoders and diffusion models are traced: their neuron config has static_* input shapes, or
// the entry holds several models.
bool is_traced(const registry::Record& record) {
  if (record.entry_class == registry::kMultiModel) return true;
  if (!record.neuron.is_object()) return false;
  return std::any_of(record.neuron.items().begin(), record.neuron.items().end(),
                     [](const auto& item) { return item.key().starts_with("static_"); });
}

// How an entry relates to `model_id`, or nothing when it is not the model's: its own entry
// (_model_id, or the checkpoint it was built from), or another model's in one of its digest
// folders. A model whose config.json was not read has the folders its aliases link instead.
std::optional<RegistryHit> hit_for(const std::string& model_id,
                                   const std::map<std::string, TaskArchitecture>& by_task,
                                   const std::set<std::string>& linked,
                                   const registry::Record& record) {
  const registry::Location& where = record.location;
  bool own = same_repo(record.model_id, model_id) ||
             same_repo(first_of(record.neuron, {"checkpoint_id"}), model_id);
  bool by_arch = where.shape == registry::PathShape::ByArch;
  auto task = by_task.find(record.task.value_or(""));
  bool same_folder =
      by_arch && task != by_task.end() && task->second.digests.count(where.arch_digest) > 0;
  bool in_digest_folder = by_arch && (by_task.empty() ? linked.count(where.arch_digest) > 0
                                                      : holds(by_task, where.arch_digest));
  if (!own && !in_digest_folder) return std::nullopt;
  RegistryHit hit;
  hit.record = record;
  hit.traced = is_traced(record);
  if (same_folder || (in_digest_folder && !own)) {
    hit.architecture = Architecture::Same;
  } else if (by_arch && task != by_task.end()) {
    hit.architecture = Architecture::Other;
  }
  if (!own) hit.same_architecture_as = record.model_id;
  return hit;
}

void add_hits(const Candidate& file, const std::string& text, const ScanModels& models,
              const LinkedFolders& linked, RegistryScan& scan) {
  registry::Record record = registry::read_record(file.where, text);
  static const std::set<std::string> kNone;
  for (const auto& [id, by_task] : models) {
    auto folders = linked.find(id);
    std::optional<RegistryHit> hit =
        hit_for(id, by_task, folders == linked.end() ? kNone : folders->second, record);
    if (!hit) continue;
    hit->row = row_of(record, file.compiler_dir, file.entry.path);
    hit->row.same_architecture_as = hit->same_architecture_as;
    hit->compiler_dir = file.compiler_dir;
    hit->optimum_version = file.where.optimum_version;
    hit->path = file.entry.path;
    scan.hits[id].push_back(std::move(*hit));
  }
}

// Downloads the candidate files (in parallel, verified against the listing) and reads them.
void read_candidates(storage::Store& store, const std::string& revision,
                     const std::vector<Candidate>& files, const ScanModels& models,
                     const LinkedFolders& linked, RegistryScan& scan) {
  std::vector<storage::RemoteEntry> entries;
  for (const auto& file : files) entries.push_back(file.entry);
  std::vector<std::string> errors;
  std::vector<std::optional<std::string>> texts = download_texts(store, revision, entries, errors);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!texts[i]) {
      scan.complete = false;
      scan.problems.push_back(files[i].entry.path + ": " + errors[i]);
      continue;
    }
    try {
      add_hits(files[i], *texts[i], models, linked, scan);
    } catch (const Error& error) {
      scan.problems.push_back(files[i].entry.path + ": " + error.what());
    }
  }
}

}  // namespace

std::string canonical_dtype(const std::string& dtype) {
  static const std::map<std::string, std::string> kNames = {
      {"bf16", "bfloat16"},         {"fp16", "float16"},         {"fp32", "float32"},
      {"float", "float32"},         {"half", "float16"},         {"torch.bfloat16", "bfloat16"},
      {"torch.float16", "float16"}, {"torch.float32", "float32"}};
  auto it = kNames.find(dtype);
  return it == kNames.end() ? dtype : it->second;
}

bool LookupRow::operator<(const LookupRow& o) const {
  auto key = [](const LookupRow& r) {
    return std::make_tuple(
        number_key(r.tensor_parallel), number_key(r.batch_size), number_key(r.sequence_length),
        r.dtype, r.instance_type, r.compiler_version, r.task, r.checkpoint_revision,
        version_key(r.optimum_version), r.optimum_version, r.mode, r.same_architecture_as);
  };
  return key(*this) < key(o);
}

bool LookupRow::operator==(const LookupRow& o) const {
  return !(*this < o) && !(o < *this);
}

bool mode_matches(const LookupRow& row, const std::string& mode) {
  return mode == "all" || row.mode == mode;
}

bool matches(const LookupRow& row, const LookupQuery& q) {
  if (!mode_matches(row, q.mode)) return false;
  auto same = [](const Json& have, const std::optional<long>& want) {
    return !want || (have.is_number_integer() && have.get<long>() == *want);
  };
  if (q.optimum_version && row.optimum_version != *q.optimum_version) return false;
  if (q.task && row.task != *q.task) return false;
  if (q.instance_type && row.instance_type != *q.instance_type) return false;
  if (q.dtype && row.dtype != canonical_dtype(*q.dtype)) return false;
  return same(row.batch_size, q.batch_size) && same(row.sequence_length, q.sequence_length) &&
         same(row.tensor_parallel, q.tensor_parallel_size);
}

RegistryScan scan_registry(storage::Store& store, const std::string& compiler_version,
                           const ScanModels& models, const std::string& revision) {
  RegistryScan scan;
  for (const auto& [id, by_task] : models) scan.hits[id];
  auto counted_listing = [&](const std::string& path, bool recursive) {
    uint64_t before = store.requests();
    auto listing = store.list_or_failure(path, recursive, revision);
    scan.listing_requests += store.requests() - before;
    scan.complete = scan.complete && !listing.failed();
    return listing.or_miss();
  };
  for (const auto& entry : counted_listing("", false)) {
    bool wanted =
        entry.is_directory && entry.path.starts_with(layout::kCompilerDirPrefix) &&
        (compiler_version.empty() || layout::is_current_compiler_dir(entry.path, compiler_version));
    if (wanted) scan.compiler_dirs.push_back(entry.path);
  }
  std::vector<Candidate> files;
  ScanModels known = models;  // plus the folders found by comparing stored configs
  LinkedFolders linked;
  for (const auto& dir : scan.compiler_dirs) {
    auto listing = counted_listing(dir + "/" + std::string(layout::kRegistryDir), true);
    scan.has_registry = scan.has_registry || !listing.empty();
    if (models.empty()) continue;
    match_stored_configs(store, revision, listing, dir, known, scan);
    auto found = candidate_files(listing, dir, known, linked);
    files.insert(files.end(), found.begin(), found.end());
  }
  read_candidates(store, revision, files, known, linked, scan);
  for (auto& [id, hits] : scan.hits) {
    std::stable_sort(hits.begin(), hits.end(),
                     [](const RegistryHit& a, const RegistryHit& b) { return a.row < b.row; });
  }
  return scan;
}

const std::vector<std::string>& known_tasks() {
  // optimum-neuron's exporters (TasksManager tasks with a Neuron config).
  static const std::vector<std::string> kTasks = {"text-generation",
                                                  "feature-extraction",
                                                  "fill-mask",
                                                  "text-classification",
                                                  "token-classification",
                                                  "question-answering",
                                                  "multiple-choice",
                                                  "sentence-similarity",
                                                  "image-classification",
                                                  "object-detection",
                                                  "semantic-segmentation",
                                                  "audio-classification",
                                                  "audio-frame-classification",
                                                  "audio-xvector",
                                                  "automatic-speech-recognition",
                                                  "text2text-generation",
                                                  "image-text-to-text",
                                                  "zero-shot-image-classification",
                                                  "depth-estimation",
                                                  "image-segmentation"};
  return kTasks;
}

namespace {

// The target optimum-neuron stores for an instance type (cache_key holds the rule); a type it
// does not know is compared as given.
std::string normalised_instance(const std::string& instance_type) {
  return manifest::is_known_instance_type(instance_type) ? cache_key::target_of(instance_type)
                                                         : instance_type;
}

}  // namespace

LookupResult lookup(storage::Store& store, const LookupQuery& query) {
  RegistryScan scan =
      scan_registry(store, query.compiler_version, {{query.model_id, query.architectures}});
  LookupResult result;
  result.compiler_dirs = std::move(scan.compiler_dirs);
  result.problems = std::move(scan.problems);
  result.listing_requests = scan.listing_requests;
  result.has_registry = scan.has_registry;
  LookupQuery any_mode = query;
  any_mode.mode = "all";
  LookupQuery normalised = query;
  if (query.instance_type) normalised.instance_type = normalised_instance(*query.instance_type);
  for (const auto& hit : scan.hits[query.model_id]) {
    if (hit.architecture == Architecture::Other) {
      result.other_architecture_rows += matches(hit.row, any_mode) ? 1 : 0;
    } else if (matches(hit.row, query)) {
      result.rows.push_back(hit.row);
    } else if (matches(hit.row, any_mode)) {
      ++result.other_mode_rows;
    } else if (matches(hit.row, normalised)) {
      ++result.normalised_instance_rows;
    }
  }
  std::sort(result.rows.begin(), result.rows.end());
  result.rows.erase(std::unique(result.rows.begin(), result.rows.end()), result.rows.end());
  result.same_architecture_rows = static_cast<size_t>(
      std::count_if(result.rows.begin(), result.rows.end(),
                    [](const LookupRow& row) { return !row.same_architecture_as.empty(); }));
  return result;
}

}  // namespace neuron_cache::remote
