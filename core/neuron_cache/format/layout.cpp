#include "neuron_cache/format/layout.h"

namespace neuron_cache::layout {

std::string compiler_dir_name(std::string_view compiler_version) {
  return std::string(kCompilerDirPrefix) + std::string(compiler_version);
}

std::optional<std::string> compiler_version_of(std::string_view dir_name) {
  if (!dir_name.starts_with(kCompilerDirPrefix)) return std::nullopt;
  return std::string(dir_name.substr(kCompilerDirPrefix.size()));
}

std::optional<std::string> compiler_version_below(std::string_view path, std::string_view dir) {
  if (path.size() <= dir.size() + 1 || !path.starts_with(dir) || path[dir.size()] != '/')
    return std::nullopt;
  std::string_view rest = path.substr(dir.size() + 1);
  size_t slash = rest.find('/');
  std::string_view first = rest.substr(0, slash);
  if (slash == std::string_view::npos) {
    if (!first.ends_with(".json")) return std::nullopt;
    first.remove_suffix(5);
  }
  return compiler_version_of(first);
}

bool is_current_compiler_dir(std::string_view dir_name, std::string_view installed_version) {
  return !installed_version.empty() && dir_name.starts_with(compiler_dir_name(installed_version));
}

std::vector<std::string> full_versions_of(std::string_view short_version,
                                          const std::vector<std::string>& dir_names) {
  std::vector<std::string> full;
  if (short_version.empty() || short_version.find('+') != std::string_view::npos) return full;
  const std::string exact = compiler_dir_name(short_version);
  for (const auto& name : dir_names) {
    if (name == exact) return {};
    if (name.starts_with(exact + "+")) full.push_back(name.substr(kCompilerDirPrefix.size()));
  }
  return full;
}

std::string ModuleName::dir_name() const {
  std::string name = std::string(kModulePrefix) + graph_key;
  if (!flags_key.empty()) name += "+" + flags_key;
  return name;
}

std::optional<ModuleName> parse_module_name(std::string_view dir_name) {
  if (!dir_name.starts_with(kModulePrefix)) return std::nullopt;
  std::string_view rest = dir_name.substr(kModulePrefix.size());
  ModuleName name;
  size_t plus = rest.rfind('+');
  if (plus == std::string_view::npos) {
    name.graph_key = rest;
  } else {
    name.graph_key = rest.substr(0, plus);
    name.flags_key = rest.substr(plus + 1);
  }
  return name;
}

bool is_traced_module_name(std::string_view dir_name) {
  if (!dir_name.starts_with(kModulePrefix)) return false;
  std::string_view hash = dir_name.substr(kModulePrefix.size());
  return hash.size() == kEntryHashLength &&
         hash.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<std::string> traced_entry_hash(std::string_view dir_name) {
  if (!is_traced_module_name(dir_name)) return std::nullopt;
  return std::string(dir_name.substr(kModulePrefix.size()));
}

bool is_lock_file(std::string_view file_name) {
  return file_name.ends_with(".lock");
}

bool is_temporary_file(std::string_view file_name) {
  return file_name.starts_with('.') || file_name.ends_with(".tmp");
}

bool is_completion_mark(std::string_view path) {
  size_t slash = path.rfind('/');
  return path.substr(slash == std::string_view::npos ? 0 : slash + 1) == kDone;
}

void note_traced_file(EntryFiles& files, std::string_view relative_path) {
  size_t slash = relative_path.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? relative_path : relative_path.substr(slash + 1);
  bool top = slash == std::string_view::npos;
  if (top && (base == kTracedConfig || base == kTracedModelIndex)) files.has_traced_config = true;
  // "model.neuron" and its kind; a bare ".neuron" is no compiled model.
  if (base.size() > kNeuronSuffix.size() && base.ends_with(kNeuronSuffix)) ++files.neuron_files;
}

EntryState classify(const EntryFiles& files) {
  if (files.has_neff && files.has_done) return EntryState::Success;
  if (files.has_log && !files.has_neff) return EntryState::Failed;
  if (!files.lock_files.empty()) return EntryState::Locked;
  if (files.traced_name && files.has_traced_config && files.neuron_files > 0) {
    return EntryState::Traced;
  }
  return EntryState::Empty;
}

EntryState classify_listed(std::string_view module_name, const std::vector<std::string>& paths) {
  EntryFiles files;
  files.traced_name = is_traced_module_name(module_name);
  for (const auto& path : paths) {
    if (is_lock_file(path.substr(path.rfind('/') + 1))) files.lock_files.push_back(path);
    if (files.traced_name) note_traced_file(files, path);
    files.has_neff = files.has_neff || path == kNeff;
    files.has_done = files.has_done || path == kDone;
    files.has_log = files.has_log || path == kLog;
  }
  return classify(files);
}

bool is_complete(EntryState state) {
  return state == EntryState::Success || state == EntryState::Traced;
}

std::string_view state_name(EntryState state) {
  switch (state) {
    case EntryState::Success:
      return "success";
    case EntryState::Failed:
      return "failed";
    case EntryState::Locked:
      return "locked";
    case EntryState::Empty:
      return "empty";
    case EntryState::Traced:
      return "traced";
  }
  return "empty";
}

std::string explain(EntryState state, const EntryFiles& files) {
  switch (state) {
    case EntryState::Success:
      return "model.neff and model.done are present: the compiled graph is usable";
    case EntryState::Failed:
      return "model.log is present without model.neff: a cached compiler failure; libneuronxla "
             "will not recompile it until the entry is removed (neuron-cache cleanup)";
    case EntryState::Locked: {
      std::string names;
      for (const auto& lock : files.lock_files) names += (names.empty() ? "" : ", ") + lock;
      return "lock file " + names +
             " is present: a compilation is running, or one was killed "
             "(a stale lock; neuron-cache cleanup removes it when no neuronx-cc runs)";
    }
    case EntryState::Empty:
      if (files.has_neff) return "model.neff is present but model.done is missing: incomplete";
      if (files.traced_name) {
        return "a traced export folder without config.json (or model_index.json) and a *.neuron "
               "file: incomplete";
      }
      return "no model.neff with model.done, no model.log and no lock: an incomplete entry";
    case EntryState::Traced:
      return "a traced export (config and *.neuron files, no model.neff): usable as it is; "
             "optimum-neuron counts it as EMPTY and its `cache cleanup --all` would delete it";
  }
  return {};
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = std::min(path.find('/', start), path.size());
    parts.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

}  // namespace neuron_cache::layout
