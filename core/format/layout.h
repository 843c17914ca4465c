// The names of the local cache tree shared with libneuronxla and optimum-neuron, and the rule
// that classifies a MODULE_ entry. Every path rule of the on-disk format lives here.
//
//   <root>/lock
//   <root>/neuronxcc-<full compiler version>/MODULE_<graph key>+<flags key>/{model.neff, ...}
//   <root>/neuronxcc-<version>/MODULE_<entry hash>/...           (traced export, no flags key)
//   <root>/neuronxcc-<version>/0_REGISTRY/<optimum version>/...  (see registry.h)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::layout {

inline constexpr std::string_view kDefaultCacheRoot = "/var/tmp/neuron-compile-cache";
inline constexpr std::string_view kCompilerDirPrefix = "neuronxcc-";
inline constexpr std::string_view kModulePrefix = "MODULE_";
inline constexpr std::string_view kRegistryDir = "0_REGISTRY";
inline constexpr std::string_view kRootLock = "lock";

inline constexpr std::string_view kNeff = "model.neff";
inline constexpr std::string_view kDone = "model.done";
inline constexpr std::string_view kLog = "model.log";
inline constexpr std::string_view kHlo = "model.hlo_module.pb";
inline constexpr std::string_view kLegacyHlo = "model.hlo.pb";
inline constexpr std::string_view kFlagsJson = "compile_flags.json";
inline constexpr std::string_view kLegacyFlagsTxt = "compile_flags.txt";
inline constexpr std::string_view kEntryLock = "model.hlo_module.pb.lock";
inline constexpr std::string_view kWrappedNeff = "wrapped_neff.hlo";

// Private work area of this tool inside the root. Python's upload_folder skips any
// ".cache/huggingface" path, so a staging leftover is never published by optimum-cli synchronize,
// and it sits on the same filesystem as the entries, so renames out of it are atomic.
inline constexpr std::string_view kStagingDir = ".cache/huggingface/neuron-cache-staging";

std::string compiler_dir_name(std::string_view compiler_version);
// The version part of "neuronxcc-<version>", or nothing for other names.
std::optional<std::string> compiler_version_of(std::string_view dir_name);

// optimum-neuron marks a compiler folder current when its name starts with
// "neuronxcc-<installed version>", so a short version like 2.21.33363.0
// matches 2.21.33363.0+82129205.
bool is_current_compiler_dir(std::string_view dir_name, std::string_view installed_version);

struct ModuleName {
  std::string graph_key;  // opaque: decimal, 20 hex, or a registry entry hash
  std::string flags_key;  // 8 hex; empty for traced exports ("MODULE_<entry hash>")
  std::string dir_name() const;
};
std::optional<ModuleName> parse_module_name(std::string_view dir_name);

bool is_lock_file(std::string_view file_name);

enum class EntryState { Success, Failed, Locked, Empty };

// What classification looks at in one MODULE_ folder.
struct EntryFiles {
  bool has_neff = false;
  bool has_done = false;
  bool has_log = false;
  std::vector<std::string> lock_files;
};

// optimum-neuron's _classify_entry, in its order: SUCCESS (neff and done), FAILED (log without
// neff), LOCKED (any *.lock), else EMPTY (traced export folders included).
EntryState classify(const EntryFiles& files);
std::string_view state_name(EntryState state);  // "success", "failed", "locked", "empty"
// One sentence saying why an entry has its state.
std::string explain(EntryState state, const EntryFiles& files);

}  // namespace neuron_cache::layout
