#include "remote/lookup.h"

#include <cstdio>
#include <map>
#include <set>

#include "format/layout.h"
#include "format/registry.h"

namespace neuron_cache::remote {
namespace {

using registry::Json;

std::string scalar(const Json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// The first of `keys` present in `neuron`, as text.
std::string first_of(const Json& neuron, std::initializer_list<const char*> keys) {
  if (!neuron.is_object()) return "";
  for (const char* key : keys) {
    if (neuron.contains(key) && !neuron[key].is_null()) return scalar(neuron[key]);
  }
  return "";
}

LookupRow row_of(const registry::Record& record, const std::string& compiler_dir,
                 const std::string& path) {
  const Json& n = record.neuron;
  LookupRow row;
  row.task = record.task.value_or(first_of(n, {"task"}));
  row.batch_size = first_of(n, {"batch_size", "static_batch_size"});
  row.sequence_length = first_of(n, {"sequence_length", "static_sequence_length"});
  row.tensor_parallel = first_of(n, {"tp_degree", "tensor_parallel_size", "num_cores"});
  row.dtype =
      canonical_dtype(first_of(n, {"torch_dtype", "dtype", "auto_cast_type", "float_dtype"}));
  row.instance_type = first_of(n, {"target", "instance_type"});
  row.compiler_version = first_of(n, {"neuronxcc_version", "compiler_version"});
  if (row.compiler_version.empty()) {
    row.compiler_version = layout::compiler_version_of(compiler_dir).value_or("");
  }
  row.optimum_version = record.location.optimum_version;
  row.checkpoint_revision = first_of(n, {"checkpoint_revision"});
  row.path = path;
  return row;
}

bool matches(const LookupRow& row, const LookupQuery& q) {
  auto same = [](const std::string& have, const std::optional<long>& want) {
    return !want || have == std::to_string(*want);
  };
  if (q.task && row.task != *q.task) return false;
  if (q.instance_type && row.instance_type != *q.instance_type) return false;
  if (q.dtype && row.dtype != canonical_dtype(*q.dtype)) return false;
  return same(row.batch_size, q.batch_size) && same(row.sequence_length, q.sequence_length) &&
         same(row.tensor_parallel, q.tensor_parallel_size);
}

long as_number(const std::string& text) {
  try {
    return std::stol(text);
  } catch (const std::exception&) {
    return -1;
  }
}

// Registry files that may belong to `model_id`: its alias paths and older generations name it,
// and the arch-digest folders holding an alias's hash hold its other entries (optimum-neuron
// writes an alias only for a model's first entry).
std::vector<std::string> candidate_files(const std::vector<hub::RemoteEntry>& listing,
                                         const std::string& registry_prefix,
                                         const std::string& model_id) {
  std::set<std::string> hashes;
  std::map<std::string, std::string> by_hash;  // one file per hash: alias and primary are equal
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> arch_files;
  for (const auto& entry : listing) {
    if (entry.is_directory || !entry.path.starts_with(registry_prefix)) continue;
    auto where = registry::locate(entry.path.substr(registry_prefix.size()));
    if (!where) continue;
    if (where->shape == registry::PathShape::ByArch) {
      arch_files[where->arch_digest].emplace_back(where->hash, entry.path);
    } else if (where->model_id == model_id) {
      hashes.insert(where->hash);
      by_hash.emplace(where->hash, entry.path);
    }
  }
  for (const auto& [digest, files] : arch_files) {
    bool related = false;
    for (const auto& file : files) related = related || hashes.count(file.first) > 0;
    if (!related) continue;
    for (const auto& [hash, path] : files) by_hash[hash] = path;
  }
  std::vector<std::string> paths;
  for (const auto& [hash, path] : by_hash) paths.push_back(path);
  return paths;
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
    return std::make_tuple(as_number(r.tensor_parallel), as_number(r.batch_size),
                           as_number(r.sequence_length), r.dtype, r.instance_type,
                           r.compiler_version, r.task, r.checkpoint_revision, r.optimum_version);
  };
  return key(*this) < key(o);
}

bool LookupRow::operator==(const LookupRow& o) const {
  return !(*this < o) && !(o < *this);
}

namespace {

// Downloads the candidate files into anonymous temporary files and reads them.
void read_candidates(hub::HubClient& client, const std::string& repo,
                     const std::vector<hub::RemoteEntry>& listing,
                     const std::vector<std::string>& paths, const std::string& compiler_dir,
                     const LookupQuery& query, LookupResult& result) {
  std::map<std::string, hub::RemoteEntry> by_path;
  for (const auto& entry : listing) by_path[entry.path] = entry;
  std::vector<std::FILE*> files;
  std::vector<hub::DownloadRequest> requests;
  for (const auto& path : paths) {
    std::FILE* file = std::tmpfile();
    if (file == nullptr) throw operational_error("cannot create a temporary file");
    files.push_back(file);
    requests.push_back({path, fileno(file), by_path[path]});
  }
  std::vector<hub::DownloadResult> downloads = client.download(repo, "main", requests);
  const std::string prefix = compiler_dir + "/" + std::string(layout::kRegistryDir) + "/";
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string text;
    std::rewind(files[i]);
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, files[i])) > 0;)
      text.append(buffer, n);
    std::fclose(files[i]);
    if (!downloads[i].ok) {
      result.problems.push_back(paths[i] + ": " + downloads[i].error);
      continue;
    }
    try {
      auto where = registry::locate(paths[i].substr(prefix.size()));
      registry::Record record = registry::read_record(*where, text);
      if (record.model_id != query.model_id &&
          first_of(record.neuron, {"checkpoint_id"}) != query.model_id) {
        continue;  // same architecture, another model
      }
      LookupRow row = row_of(record, compiler_dir, paths[i]);
      if (matches(row, query)) result.rows.push_back(row);
    } catch (const Error& error) {
      result.problems.push_back(paths[i] + ": " + error.what());
    }
  }
}

}  // namespace

LookupResult lookup(hub::HubClient& client, const std::string& repo, const LookupQuery& query) {
  LookupResult result;
  auto counted_listing = [&](const std::string& path, bool recursive) {
    uint64_t before = client.http().stats().requests;
    auto listing = client.list_tree(repo, path, recursive);
    result.listing_requests += client.http().stats().requests - before;
    return listing;
  };
  for (const auto& entry : counted_listing("", false)) {
    bool wanted = entry.is_directory && entry.path.starts_with(layout::kCompilerDirPrefix) &&
                  (query.compiler_version.empty() ||
                   layout::is_current_compiler_dir(entry.path, query.compiler_version));
    if (wanted) result.compiler_dirs.push_back(entry.path);
  }
  for (const auto& dir : result.compiler_dirs) {
    std::string registry_dir = dir + "/" + std::string(layout::kRegistryDir);
    std::vector<hub::RemoteEntry> listing = counted_listing(registry_dir, true);
    std::vector<std::string> paths = candidate_files(listing, registry_dir + "/", query.model_id);
    if (!paths.empty()) read_candidates(client, repo, listing, paths, dir, query, result);
  }
  std::sort(result.rows.begin(), result.rows.end());
  result.rows.erase(std::unique(result.rows.begin(), result.rows.end()), result.rows.end());
  return result;
}

}  // namespace neuron_cache::remote
