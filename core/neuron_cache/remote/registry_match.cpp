#include "neuron_cache/remote/registry_match.h"

#include <cstdio>
#include <map>

#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/transformers/arch_digest.h"

namespace neuron_cache::remote {
namespace {

std::string read_all(std::FILE* file) {
  std::string text;
  std::rewind(file);
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  return text;
}

// The first file of each digest folder no model's digests name, by folder digest.
std::map<std::string, storage::RemoteEntry> folder_samples(
    const std::vector<storage::RemoteEntry>& listing, const std::string& compiler_dir,
    const ScanModels& models) {
  std::set<std::string> known;
  for (const auto& [id, by_task] : models) {
    for (const auto& [task, architecture] : by_task) {
      known.insert(architecture.digests.begin(), architecture.digests.end());
    }
  }
  const std::string prefix = compiler_dir + "/" + std::string(layout::kRegistryDir) + "/";
  std::map<std::string, storage::RemoteEntry> samples;
  for (const auto& entry : listing) {
    if (entry.is_directory || !entry.path.starts_with(prefix)) continue;
    auto where = registry::locate(entry.path.substr(prefix.size()));
    if (!where || where->shape != registry::PathShape::ByArch || known.count(where->arch_digest)) {
      continue;
    }
    auto [it, added] = samples.emplace(where->arch_digest, entry);
    if (!added && entry.path < it->second.path) it->second = entry;
  }
  return samples;
}

bool wants_comparison(const ScanModels& models) {
  for (const auto& [id, by_task] : models) {
    for (const auto& [task, architecture] : by_task) {
      if (architecture.config_json) return true;
    }
  }
  return false;
}

void compare_sample(const std::string& digest, const registry::Record& record, ScanModels& models,
                    RegistryScan& scan) {
  for (auto& [id, by_task] : models) {
    for (auto& [task, architecture] : by_task) {
      if (!architecture.config_json || record.task.value_or("") != task) continue;
      if (!transformers::stored_config_matches(*architecture.config_json, record.config, task)) {
        continue;
      }
      architecture.digests.insert(digest);
      scan.matched_by_config[id][task].insert(digest);
    }
  }
}

}  // namespace

std::vector<std::optional<std::string>> download_texts(
    storage::Store& store, const std::string& revision,
    const std::vector<storage::RemoteEntry>& files, std::vector<std::string>& errors) {
  constexpr size_t kBatch = 256;  // open temporary files at once
  std::vector<std::optional<std::string>> texts(files.size());
  errors.assign(files.size(), "");
  for (size_t start = 0; start < files.size(); start += kBatch) {
    size_t end = std::min(files.size(), start + kBatch);
    std::vector<std::FILE*> temps;
    std::vector<storage::DownloadRequest> requests;
    for (size_t i = start; i < end; ++i) {
      std::FILE* temp = std::tmpfile();
      if (temp == nullptr) {
        for (std::FILE* open : temps) std::fclose(open);
        throw operational_error("cannot create a temporary file for a registry entry: is " +
                                std::string(P_tmpdir) + " writable and not full?");
      }
      temps.push_back(temp);
      requests.push_back({files[i].path, fileno(temp), files[i]});
    }
    std::vector<storage::DownloadResult> downloads = store.download(revision, requests);
    for (size_t i = start; i < end; ++i) {
      std::string text = read_all(temps[i - start]);
      std::fclose(temps[i - start]);
      if (downloads[i - start].ok) {
        texts[i] = std::move(text);
      } else {
        errors[i] = downloads[i - start].error;
      }
    }
  }
  return texts;
}

void match_stored_configs(storage::Store& store, const std::string& revision,
                          const std::vector<storage::RemoteEntry>& listing,
                          const std::string& compiler_dir, ScanModels& models, RegistryScan& scan) {
  if (!wants_comparison(models)) return;
  std::map<std::string, storage::RemoteEntry> samples =
      folder_samples(listing, compiler_dir, models);
  std::vector<std::string> digests;
  std::vector<storage::RemoteEntry> files;
  for (const auto& [digest, entry] : samples) {
    if (scan.compared_folders + files.size() >= kMaxComparedFolders) {
      scan.problems.push_back(compiler_dir + ": more than " + std::to_string(kMaxComparedFolders) +
                              " digest folders: the rest were not compared with the model's "
                              "config.json");
      break;
    }
    digests.push_back(digest);
    files.push_back(entry);
  }
  std::vector<std::string> errors;
  std::vector<std::optional<std::string>> texts = download_texts(store, revision, files, errors);
  scan.compared_folders += files.size();
  const std::string prefix = compiler_dir + "/" + std::string(layout::kRegistryDir) + "/";
  for (size_t i = 0; i < files.size(); ++i) {
    if (!texts[i]) {
      scan.complete = false;
      scan.problems.push_back(files[i].path + ": " + errors[i]);
      continue;
    }
    try {
      auto where = registry::locate(files[i].path.substr(prefix.size()));
      compare_sample(digests[i], registry::read_record(*where, *texts[i]), models, scan);
    } catch (const Error& error) {
      scan.problems.push_back(files[i].path + ": " + error.what());
    }
  }
}

TaskArchitecture architecture_of(const registry::Json& config_json, const std::string& task) {
  TaskArchitecture architecture;
  std::string unknown_type;
  std::string why_not;
  for (const auto& answer : transformers::arch_digests(config_json, task)) {
    if (answer.digest) {
      architecture.digests.insert(*answer.digest);
    } else if (answer.unknown_model_type) {
      unknown_type = answer.model_type;
    } else if (why_not.empty()) {
      why_not = answer.why_not;
    }
  }
  if (!architecture.digests.empty()) return architecture;
  if (!unknown_type.empty()) {
    architecture.config_json = config_json;
    architecture.note = "model type \"" + unknown_type +
                        "\" is not in neuron-cache's transformers tables, so its architecture "
                        "digest cannot be computed: its digest folders are found by comparing its "
                        "config.json with the configs the registry's entries store";
  } else {
    architecture.note = "its architecture digest cannot be computed (" + why_not +
                        "): only entries named after the model are found";
  }
  return architecture;
}

}  // namespace neuron_cache::remote
