#include "format/layout.h"

namespace neuron_cache::layout {

std::string compiler_dir_name(std::string_view compiler_version) {
  return std::string(kCompilerDirPrefix) + std::string(compiler_version);
}

std::optional<std::string> compiler_version_of(std::string_view dir_name) {
  if (!dir_name.starts_with(kCompilerDirPrefix)) return std::nullopt;
  return std::string(dir_name.substr(kCompilerDirPrefix.size()));
}

bool is_current_compiler_dir(std::string_view dir_name, std::string_view installed_version) {
  return !installed_version.empty() && dir_name.starts_with(compiler_dir_name(installed_version));
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

bool is_lock_file(std::string_view file_name) {
  return file_name.ends_with(".lock");
}

EntryState classify(const EntryFiles& files) {
  if (files.has_neff && files.has_done) return EntryState::Success;
  if (files.has_log && !files.has_neff) return EntryState::Failed;
  if (!files.lock_files.empty()) return EntryState::Locked;
  return EntryState::Empty;
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
      return "no model.neff with model.done, no model.log and no lock: an incomplete entry or a "
             "traced export folder";
  }
  return {};
}

}  // namespace neuron_cache::layout
